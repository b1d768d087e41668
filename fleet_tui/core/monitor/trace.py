"""Read recorded traces as a stream of ``Snapshot``s (for ``replay:PATH``, ``analyze`` and tests).

Two formats, told apart by their first line:

* **raw capture** (``reference/ground-truth/h200/trace_labelled.jsonl``): a ``{"kind": "static"}``
  line of device facts, then ``{"kind": "sample"}`` lines every 0.2 s with NVML/GPM readings named
  after the NVML calls (``gpu_util``, ``power_mw``, ``pcie_rx_kb_s``, ``gpm_sm_util`` ...) and a
  ground-truth ``phase`` label. Mapped here onto ``DeviceSnapshot`` fields with units converted.
* **fleet-tui recording**: an optional header ``{"kind": "fleet-tui-recording"}`` then one
  serialized ``Snapshot`` per line (``serialize.snapshot_to_dict``), as written by
  ``RecordingWriter``.

Timestamps of raw captures are seconds since the trace began (``base_time`` + ``t``): the capture
stores no wall clock.

Bad input is never a traceback nor a silent guess: NaN/inf readings are missing values (``None``);
a wrong type is ``file:line: field: expected a number``; a line nested too deeply or not JSON names
its line; timestamps that go back are a ``TraceOrderError`` at that line (``load_sorted`` sorts a
file small enough to hold), and a repeated timestamp is skipped and counted (``TraceReader.repeats``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from fleet_tui.core.fsutil import atomic_writer, iter_lines_capped, open_regular
from fleet_tui.core.limits import limit
from fleet_tui.core.monitor.serialize import RECORDING_FORMAT, BadField, number, snapshot_from_dict, snapshot_to_dict
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo, Snapshot
from fleet_tui.core.monitor.source import SourceUnavailable

DEMO_TRACE = Path(__file__).resolve().parent.parent.parent / "demo" / "h200_trace_labelled.jsonl"

# Keys in ``DeviceSnapshot.extra`` that analysis reads when present (sources set them where known).
EXTRA_PCIE_GEN = "pcie_link_gen"
EXTRA_PCIE_WIDTH = "pcie_link_width"
EXTRA_PCIE_GEN_MAX = "pcie_link_gen_max"
EXTRA_PCIE_WIDTH_MAX = "pcie_link_width_max"

_MIB = 1024 * 1024
# NVML reports PCIe throughput in "KB/s"; like nvitop we read KB as 1024 bytes.
_NVML_KB = 1024


def resolve_trace_path(spec: str | os.PathLike[str]) -> Path:
    """``demo`` means the bundled labelled H200 trace; anything else is a file path."""
    if str(spec) == "demo":
        return DEMO_TRACE
    path = Path(spec).expanduser()
    if not path.is_file():
        raise SourceUnavailable(f"trace file {str(spec)!r} not found (give a path to a .jsonl "
                                f"recording, or 'demo' for the bundled H200 trace)")
    return path


def _num(value: Any, scale: float = 1.0, field: str = "value") -> float | None:
    """A reading as a float (``None`` when N/A, NaN or inf); ``BadField`` for a wrong type."""
    v = number(value, field, scale)
    return None if v is None else float(v)


def _int(value: Any, field: str) -> int | None:
    v = number(value, field)
    return None if v is None else int(v)


def static_device_kwargs(static: dict[str, Any]) -> dict[str, Any]:
    """The ``DeviceSnapshot`` fields a raw capture's ``{"kind": "static"}`` line gives."""
    power_limit = static.get("enforced_power_limit_mw", static.get("power_limit_mw"))
    mig = static.get("mig_mode")
    extra: list[tuple[str, float]] = []
    for key, out in (("pcie_gen_cur", EXTRA_PCIE_GEN), ("pcie_width_cur", EXTRA_PCIE_WIDTH),
                     ("pcie_gen_max", EXTRA_PCIE_GEN_MAX), ("pcie_width_max", EXTRA_PCIE_WIDTH_MAX)):
        v = _num(static.get(key), 1.0, key)
        if v is not None:
            extra.append((out, v))
    return {
        "name": static.get("name", "unknown"),
        "uuid": static.get("uuid", ""),
        "mem_total_bytes": _int(static.get("memory_total_bytes"), "memory_total_bytes"),
        "power_limit_w": _num(power_limit, 1e-3, "power_limit_mw"),
        "sm_clock_max_mhz": _num(static.get("max_sm_clock_mhz"), 1.0, "max_sm_clock_mhz"),
        "mem_clock_max_mhz": _num(static.get("max_mem_clock_mhz"), 1.0, "max_mem_clock_mhz"),
        "slowdown_temp_c": _num(static.get("slowdown_temp_c"), 1.0, "slowdown_temp_c"),
        "gpm_supported": static.get("gpm_supported"),
        "mig_enabled": bool(mig[0]) if isinstance(mig, (list, tuple)) and mig else False,
        "extra": tuple(extra),
    }


# raw capture readings kept as DeviceSnapshot extras (key, extra name, scale)
_EXTRAS = (("pcie_rx_kb_s", "nvml_pcie_rx_bytes_s", float(_NVML_KB)),
           ("pcie_tx_kb_s", "nvml_pcie_tx_bytes_s", float(_NVML_KB)),
           ("gpm_graphics_util", "gpm_graphics_util_pct", 1.0),
           ("gpm_hmma_tensor_util", "gpm_hmma_tensor_util_pct", 1.0),
           ("host_mem_pct", "host_mem_pct", 1.0))
# raw capture key -> DeviceSnapshot field, scale, whether an integer
_READINGS = (
    ("gpu_util", "gpu_util_pct", 1.0, False), ("mem_util", "mem_util_pct", 1.0, False),
    ("mem_used_bytes", "mem_used_bytes", 1, True), ("temp_c", "temp_c", 1.0, False),
    ("power_mw", "power_w", 1e-3, False), ("sm_clock_mhz", "sm_clock_mhz", 1.0, False),
    ("mem_clock_mhz", "mem_clock_mhz", 1.0, False),
    ("clock_event_reasons", "clock_event_reasons", 1, True), ("pstate", "pstate", 1, True),
    ("gpm_nvlink_rx_mib_s", "nvlink_rx_bytes_s", _MIB, False),
    ("gpm_nvlink_tx_mib_s", "nvlink_tx_bytes_s", _MIB, False),
    ("gpm_sm_util", "sm_active_pct", 1.0, False),
    ("gpm_sm_occupancy", "sm_occupancy_pct", 1.0, False),
    ("gpm_any_tensor_util", "tensor_active_pct", 1.0, False),
    ("gpm_dram_bw_util", "dram_active_pct", 1.0, False),
    ("gpm_fp32_util", "fp32_active_pct", 1.0, False),
    ("gpm_fp16_util", "fp16_active_pct", 1.0, False),
)


def raw_extras(sample: dict[str, Any], static_kwargs: dict[str, Any]) -> tuple:
    """The ``DeviceSnapshot.extra`` of a ``{"kind": "sample"}`` line: the static line's, then
    the sample's readings kept as extras."""
    extra = list(static_kwargs.get("extra", ()))
    for key, out, scale in _EXTRAS:
        v = sample.get(key)
        if v is not None:
            tv = type(v)
            if tv is float or tv is int:
                if v - v == 0:  # not NaN/inf
                    extra.append((out, v * scale))
            else:
                raise BadField(key)
    return tuple(extra)


def raw_processes(sample: dict[str, Any]) -> tuple[ProcessInfo, ...]:
    """The ``DeviceSnapshot.processes`` of a ``{"kind": "sample"}`` line."""
    procs = sample.get("procs")
    if not procs:
        return ()
    if not isinstance(procs, list) or not all(isinstance(p, dict) for p in procs):
        raise BadField("procs", "a list of objects")
    return tuple(ProcessInfo(pid=_int(p.get("pid", 0), "procs.pid") or 0, device_index=0,
                             used_gpu_bytes=_int(p.get("used_bytes"), "procs.used_bytes"),
                             # a command line, where the capture has one (bounded)
                             command=p["command"][:256] if isinstance(p.get("command"), str)
                             else None)
                 for p in procs)


def raw_pcie_rx(sample: dict[str, Any]) -> float | None:
    """Host-to-device bytes/s of a raw sample: GPM's counter (measured over the whole interval)
    where the line has it, else nvmlDeviceGetPcieThroughput's (a 20 ms sample)."""
    if sample.get("gpm_pcie_rx_mib_s") is not None:
        return _num(sample.get("gpm_pcie_rx_mib_s"), _MIB, "gpm_pcie_rx_mib_s")
    return _num(sample.get("pcie_rx_kb_s"), _NVML_KB, "pcie_rx_kb_s")


def raw_sample_to_snapshot(sample: dict[str, Any], static_kwargs: dict[str, Any], *,
                           source: str, base_time: float = 0.0) -> Snapshot:
    """One ``{"kind": "sample"}`` line of the raw capture format as a ``Snapshot``."""
    t = _num(sample.get("t", 0.0), 1.0, "t")
    if t is None:
        raise BadField("t", "a finite number of seconds")
    t += base_time
    gpm = "gpm_sm_util" in sample
    # Prefer GPM's PCIe counters (measured over the whole interval) over nvmlDeviceGetPcieThroughput
    # (a 20 ms sample); keep the NVML reading as an extra for comparison.
    pcie_rx = raw_pcie_rx(sample)
    if sample.get("gpm_pcie_rx_mib_s") is not None:
        pcie_tx = _num(sample.get("gpm_pcie_tx_mib_s"), _MIB, "gpm_pcie_tx_mib_s")
    else:
        pcie_tx = _num(sample.get("pcie_tx_kb_s"), _NVML_KB, "pcie_tx_kb_s")
    extra = raw_extras(sample, static_kwargs)
    procs = raw_processes(sample)
    phase = sample.get("phase")
    if phase is not None and not isinstance(phase, str):
        raise BadField("phase", "a string")
    unsupported = frozenset() if gpm else frozenset(
        {"sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
         "fp32_active_pct", "fp16_active_pct"})
    kw = dict(static_kwargs)
    kw["index"] = 0
    kw["timestamp"] = t
    # the readings, converted in one loop (a function call per field cost ~30 % of reading a line
    # in bench_analysis's 10^6-line figure)
    for key, out, scale, integer in _READINGS:
        v = sample.get(key)
        if v is not None:
            tv = type(v)
            if tv is float:
                v = v * scale if v - v == 0.0 else None  # NaN/inf: missing
            elif tv is int:
                v = v if integer else v * scale
            else:
                raise BadField(key)
            if integer and v is not None:
                v = int(v)
        kw[out] = v
    kw.update(pcie_rx_bytes_s=pcie_rx, pcie_tx_bytes_s=pcie_tx, unsupported=unsupported,
              processes=procs, phase=phase, extra=extra)
    if not gpm:
        kw["gpm_supported"] = False if kw.get("gpm_supported") is None else kw["gpm_supported"]
    cores = sample.get("host_cpu_per_core_pct")
    if cores is not None:
        if not isinstance(cores, list):
            raise BadField("host_cpu_per_core_pct", "a list of numbers")
        cores = tuple(v for v in (_num(c, 1.0, "host_cpu_per_core_pct") for c in cores)
                      if v is not None)
    host = HostSnapshot(cpu_pct=_num(sample.get("host_cpu_pct"), 1.0, "host_cpu_pct"),
                        cpu_per_core_pct=cores or ())
    return Snapshot(timestamp=t, source=source, source_kind="replay",
                    devices=(DeviceSnapshot(**kw),), host=host)


def bad_line(path: Path, lineno: int, why: str) -> SourceUnavailable:
    return SourceUnavailable(f"{path}:{lineno}: {why} (expected JSON lines: a raw capture with a "
                             f"'static' line then 'sample' lines, or a fleet-tui recording)")


class NotJson(SourceUnavailable):
    """A trace line that is not JSON (``path:lineno`` in the message)."""


def decode_line(path: Path, lineno: int, raw: bytes) -> Any:
    """One line of a trace file as JSON (``None`` for a blank line); ``SourceUnavailable`` naming
    ``path:lineno`` for bytes that are not UTF-8 text or not JSON."""
    try:
        line = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise bad_line(path, lineno, "not UTF-8 text (is this a trace file?)") from None
    if not line:
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise NotJson(str(bad_line(path, lineno, f"not valid JSON ({exc.msg})"))) from None
    except RecursionError:
        raise bad_line(path, lineno, "JSON nested too deeply") from None


# a timestamp's magnitude: seconds until the year 2286; a larger one is milli-, micro- or
# nanoseconds, which the windowing cannot step (5 s added to 1.7e18 is 1.7e18 again)
MAX_TIMESTAMP_S = limit("time_s")


def check_timestamp(path: Path, lineno: int, ts: float) -> None:
    """``SourceUnavailable`` at ``path:lineno`` for a timestamp outside ±``MAX_TIMESTAMP_S``."""
    if not -MAX_TIMESTAMP_S <= ts <= MAX_TIMESTAMP_S:
        unit = " (nanoseconds? timestamps are seconds)" if abs(ts) > 1e15 else ""
        raise SourceUnavailable(f"{path}:{lineno}: timestamp {ts:g} is outside "
                                f"±{MAX_TIMESTAMP_S:g} s{unit}")


class TraceOrderError(SourceUnavailable):
    """Timestamps go back at ``path:lineno`` (the trace reader only reads forward)."""

    def __init__(self, path: Path, lineno: int, ts: float, prev: float):
        super().__init__(f"{path}:{lineno}: timestamp {ts:g} goes back before {prev:g} (the "
                         f"line before): samples must be in time order")
        self.path, self.lineno = path, lineno


class TraceReader:
    """Snapshots of a trace file in order, in either format (see module doc), streamed.

    ``ordered=True`` (the default) raises ``TraceOrderError`` where timestamps go back and skips a
    snapshot whose timestamp repeats the previous one (counted in ``repeats``); ``ordered=False``
    yields every snapshot as the file has it (``load_sorted`` sorts them)."""

    def __init__(self, path: str | os.PathLike[str], *, base_time: float = 0.0,
                 ordered: bool = True):
        self.path = resolve_trace_path(path)
        self.base_time = base_time
        self.ordered = ordered
        self.lineno = 0  # the line of the snapshot last yielded
        self.repeats = 0  # snapshots skipped: same timestamp as the one before

    def __iter__(self) -> Generator[Snapshot, None, None]:
        p = self.path
        source = f"replay:{'demo' if p == DEMO_TRACE else p.name}"
        static_kwargs: dict[str, Any] | None = None
        fmt: str | None = None
        last_ts: float | None = None
        with open_regular(p, "trace") as fh:  # decoded line by line: errors name their line
            for lineno, raw in iter_lines_capped(fh, p):
                try:
                    data = decode_line(p, lineno, raw)
                except NotJson:
                    # A recording cut by a crash may end in a partial line: stop there quietly.
                    if fmt == "recording" and not fh.readline():
                        return
                    raise
                if data is None:
                    continue
                if not isinstance(data, dict):
                    raise bad_line(p, lineno, "a line is not a JSON object")
                kind = data.get("kind")
                if fmt is None:
                    fmt = "raw" if kind in ("static", "sample") else "recording"
                try:
                    if fmt == "raw":
                        if kind == "static":
                            static_kwargs = static_device_kwargs(data)
                            continue
                        if kind != "sample":
                            continue  # other kinds (notes, markers) are skipped
                        snap = raw_sample_to_snapshot(
                            data, static_kwargs or {"name": "unknown"}, source=source,
                            base_time=self.base_time)
                    else:
                        if kind == "fleet-tui-recording":
                            continue
                        if "devices" not in data:
                            raise bad_line(p, lineno, "a recording line has no 'devices'")
                        snap = snapshot_from_dict(data.get("snapshot", data))
                except BadField as exc:
                    raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None
                except (TypeError, ValueError) as exc:  # e.g. DeviceSnapshot(**unknown shape)
                    raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None
                ts = snap.timestamp
                check_timestamp(p, lineno, ts)
                if self.ordered and last_ts is not None and ts <= last_ts:
                    if ts < last_ts:
                        raise TraceOrderError(p, lineno, ts, last_ts)
                    self.repeats += 1
                    continue
                last_ts = ts
                self.lineno = lineno
                yield snap


def iter_trace(path: str | os.PathLike[str], *, base_time: float = 0.0) -> Generator[Snapshot, None, None]:
    """Snapshots of a trace file in time order (see ``TraceReader``). Streams the file."""
    return iter(TraceReader(path, base_time=base_time))


# Sorting needs the whole trace in memory (~2 kB per snapshot): files up to this size are sorted,
# larger ones must come sorted (keeps ``analyze`` under its 200 MB bound).
SORT_MAX_BYTES = 32 * 2**20


class SortedTrace(NamedTuple):
    snapshots: list[Snapshot]
    moved: int  # snapshots that were out of order
    repeats: int  # snapshots dropped: a timestamp seen already (the first one is kept)


def load_sorted(path: str | os.PathLike[str], *,
                max_bytes: int = SORT_MAX_BYTES) -> SortedTrace:
    """The whole trace sorted by time (stable), repeated timestamps dropped. A file over
    ``max_bytes`` is rejected at its first backward step: it is too big to sort in memory."""
    p = resolve_trace_path(path)
    if p.stat().st_size > max_bytes:
        try:
            for _ in TraceReader(p):
                pass
        except TraceOrderError as exc:
            raise SourceUnavailable(f"{exc} (a file over {max_bytes // 2**20} MB is not sorted "
                                    f"in memory: sort it by timestamp first)") from None
        return SortedTrace(load_trace(p), 0, 0)
    snaps = list(TraceReader(p, ordered=False))
    moved = sum(1 for a, b in zip(snaps, snaps[1:]) if b.timestamp < a.timestamp)
    snaps.sort(key=lambda s: s.timestamp)
    out: list[Snapshot] = []
    for s in snaps:
        if out and s.timestamp == out[-1].timestamp:
            continue
        out.append(s)
    return SortedTrace(out, moved, len(snaps) - len(out))


def load_trace(path: str | os.PathLike[str]) -> list[Snapshot]:
    return list(iter_trace(path))


def dump_snapshot_line(snapshot: Snapshot) -> str:
    return json.dumps(snapshot_to_dict(snapshot), separators=(",", ":"), allow_nan=False)


class RecordingWriter:
    """Append snapshots to a fleet-tui JSON lines recording (one flushed line per snapshot)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = self.path.open("a", encoding="utf-8")
        if new:
            self._fh.write(json.dumps({"kind": "fleet-tui-recording", "format": RECORDING_FORMAT})
                           + "\n")
            self._fh.flush()

    def write(self, snapshot: Snapshot) -> None:
        self._fh.write(dump_snapshot_line(snapshot) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "RecordingWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_recording(path: str | os.PathLike[str], snapshots: Iterable[Snapshot]) -> Path:
    """Write a whole recording atomically (temp file + rename)."""
    target = Path(path)
    with atomic_writer(target) as fh:
        fh.write(json.dumps({"kind": "fleet-tui-recording", "format": RECORDING_FORMAT}) + "\n")
        for snap in snapshots:
            fh.write(dump_snapshot_line(snap) + "\n")
    return target
