"""Record a labelled NVML + GPM corpus on a real NVIDIA GPU, in the bundled trace's format.

    python scripts/capture_corpus.py OUT.jsonl [--seconds 12] [--gap 4] [--only NAME,...]
                                     [--device 0] [--interval 0.2] [--take a|b|c] [--list]

Runs each workload of ``WORKLOADS`` for ``--seconds`` with an idle gap of ``--gap`` seconds between
them, while a sampler thread records every ``--interval`` s the same fields as
``fleet_tui/demo/h200_trace_labelled.jsonl`` (``gpu_util``, ``mem_used_bytes``, ``power_mw`` ...,
GPM metrics over each interval, psutil host CPU in total and per core) with the workload's name as
the ``phase`` label. The first lines are the ``static`` device facts and a ``labels`` line giving,
for each label, the primary diagnosis it is expected to get (and the risks), which
``bench/bench_diagnosis_accuracy.py`` scores against. ``fleet-tui analyze OUT.jsonl`` reads it as is.

Workloads need PyTorch with CUDA (installs nothing); without torch only ``idle`` runs. Exit status:
0 ok, 2 no GPU/NVML. Nothing here needs a GPU to be tested: tests/scripts/test_capture_corpus.py drives
the sampler with tests/fakes/fake_pynvml.py and the runner with stand-in workloads.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# GPM metric constant name -> trace key (units as NVML gives them: % or MiB/s)
GPM_KEYS = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": "gpm_graphics_util",
    "NVML_GPM_METRIC_SM_UTIL": "gpm_sm_util",
    "NVML_GPM_METRIC_SM_OCCUPANCY": "gpm_sm_occupancy",
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": "gpm_any_tensor_util",
    "NVML_GPM_METRIC_HMMA_TENSOR_UTIL": "gpm_hmma_tensor_util",
    "NVML_GPM_METRIC_DRAM_BW_UTIL": "gpm_dram_bw_util",
    "NVML_GPM_METRIC_FP32_UTIL": "gpm_fp32_util",
    "NVML_GPM_METRIC_FP16_UTIL": "gpm_fp16_util",
    "NVML_GPM_METRIC_PCIE_TX_PER_SEC": "gpm_pcie_tx_mib_s",
    "NVML_GPM_METRIC_PCIE_RX_PER_SEC": "gpm_pcie_rx_mib_s",
    "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC": "gpm_nvlink_rx_mib_s",
    "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC": "gpm_nvlink_tx_mib_s",
}


@dataclass(frozen=True)
class Workload:
    """One labelled behaviour: the primary it should get, risks it should (not) raise, and the
    function that produces it for ``seconds`` (``torch`` passed in; None for idle)."""

    expected: tuple[str, ...]  # acceptable primaries
    run: Callable[[Any, float], None]
    risks: tuple[str, ...] = ()  # risks that must be reported
    no_risks: tuple[str, ...] = ()  # risks that must not be reported
    needs_torch: bool = True


def _until(seconds: float) -> Callable[[], bool]:
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end


def _idle(torch: Any, seconds: float) -> None:
    time.sleep(seconds)


def _matmul(dtype: str, tf32: bool, n: int = 8192, per_sync: int = 4) -> Callable[[Any, float], None]:
    def run(torch: Any, seconds: float) -> None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
        go = _until(seconds)
        while go():
            for _ in range(per_sync):
                a @ b
            torch.cuda.synchronize()
        torch.backends.cuda.matmul.allow_tf32 = False
    return run


def _small_kernels(size: int = 256, per_sync: int = 1000) -> Callable[[Any, float], None]:
    def run(torch: Any, seconds: float) -> None:
        x = torch.ones(size, device="cuda")
        go = _until(seconds)
        while go():
            for _ in range(per_sync):
                x = x * 1.0001 + 0.0001
            torch.cuda.synchronize()
    return run


def _copies(to_device: bool, block: int = 1 << 30) -> Callable[[Any, float], None]:
    def run(torch: Any, seconds: float) -> None:
        host = torch.empty(block, dtype=torch.uint8).pin_memory()
        dev = torch.empty(block, dtype=torch.uint8, device="cuda")
        go = _until(seconds)
        while go():
            (dev.copy_(host, non_blocking=True) if to_device else host.copy_(dev, non_blocking=True))
            torch.cuda.synchronize()
    return run


def _hbm_copies(block: int = 2 << 30) -> Callable[[Any, float], None]:
    def run(torch: Any, seconds: float) -> None:
        a = torch.empty(block, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        go = _until(seconds)
        while go():
            b.copy_(a)
            torch.cuda.synchronize()
    return run


def _loader(workers: int, item_loop: int = 200_000) -> Callable[[Any, float], None]:
    """A DataLoader whose items cost CPU time (a Python loop standing in for decoding and
    augmentation), feeding a short bf16 step: the GPU waits on the host, less with more workers."""
    def run(torch: Any, seconds: float) -> None:
        from torch.utils.data import DataLoader, Dataset

        class Costly(Dataset):
            def __len__(self) -> int:
                return 1 << 30

            def __getitem__(self, i: int):
                s = 0
                for k in range(item_loop):  # ~10-20 ms of Python per item (200k)
                    s += k * k
                return torch.full((256,), float(s % 7))

        w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        loader = DataLoader(Costly(), batch_size=4, num_workers=workers)
        go = _until(seconds)
        for batch in loader:
            x = batch.to("cuda").to(torch.bfloat16).repeat(16, 16)[:4096, :4096]
            (x @ w).sum().item()
            if not go():
                break
    return run


def _leak(step_mib: int = 64, every_s: float = 0.5, n: int = 8192) -> Callable[[Any, float], None]:
    """bf16 matmuls that keep ``step_mib`` MiB more every ``every_s`` s (a list never freed)."""
    def run(torch: Any, seconds: float) -> None:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        kept = []
        go = _until(seconds)
        last = 0.0
        while go():
            a @ a
            torch.cuda.synchronize()
            if time.monotonic() - last >= every_s:
                kept.append(torch.empty(step_mib << 20, dtype=torch.uint8, device="cuda"))
                last = time.monotonic()
    return run


def _staircase(steps: int = 3, step_mib: int = 512, spacing_s: float = 1.0,
               n: int = 8192) -> Callable[[Any, float], None]:
    """bf16 matmuls with ``steps`` one-off allocations early on, then flat memory."""
    def run(torch: Any, seconds: float) -> None:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        kept = []
        start = time.monotonic()
        go = _until(seconds)
        while go():
            a @ a
            torch.cuda.synchronize()
            if len(kept) < steps and time.monotonic() - start >= spacing_s * len(kept):
                kept.append(torch.empty(step_mib << 20, dtype=torch.uint8, device="cuda"))
    return run


def _workloads_a() -> dict[str, Workload]:
    """Take A, the tune take: the sizes the rules were written against."""
    return {
        "idle": Workload(("idle",), _idle, needs_torch=False),
        "matmul_fp32": Workload(("compute_no_tensor_cores",), _matmul("float32", False)),
        "matmul_tf32": Workload(("healthy_compute", "power_capped"), _matmul("float32", True)),
        "matmul_bf16": Workload(("healthy_compute",), _matmul("bfloat16", False)),
        "small_kernels": Workload(("launch_bound",), _small_kernels()),
        "copy_h2d": Workload(("host_transfer_bound",), _copies(True)),
        "copy_d2h": Workload(("host_transfer_bound",), _copies(False)),
        "hbm_copy": Workload(("memory_bandwidth_bound",), _hbm_copies()),
        "loader_w0": Workload(("cpu_bound_host", "input_starved"), _loader(0)),
        "loader_w2": Workload(("cpu_bound_host", "input_starved"), _loader(2)),
        "loader_w8": Workload(("input_starved", "cpu_bound_host", "healthy_compute"), _loader(8)),
        "slow_leak": Workload(("healthy_compute",), _leak(), risks=("memory_growth",)),
        "alloc_staircase": Workload(("healthy_compute",), _staircase(), no_risks=("memory_growth",)),
    }


def _workloads_b() -> dict[str, Workload]:
    """Take B, the holdout take: the same behaviours at other sizes, rates and worker counts, so
    that a score on it is not a score on the shapes the thresholds were read from. Record it at
    another sampling interval too (the capture script's --interval)."""
    return {
        "idle": Workload(("idle",), _idle, needs_torch=False),
        "matmul_fp32": Workload(("compute_no_tensor_cores",), _matmul("float32", False, 6144, 8)),
        "matmul_tf32": Workload(("healthy_compute", "power_capped"),
                                _matmul("float32", True, 6144, 8)),
        "matmul_fp16": Workload(("healthy_compute",), _matmul("float16", False, 6144, 16)),
        "small_kernels": Workload(("launch_bound",), _small_kernels(4096, 500)),
        "copy_h2d": Workload(("host_transfer_bound",), _copies(True, 256 << 20)),
        "copy_d2h": Workload(("host_transfer_bound",), _copies(False, 256 << 20)),
        "hbm_copy": Workload(("memory_bandwidth_bound",), _hbm_copies(1 << 30)),
        "loader_w1": Workload(("cpu_bound_host", "input_starved"), _loader(1, 120_000)),
        "loader_w4": Workload(("input_starved", "cpu_bound_host", "healthy_compute"),
                              _loader(4, 120_000)),
        "slow_leak": Workload(("healthy_compute",), _leak(32, 0.5, 6144), risks=("memory_growth",)),
        "alloc_staircase": Workload(("healthy_compute",), _staircase(4, 256, 1.5, 6144),
                                    no_risks=("memory_growth",)),
    }


def _fill(fraction: float, step_gib: float, every_s: float,
          compute: bool) -> Callable[[Any, float], None]:
    """Allocate to ``fraction`` of the device at once (compute: with bf16 matmuls running), or,
    with ``step_gib``, ``step_gib`` GiB every ``every_s`` s from half the device until ``fraction``
    of it: a fast leak on an otherwise idle GPU."""
    def run(torch: Any, seconds: float) -> None:
        free, total = torch.cuda.mem_get_info()
        used = total - free
        kept = []
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) if compute else None
        target = int(fraction * total)
        if step_gib:
            first = max(0, int(0.5 * total) - used)
            kept.append(torch.empty(first, dtype=torch.uint8, device="cuda"))
        else:
            kept.append(torch.empty(max(0, target - used - (256 << 20)), dtype=torch.uint8,
                                    device="cuda"))
        go = _until(seconds)
        last = time.monotonic()
        while go():
            if a is not None:
                a @ a
                torch.cuda.synchronize()
            else:
                time.sleep(0.05)
            free, _ = torch.cuda.mem_get_info()
            if step_gib and time.monotonic() - last >= every_s and total - free < target:
                kept.append(torch.empty(int(step_gib * 2**30), dtype=torch.uint8, device="cuda"))
                last = time.monotonic()
    return run


def _workloads_c() -> dict[str, Workload]:
    """Take C, a second holdout take, at the monitor's default 1 s interval (record it with
    --interval 1): other sizes again, a heavier loader, a leak with a slower cadence, and the
    capacity kinds (a device filled to 97 %, a fast leak on an idle GPU)."""
    return {
        "idle": Workload(("idle",), _idle, needs_torch=False),
        "matmul_fp32": Workload(("compute_no_tensor_cores",), _matmul("float32", False, 4096, 16)),
        "matmul_bf16": Workload(("healthy_compute",), _matmul("bfloat16", False, 12288, 2)),
        "small_kernels": Workload(("launch_bound",), _small_kernels(1024, 2000)),
        "copy_h2d": Workload(("host_transfer_bound",), _copies(True, 512 << 20)),
        "hbm_copy": Workload(("memory_bandwidth_bound",), _hbm_copies(4 << 30)),
        "loader_w3": Workload(("cpu_bound_host", "input_starved"), _loader(3, 300_000)),
        "slow_leak": Workload(("healthy_compute",), _leak(256, 2.0, 8192), risks=("memory_growth",)),
        "alloc_staircase": Workload(("healthy_compute",), _staircase(2, 1024, 3.0, 8192),
                                    no_risks=("memory_growth",)),
        "mem_full": Workload(("memory_capacity_pressure",), _fill(0.97, 0.0, 0.0, True)),
        "fast_leak_idle": Workload(("memory_growth", "memory_capacity_pressure"),
                                   _fill(0.95, 2.0, 0.5, False), risks=("memory_growth",)),
    }


TAKES: dict[str, Callable[[], dict[str, Workload]]] = {"a": _workloads_a, "b": _workloads_b,
                                                        "c": _workloads_c}
WORKLOADS: dict[str, Workload] = _workloads_a()


def labels_line(names: list[str], workloads: dict[str, Workload] | None = None) -> dict[str, Any]:
    """The ``labels`` line: what each label should be diagnosed as (``idle_gap`` = the gaps)."""
    w = WORKLOADS if workloads is None else workloads
    out = {n: {"expected": list(w[n].expected), "risks": list(w[n].risks),
               "no_risks": list(w[n].no_risks)} for n in names}
    out["idle_gap"] = {"expected": ["idle"], "risks": [], "no_risks": []}
    return {"kind": "labels", "labels": out}


@dataclass
class Sampler:
    """Samples one device every ``interval`` s into ``out`` (one JSON line each) with the current
    ``label``. ``nvml`` is the pynvml module (real or fake); ``clock`` a monotonic clock."""

    nvml: Any
    out: TextIO
    index: int = 0
    interval: float = 0.2
    clock: Callable[[], float] = time.monotonic
    label: str = "idle_gap"
    psutil: Any = None
    _t0: float = 0.0
    _gpm: list = field(default_factory=list)  # [previous sample, current sample]
    _stop: threading.Event = field(default_factory=threading.Event)

    def open(self) -> dict[str, Any]:
        n = self.nvml
        self.handle = n.nvmlDeviceGetHandleByIndex(self.index)
        h = self.handle
        static = {"kind": "static", "name": _text(n.nvmlDeviceGetName(h)),
                  "uuid": _text(n.nvmlDeviceGetUUID(h)),
                  "memory_total_bytes": n.nvmlDeviceGetMemoryInfo(h).total,
                  "power_limit_mw": _try(n.nvmlDeviceGetEnforcedPowerLimit, h),
                  "max_sm_clock_mhz": _try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_SM),
                  "max_mem_clock_mhz": _try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_MEM),
                  "slowdown_temp_c": _try(n.nvmlDeviceGetTemperatureThreshold, h,
                                          n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                  "pcie_gen_cur": _try(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                  "pcie_width_cur": _try(n.nvmlDeviceGetCurrPcieLinkWidth, h),
                  "mig_mode": _try(n.nvmlDeviceGetMigMode, h)}
        support = _try(n.nvmlGpmQueryDeviceSupport, h)
        static["gpm_supported"] = bool(support and support.isSupportedDevice)
        if static["gpm_supported"]:
            self._gpm = [n.nvmlGpmSampleAlloc(), n.nvmlGpmSampleAlloc()]
            n.nvmlGpmSampleGet(h, self._gpm[0])
        self._t0 = self.clock()
        self._write(static)
        return static

    def _write(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj) + "\n")

    def sample_once(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        util = _try(n.nvmlDeviceGetUtilizationRates, h)
        mem = n.nvmlDeviceGetMemoryInfo(h)
        s: dict[str, Any] = {
            "kind": "sample", "t": round(self.clock() - self._t0, 3), "phase": self.label,
            "gpu_util": util.gpu if util else None, "mem_util": util.memory if util else None,
            "mem_used_bytes": mem.used,
            "temp_c": _try(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            "power_mw": _try(n.nvmlDeviceGetPowerUsage, h),
            "sm_clock_mhz": _try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            "mem_clock_mhz": _try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            "clock_event_reasons": _try(n.nvmlDeviceGetCurrentClocksEventReasons, h),
            "pstate": _try(n.nvmlDeviceGetPerformanceState, h),
            "pcie_tx_kb_s": _try(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES),
            "pcie_rx_kb_s": _try(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES),
            "procs": [{"pid": p.pid, "used_bytes": p.usedGpuMemory}
                      for p in (_try(n.nvmlDeviceGetComputeRunningProcesses, h) or ())],
        }
        if self._gpm:
            s.update(self._gpm_metrics())
        if self.psutil is not None:
            per = self.psutil.cpu_percent(percpu=True)
            s["host_cpu_pct"] = round(sum(per) / len(per), 1) if per else None
            s["host_cpu_per_core_pct"] = per
            s["host_mem_pct"] = self.psutil.virtual_memory().percent
        self._write(s)
        return s

    def _gpm_metrics(self) -> dict[str, float]:
        n = self.nvml
        prev, cur = self._gpm
        n.nvmlGpmSampleGet(self.handle, cur)
        req = n.c_nvmlGpmMetricsGet_t()
        req.version = n.NVML_GPM_METRICS_GET_VERSION
        req.sample1, req.sample2 = prev, cur
        names = [k for k in GPM_KEYS if hasattr(n, k)]
        req.numMetrics = len(names)
        for j, name in enumerate(names):
            req.metrics[j].metricId = getattr(n, name)
        out: dict[str, float] = {}
        try:
            n.nvmlGpmMetricsGet(req)
            for j, name in enumerate(names):
                m = req.metrics[j]
                if m.nvmlReturn == n.NVML_SUCCESS:
                    out[GPM_KEYS[name]] = m.value
        except n.NVMLError:
            pass
        self._gpm = [cur, prev]  # the current sample starts the next interval
        return out

    def run(self) -> None:
        """Sample until ``stop()``, each tick scheduled after the previous one finished."""
        while not self._stop.is_set():
            started = self.clock()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (self.clock() - started)))

    def stop(self) -> None:
        self._stop.set()


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _try(fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - an unsupported reading is recorded as null
        return None


def run_plan(sampler: Sampler, names: list[str], torch: Any, *, seconds: float, gap: float,
             sleep: Callable[[float], None] = time.sleep,
             workloads: dict[str, Workload] | None = None) -> list[tuple[str, str]]:
    """Run each workload for ``seconds`` with ``gap`` idle seconds around it, labelling the
    samples; returns (label, outcome) per workload ("ok", "skipped: ...", "failed: ...")."""
    workloads = WORKLOADS if workloads is None else workloads
    sampler._write(labels_line(names, workloads))
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    done = []
    try:
        for name in names:
            w = workloads[name]
            sampler.label = "idle_gap"
            sleep(gap)
            if w.needs_torch and torch is None:
                done.append((name, "skipped: needs torch with CUDA"))
                continue
            sampler.label = name
            try:
                w.run(torch, seconds)
                done.append((name, "ok"))
            except Exception as exc:  # noqa: BLE001 - keep recording the other workloads
                done.append((name, f"failed: {type(exc).__name__}: {exc}"))
            finally:
                if torch is not None:
                    torch.cuda.empty_cache()
        sampler.label = "idle_gap"
        sleep(gap)
    finally:
        sampler.stop()
        thread.join()
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="corpus.jsonl")
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--gap", type=float, default=4.0)
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--only", default=None, help="comma-separated workload names")
    p.add_argument("--take", choices=sorted(TAKES), default="a",
                   help="a: the tune take (default); b, c: holdout takes, other sizes and rates "
                   "(c: record at --interval 1)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = p.parse_args(argv)
    workloads = TAKES[args.take]()
    if args.list:
        for name, w in workloads.items():
            print(f"{name:16s} expected {', '.join(w.expected)}")
        return 0
    names = args.only.split(",") if args.only else list(workloads)
    unknown = [n for n in names if n not in workloads]
    if unknown:
        print(f"unknown workload(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        print(f"no NVIDIA GPU / NVML: {exc}", file=sys.stderr)
        return 2
    try:
        import torch

        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    try:
        import psutil
    except ImportError:
        psutil = None
    with Path(args.out).open("w", buffering=1) as fh:  # line-buffered: a cut-off run keeps its lines
        sampler = Sampler(pynvml, fh, index=args.device, interval=args.interval, psutil=psutil)
        sampler.open()
        for name, outcome in run_plan(sampler, names, torch, seconds=args.seconds,
                                      gap=args.gap, workloads=workloads):
            print(f"{name:16s} {outcome}", flush=True)
    pynvml.nvmlShutdown()
    print(f"wrote {args.out}; score it: python bench/bench_diagnosis_accuracy.py {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
