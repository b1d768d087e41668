"""Run fleet-tui's NVML source on a real NVIDIA GPU and keep the evidence.

    scripts/gpu_check.sh [--duration 20] [--interval 0.5] [--load]

Installs nothing. Opens the ``nvml`` source (real nvidia-ml-py), samples for ``--duration`` seconds
every ``--interval`` seconds, prints each snapshot, records them in fleet-tui's recording format,
times every NVML call the source makes per tick, runs the bottleneck analysis over the recording,
and writes everything to ``$OUT`` (or ``./gpu_check_out``):

  gpu_check_trace.jsonl   the snapshots (replay with ``--source replay:PATH``)
  gpu_check_summary.json  devices, unsupported metrics, NVML calls/tick and µs per call, tick time,
                          errors, diagnoses per window
  gpu_check.log           what was printed
  gpu_check_app.svg       with ``--app S``: the app's Monitor pane on this GPU after S seconds

``--load`` runs bf16 matmuls with PyTorch (only if torch is already installed) during the middle third,
so GPM's tensor activity and the diagnosis have something to show. ``--app S`` then starts the real
app (``--source nvml``, headless Textual driver, 120x40) for S seconds and checks that the Monitor
pane shows a card per GPU with live readings. Exit status: 0 ok, 1 the app check failed, 2 no
GPU/NVML.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOAD_SNIPPET = """
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


class TimedNvml(types.ModuleType):
    """pynvml with every nvml* function timed and counted (per tick, reset by the caller)."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__("pynvml")
        self._real = real
        self.calls: dict[str, list[float]] = defaultdict(list)
        for name, value in vars(real).items():
            if name.startswith("nvml") and callable(value) and not isinstance(value, type):
                setattr(self, name, self._wrap(name, value))

    def _wrap(self, name, fn):
        calls = self.calls

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                if name != "nvmlEventSetWait_v2":  # the XID thread blocks here by design
                    calls[name].append((time.perf_counter() - t0) * 1e6)

        return timed

    def __getattr__(self, name):  # constants, structs, NVMLError classes
        return getattr(self._real, name)


def fmt(v, spec="{:.0f}", none="-"):
    return none if v is None else spec.format(v)


def line_for(d) -> str:
    gib = 1024**3
    known = d.mem_used_bytes is not None and d.mem_total_bytes
    mem = f"{d.mem_used_bytes / gib:.1f}/{d.mem_total_bytes / gib:.0f}GiB" if known else "-"
    return (
        f"  GPU{d.index} {d.state:4} util={fmt(d.gpu_util_pct)}% sm={fmt(d.sm_active_pct, '{:.1f}')}% "
        f"tensor={fmt(d.tensor_active_pct, '{:.1f}')}% dram={fmt(d.dram_active_pct, '{:.1f}')}% "
        f"mem={mem} {fmt(d.power_w)}/{fmt(d.power_limit_w)}W {fmt(d.temp_c)}C "
        f"sm_clk={fmt(d.sm_clock_mhz)}/{fmt(d.sm_clock_max_mhz)} reasons={d.throttle_reasons or '-'} "
        f"pcie_rx={fmt(d.pcie_rx_bytes_s and d.pcie_rx_bytes_s / 1e9, '{:.2f}')}GB/s procs={len(d.processes)}"
    )


async def run(args, out: Path, log) -> int:
    fake = None
    if args.fake:  # dry run of this script against the recorded-H200 fake (tests/fakes)
        from tests.fakes.fake_pynvml import FakeNvml

        fake = FakeNvml.h200(devices=2)
        pynvml = fake.module
        log("DRY RUN with the fake pynvml (recorded H200 values), not a real GPU")
    else:
        try:
            import pynvml
        except ImportError:
            log("FAIL: nvidia-ml-py (pynvml) is not installed in this Python; nothing to check.")
            return 2
    from fleet_tui.core.monitor.source import SourceUnavailable
    from fleet_tui.core.monitor.sources.nvml import NvmlSource
    from fleet_tui.core.monitor.trace import RecordingWriter

    timed = TimedNvml(pynvml)
    src = NvmlSource(nvml=timed)
    t_open = time.perf_counter()
    try:
        await src.open()
    except SourceUnavailable as exc:
        log(f"FAIL: no usable NVIDIA GPU here: {exc}")
        return 2
    open_ms = (time.perf_counter() - t_open) * 1e3
    open_calls = {k: len(v) for k, v in timed.calls.items()}
    timed.calls.clear()
    log(f"NVML opened in {open_ms:.1f} ms; driver {src.driver_version}; {len(src._devices)} GPU(s)")

    load = None
    if args.load:
        try:
            import torch  # noqa: F401
        except ImportError:
            log("--load: torch is not installed; running without load")
        else:
            third = args.duration / 3
            await asyncio.sleep(0)
            load_at = time.monotonic() + third
            load = (load_at, third)

    snaps, tick_ms, per_tick_calls = [], [], []
    per_fn_us: dict[str, list[float]] = defaultdict(list)
    errors: set[str] = set()
    proc = None
    trace_path = out / "gpu_check_trace.jsonl"
    if trace_path.exists():
        trace_path.unlink()
    end = time.monotonic() + args.duration
    with RecordingWriter(trace_path) as rec:
        while time.monotonic() < end:
            if load and proc is None and time.monotonic() >= load[0]:
                proc = subprocess.Popen([sys.executable, "-c", LOAD_SNIPPET, str(load[1])])
                log(f"-- load started (bf16 matmuls for {load[1]:.0f} s)")
            t0 = time.perf_counter()
            snap = await src.sample()
            tick_ms.append((time.perf_counter() - t0) * 1e3)
            n = 0
            for name, lat in timed.calls.items():
                per_fn_us[name].extend(lat)
                n += len(lat)
            per_tick_calls.append(n)
            timed.calls.clear()
            rec.write(snap)
            snaps.append(snap)
            if fake is not None:
                fake.advance(max(1, round(args.interval / 0.2)))  # the trace has a row every 0.2 s
            errors.update(snap.errors)
            log(f"t={snap.timestamp - snaps[0].timestamp:6.2f}s tick={tick_ms[-1]:.2f}ms calls={n}")
            for d in snap.devices:
                log(line_for(d))
            await asyncio.sleep(max(0.0, args.interval - (time.perf_counter() - t0)))
    if proc is not None:
        proc.wait(timeout=60)
    await src.close()

    diagnoses, phases = [], []
    try:
        from fleet_tui.core.monitor.analysis import analyze_trace
        from fleet_tui.core.monitor.analysis.stream import analyze_stream

        # phase by phase, as `fleet-tui analyze` and the live monitor cut the trace; then fixed
        # windows, which can straddle a change (a job starting or ending inside one)
        for a in analyze_stream(snaps):
            phases.append(a.to_dict())
            log(f"phase  {a.start - snaps[0].timestamp:5.1f}-{a.end - snaps[0].timestamp:5.1f}s "
                f"GPU{a.device_index}: {a.primary}")
        for a in analyze_trace(snaps, window_s=args.window):
            diagnoses.append(a.to_dict())
            d0 = a.primary_diagnosis
            log(f"window {a.start - snaps[0].timestamp:5.1f}-{a.end - snaps[0].timestamp:5.1f}s GPU{a.device_index}: "
                f"{a.primary}" + (f" ({d0.confidence:.2f}): {d0.explanation}" if d0 else ""))
    except ImportError as exc:
        log(f"analysis not available: {exc}")

    last = snaps[-1]
    summary = {
        "driver": src.driver_version,
        "open_ms": round(open_ms, 2),
        "open_calls": open_calls,
        "interval_s": args.interval,
        "ticks": len(snaps),
        "tick_ms": {"median": round(statistics.median(tick_ms), 3), "max": round(max(tick_ms), 3)},
        "nvml_calls_per_tick": {"median": statistics.median(per_tick_calls), "max": max(per_tick_calls)},
        "nvml_us_per_call": {
            name: {"n": len(v), "median": round(statistics.median(v), 2), "max": round(max(v), 2)}
            for name, v in sorted(per_fn_us.items())
        },
        "devices": [
            {"index": d.index, "name": d.name, "uuid": d.uuid, "state": d.state, "gpm_supported": d.gpm_supported,
             "mig_enabled": d.mig_enabled, "unsupported": sorted(d.unsupported), "extra": dict(d.extra)}
            for d in last.devices
        ],
        "errors": sorted(errors),
        "phases": phases,
        "diagnoses": diagnoses,
    }
    (out / "gpu_check_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    log(f"NVML calls per tick: median {summary['nvml_calls_per_tick']['median']}; tick median "
        f"{summary['tick_ms']['median']} ms (max {summary['tick_ms']['max']} ms)")
    for name, st in summary["nvml_us_per_call"].items():
        log(f"  {name:45} n={st['n']:5} median={st['median']:9.2f} us max={st['max']:9.2f} us")
    log(f"wrote {trace_path}, {out / 'gpu_check_summary.json'}")
    return 0


def build(source: str = "nvml"):
    """The app as ``fleet-tui --source SOURCE --interval 0.5`` builds it (outside any event loop:
    build_app probes the source with asyncio.run, as the CLI does before the app starts)."""
    from fleet_tui.ui.launch import AppConfig, build_app

    return build_app(AppConfig(source=source, interval_s=0.5, theme="dark"))


async def app_check(app, seconds: float, out: Path, log, summary: dict) -> int:
    """The real app on the real GPU: a card per device, LIVE in the status line, a screenshot."""
    from fleet_tui.ui.widgets.chrome import StatusLine
    from fleet_tui.ui.widgets.device_card import DeviceCard

    t0 = time.perf_counter()
    result: dict = {"ok": False}
    async with app.run_test(size=(120, 40)) as pilot:
        end = time.monotonic() + seconds
        first_card_s = None
        while time.monotonic() < end:
            await pilot.pause(0.25)
            if first_card_s is None and app.screen.query(DeviceCard):
                first_card_s = round(time.perf_counter() - t0, 2)
        cards = list(app.screen.query(DeviceCard))
        status = str(app.screen.query_one(StatusLine).render())
        latest = app.monitor.latest
        n_dev = len(latest.snapshot.devices) if latest else 0
        svg = app.export_screenshot(title="fleet-tui monitor on a real GPU (scripts/gpu_check.py --app)")
        (out / "gpu_check_app.svg").write_text(svg, encoding="utf-8")
        card_text = ["\n".join("".join(seg.text for seg in c.render_line(y)).rstrip()
                                for y in range(c.size.height)) for c in cards]
        result = {"mode": app.current_mode, "cards": len(cards), "devices": n_dev,
                  "first_card_s": first_card_s, "status_line": status,
                  "ok": app.current_mode == "monitor" and n_dev > 0 and len(cards) == n_dev
                  and "LIVE" in status and "SIMULATED" not in status,
                  "card_text": card_text}
    summary["app"] = result
    log(f"app: mode={result.get('mode')} cards={result.get('cards')} devices={result.get('devices')} "
        f"first card after {result.get('first_card_s')} s; status: {result.get('status_line')}")
    for text in result.get("card_text", []):
        log(text)
    log("app check: " + ("ok" if result["ok"] else "FAILED"))
    return 0 if result["ok"] else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--window", type=float, default=5.0, help="analysis window (s)")
    ap.add_argument("--load", action="store_true", help="run bf16 matmuls (needs torch) in the middle third")
    ap.add_argument("--fake", action="store_true", help="dry run against the fake pynvml (no GPU needed)")
    ap.add_argument("--app", type=float, default=0.0, metavar="S",
                    help="then run the app on --source nvml for S seconds (real GPU only)")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT") or "gpu_check_out")
    out.mkdir(parents=True, exist_ok=True)
    log_fh = (out / "gpu_check.log").open("w", encoding="utf-8")

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_fh.write(msg + "\n")

    try:
        rc = asyncio.run(run(args, out, log))
        if rc == 0 and args.app > 0 and not args.fake:
            summary_path = out / "gpu_check_summary.json"
            summary = json.loads(summary_path.read_text())
            try:
                rc = asyncio.run(app_check(build("nvml"), args.app, out, log, summary))
            except Exception as exc:  # noqa: BLE001 - the evidence is what failed, kept in the summary
                import traceback

                log("app check FAILED with an exception:\n" + traceback.format_exc())
                summary["app"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                rc = 1
            summary_path.write_text(json.dumps(summary, indent=1, default=str))
        return rc
    finally:
        log_fh.close()


if __name__ == "__main__":
    sys.exit(main())
