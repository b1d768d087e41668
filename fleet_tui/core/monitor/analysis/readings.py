"""A raw capture read straight into ``stream.Reading``s, for ``analyze`` on long traces.

``trace.TraceReader`` builds a ``Snapshot`` per line (~25 us of a line's ~50 us in
bench_analysis's 10^6-line figure); the phase detector and a phase's sums need only the numbers.
Here each line is parsed with orjson and its readings go into a ``Reading`` with the same
conversions as ``trace.raw_sample_to_snapshot``; when a phase ends, what its statistics read of
its newest sample (``window.DeviceFacts``) is built from the kept line by the functions
``raw_sample_to_snapshot`` uses.

Anything unusual takes the object path for that line, so results and errors are the same:
a line orjson rejects (NaN/Infinity, bad UTF-8, deep nesting) is decoded by ``trace.decode_line``;
a sample lacking one of the readings below, with a value of another type, with processes or
per-core CPU readings that are not plain, goes through ``raw_sample_to_snapshot``. A fleet-tui
recording is read by ``TraceReader`` throughout.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from fleet_tui.core.fsutil import iter_lines_capped, open_regular
from fleet_tui.core.monitor.analysis.stream import Reading, device_readings
from fleet_tui.core.monitor.analysis.window import DeviceFacts, HostLoad
from fleet_tui.core.monitor.serialize import BadField
from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.trace import (
    DEMO_TRACE,
    MAX_TIMESTAMP_S,
    TraceOrderError,
    TraceReader,
    bad_line,
    check_timestamp,
    decode_line,
    raw_extras,
    raw_pcie_rx,
    raw_processes,
    raw_sample_to_snapshot,
    resolve_trace_path,
    static_device_kwargs,
)

_MIB = 1024 * 1024
_MIB_F = float(_MIB)
# The readings of a GPM sample, in ``tallies.MEAN_FIELDS`` order (key, scale as in
# ``trace._READINGS``), then those only checked here (read when a phase's snapshot is built).
_ROW = (("gpu_util", 1.0), ("mem_util", 1.0), ("gpm_sm_util", 1.0), ("gpm_any_tensor_util", 1.0),
        ("gpm_dram_bw_util", 1.0), ("gpm_fp32_util", 1.0), ("gpm_fp16_util", 1.0),
        ("power_mw", 1e-3), ("sm_clock_mhz", 1.0), ("temp_c", 1.0))
_NVLINK = ("gpm_nvlink_rx_mib_s", "gpm_nvlink_tx_mib_s")
_CHECKED = ("t", "mem_used_bytes", "clock_event_reasons", "gpm_pcie_rx_mib_s",
            "gpm_pcie_tx_mib_s", "pcie_rx_kb_s", "pcie_tx_kb_s", "host_cpu_pct", "mem_clock_mhz",
            "pstate", "gpm_graphics_util", "gpm_hmma_tensor_util", "gpm_sm_occupancy",
            "host_mem_pct")
_KEYS = tuple(k for k, _ in _ROW) + _NVLINK + _CHECKED
_get = itemgetter(*_KEYS)
_NONE = type(None)
_NUMBER_TYPES = frozenset({int, float, _NONE})
_SCALES = tuple(s for _, s in _ROW)


def _key_of(static: dict[str, Any]) -> str | None:
    """The device key of a raw capture's device (``None`` where the static line does not make
    a ``DeviceSnapshot``)."""
    try:
        return DeviceSnapshot(index=0, **static).key
    except (TypeError, ValueError):
        return None


def _consts(static: dict[str, Any]) -> tuple:
    """(power limit, memory size, extras) of a raw capture's device: the same every sample."""
    return static.get("power_limit_w"), static.get("mem_total_bytes"), static.get("extra", ())


def row_keys() -> tuple[str, ...]:
    """The keys a plain sample line has: its readings, then those only checked here."""
    return _KEYS


def plain_procs(procs: Any) -> bool:
    """Whether a sample's processes are read as they are (none, or a list of objects with an
    integer pid and a number or null for memory used)."""
    if not procs:
        return True
    if type(procs) is not list:
        return False
    for q in procs:
        if type(q) is not dict or type(q.get("pid", 0)) is not int or \
                type(q.get("used_bytes")) not in _NUMBER_TYPES:
            return False
    return True


class _Slow(Exception):
    """This line takes the object path."""


class RawReadings:
    """(device key, ``Reading``) of each sample of a trace file, with ``TraceReader``'s checks:
    ``TraceOrderError`` where timestamps go back, a repeated timestamp skipped and counted in
    ``repeats``, ``file:line`` errors for bad lines."""

    def __init__(self, path: str | os.PathLike[str], *, base_time: float = 0.0):
        self.path = resolve_trace_path(path)
        self.base_time = base_time
        self.repeats = 0
        p = self.path
        self.source = f"replay:{'demo' if p == DEMO_TRACE else p.name}"
        self._device: tuple[dict[str, Any], DeviceSnapshot] | None = None

    def snapshot_of(self, r: Reading) -> DeviceSnapshot | DeviceFacts:
        """What a phase's statistics read of its newest sample: the ``DeviceSnapshot`` of a
        reading from the object path, the ``DeviceFacts`` of one read here (those of the
        ``DeviceSnapshot`` ``raw_sample_to_snapshot`` would build: the static line's, then the
        line's extras and processes, by the same functions; ~5 us where the snapshot took ~20)."""
        if isinstance(r.src, DeviceSnapshot):
            return r.src
        raw, static = r.src
        # a line of a run (``runs``) is parsed when needed
        data: dict[str, Any] = orjson.loads(raw) if isinstance(raw, bytes) else raw
        device = self._device_of(static)
        mem = data.get("mem_used_bytes")
        if type(mem) not in (int, float) or mem is None or mem - mem != 0:
            mem = None
        return DeviceFacts.of(device, raw_extras(data, static), raw_processes(data), mem,
                              raw_pcie_rx(data))

    def _device_of(self, static: dict[str, Any]) -> DeviceSnapshot:
        """The ``DeviceSnapshot`` of a static line alone (its facts are every sample's)."""
        held = self._device
        if held is None or held[0] is not static:
            held = self._device = (static, DeviceSnapshot(index=0, **static))
        return held[1]

    def is_raw(self) -> bool:
        """Whether the file is a raw capture (static + sample lines), not a recording."""
        with open_regular(self.path, "trace") as fh:
            for lineno, raw in iter_lines_capped(fh, self.path):
                try:
                    data = decode_line(self.path, lineno, raw)
                except SourceUnavailable:
                    return False  # TraceReader reports it
                if data is not None:
                    return isinstance(data, dict) and data.get("kind") in ("static", "sample")
        return False

    def __iter__(self) -> Iterator[tuple[str, Reading]]:
        if not self.is_raw():
            reader = TraceReader(self.path, base_time=self.base_time)
            yield from device_readings(reader)
            self.repeats = reader.repeats
            return
        self.restart()
        line = self.line
        with open_regular(self.path, "trace") as fh:
            for lineno, raw in iter_lines_capped(fh, self.path):
                item = line(lineno, raw)
                if item is not None:
                    yield item

    def restart(self) -> None:
        """Back to the state before the file's first line (for ``line``)."""
        self.static: dict[str, Any] = {"name": "unknown"}
        self.key = _key_of(self.static)
        self.consts = _consts(self.static)
        self.last_ts: float | None = None

    def line(self, lineno: int, raw: bytes) -> tuple[str, Reading] | None:
        """(device key, ``Reading``) of one line of a raw capture, in file order (``restart``
        first): ``None`` for a line with no sample (blank, static, other kinds) or a repeated
        timestamp (counted in ``repeats``); ``file:line`` errors as ``TraceReader``'s."""
        p = self.path
        fast = self.key is not None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = decode_line(p, lineno, raw)  # the object path's reading and errors
            if data is None:
                return None
            fast = False  # e.g. NaN readings: converted by the object path
        if type(data) is not dict:
            raise bad_line(p, lineno, "a line is not a JSON object")
        kind = data.get("kind")
        if kind != "sample":
            if kind == "static":
                self.set_static(self._static(data, p, lineno))
            return None
        static = self.static
        try:
            if not fast:  # a line json read, or a static line no DeviceSnapshot takes
                raise _Slow
            r = self._fast(data, static, self.consts)
        except _Slow:
            r = self._slow(data, static, p, lineno)
        ts = r.ts
        if not -MAX_TIMESTAMP_S <= ts <= MAX_TIMESTAMP_S:
            check_timestamp(p, lineno, ts)
        last_ts = self.last_ts
        if last_ts is not None and ts <= last_ts:
            if ts < last_ts:
                raise TraceOrderError(p, lineno, ts, last_ts)
            self.repeats += 1
            return None
        self.last_ts = ts
        key = self.key
        if key is None:  # (cannot be: _slow fails on a static line no DeviceSnapshot takes)
            raise SourceUnavailable(f"{p}:{lineno}: the static line describes no device")
        return key, r

    def set_static(self, static: dict[str, Any]) -> None:
        """A static line's device (``static_device_kwargs``): the samples after it are its."""
        self.static = static
        self.key = _key_of(static)
        self.consts = _consts(static)

    @staticmethod
    def _static(data: dict, p: Path, lineno: int) -> dict[str, Any]:
        try:
            return static_device_kwargs(data)
        except BadField as exc:
            raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None

    def _slow(self, data: dict, static: dict[str, Any], p: Path, lineno: int) -> Reading:
        try:
            snap = raw_sample_to_snapshot(data, static, source=self.source,
                                          base_time=self.base_time)
        except BadField as exc:
            raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise SourceUnavailable(f"{p}:{lineno}: {exc}") from None
        return next(device_readings((snap,)))[1]

    def _fast(self, data: dict, static: dict[str, Any], consts: tuple) -> Reading:
        """A plain GPM sample's ``Reading``, converted as ``raw_sample_to_snapshot`` converts it
        (``_Slow`` for anything else)."""
        try:
            vals = _get(data)
        except KeyError:
            raise _Slow from None
        types = set(map(type, vals))
        if not types <= _NUMBER_TYPES:  # orjson gives no NaN/inf
            raise _Slow
        (t, used, reasons, g_rx, g_tx, n_rx, n_tx, cpu) = vals[12:20]
        if t is None or type(used) is float or type(reasons) is float:
            raise _Slow  # (orjson reads an integer past 64 bits as a float)
        phase = data.get("phase")
        if phase is not None and type(phase) is not str:
            raise _Slow
        if not plain_procs(data.get("procs")):
            raise _Slow
        if data.get("host_cpu_per_core_pct") is not None:
            raise _Slow
        if _NONE not in types:  # every reading there (the common case): no test per value
            (util, mem_util, sm, tensor, dram, fp32, fp16, power, clock, temp, nv_rx,
             nv_tx) = vals[:12]
            # (an int times 2**20 or 1024 as a float: the float of the exact product, since
            # scaling by a power of two commutes with rounding)
            row = (util * 1.0, mem_util * 1.0, sm * 1.0, tensor * 1.0, dram * 1.0, fp32 * 1.0,
                   fp16 * 1.0, power * 1e-3, clock * 1.0, temp * 1.0, g_rx * _MIB_F,
                   g_tx * _MIB_F, used, nv_rx * _MIB, nv_tx * _MIB)
            gaps = False
        else:
            row = [None if v is None else v * s for v, s in zip(vals, _SCALES)]
            nv_rx, nv_tx = vals[10], vals[11]
            if g_rx is not None:
                rx = float(g_rx * _MIB)
                tx = None if g_tx is None else float(g_tx * _MIB)
            else:
                rx = None if n_rx is None else float(n_rx * 1024)
                tx = None if n_tx is None else float(n_tx * 1024)
            row += (rx, tx, None if used is None else int(used),
                    None if nv_rx is None else nv_rx * _MIB,
                    None if nv_tx is None else nv_tx * _MIB)
            row = tuple(row)
            gaps = None in row
        limit, total, extra = consts
        return Reading(float(t) + self.base_time, row,
                       None if reasons is None else int(reasons), None, (), phase,
                       None if cpu is None else HostLoad(float(cpu), 0.0, 0),
                       limit, total, extra, (data, static), gaps)
