"""A raw capture read a block of lines at a time into runs of plain samples held as columns
(numpy), for ``blocks``' phase-by-phase analysis of long traces.

A run is consecutive sample lines of one device that ``readings.RawReadings._fast`` would read
with no N/A among its readings: every reading a number (``int`` or ``float``, no ``bool``), the
memory used and clock-event reasons integers, the timestamps rising, a string label or none,
plain processes, no per-core CPU readings, every reading that is summed below 2**53 (so an
integer's float is exact and the sums ``stream.Span`` makes of them are the same). A block of
lines (256 kB) that is not one run is split in halves until it is, down to ``MIN_RUN`` lines,
which are read one by one by ``RawReadings.line``: the same readings and the same ``file:line``
errors. A line is parsed by msgspec into ``_Sample``, which checks the types as it parses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import chain
from operator import attrgetter
from typing import Any, Literal

import msgspec
import numpy as np

from fleet_tui.core.fsutil import iter_line_blocks, open_regular
from fleet_tui.core.monitor.analysis.readings import RawReadings
from fleet_tui.core.monitor.analysis.stream import Reading
from fleet_tui.core.monitor.analysis.window import HostLoad
from fleet_tui.core.monitor.trace import MAX_TIMESTAMP_S, check_timestamp
from fleet_tui.core.records import record

BLOCK_BYTES = 256 * 2**10  # (4 MB blocks were ~15 % slower: bench_analysis --lines)
MIN_RUN = 64
_MIB = float(2**20)
_EXACT = float(2**53)


class _Proc(msgspec.Struct, gc=False):
    """A process as ``readings.plain_procs`` takes it."""

    pid: int = 0
    used_bytes: int | float | None = None


class _Sample(msgspec.Struct, gc=False, kw_only=True):
    """A plain sample line: every reading ``readings.RawReadings._fast`` reads, a number (an
    integer for the memory used and the clock-event reasons); other keys are ignored, as there.
    msgspec checks the types as it parses (a bool, a string or null is an error, as is a missing
    key), which is what makes a run cheaper than ``orjson`` plus a check of each value. The fields
    are in the order the capture writes its keys (msgspec tries the next field first: 1.3 ->
    1.0 us a line)."""

    kind: Literal["sample"]
    t: float
    phase: str | None = None
    gpu_util: float
    mem_util: float
    mem_used_bytes: int
    temp_c: float
    power_mw: float
    sm_clock_mhz: float
    mem_clock_mhz: float
    clock_event_reasons: int
    pstate: float
    pcie_tx_kb_s: float
    pcie_rx_kb_s: float
    procs: list[_Proc] | None = None
    gpm_graphics_util: float
    gpm_sm_util: float
    gpm_sm_occupancy: float
    gpm_any_tensor_util: float
    gpm_hmma_tensor_util: float
    gpm_dram_bw_util: float
    gpm_fp32_util: float
    gpm_fp16_util: float
    gpm_pcie_tx_mib_s: float
    gpm_pcie_rx_mib_s: float
    gpm_nvlink_rx_mib_s: float
    gpm_nvlink_tx_mib_s: float
    host_cpu_pct: float
    host_mem_pct: float
    host_cpu_per_core_pct: None = None


_decode = msgspec.json.Decoder(_Sample).decode
# every reading of a plain sample (``readings.row_keys``)
SAMPLE_READINGS = tuple(k for k in _Sample.__struct_fields__[1:] if k not in (
    "phase", "procs", "host_cpu_per_core_pct"))
# read_row's columns (scale as in ``RawReadings._fast``), then the host CPU %
_COLS = (("gpu_util", 1.0), ("mem_util", 1.0), ("gpm_sm_util", 1.0),
         ("gpm_any_tensor_util", 1.0), ("gpm_dram_bw_util", 1.0), ("gpm_fp32_util", 1.0),
         ("gpm_fp16_util", 1.0), ("power_mw", 1e-3), ("sm_clock_mhz", 1.0), ("temp_c", 1.0),
         ("gpm_pcie_rx_mib_s", _MIB), ("gpm_pcie_tx_mib_s", _MIB), ("mem_used_bytes", 1.0),
         ("gpm_nvlink_rx_mib_s", _MIB), ("gpm_nvlink_tx_mib_s", _MIB), ("host_cpu_pct", 1.0))
# what is read into columns (the other readings are only checked, by the parse)
_get = attrgetter("t", *(k for k, _ in _COLS))
_T = 0
_reasons = attrgetter("clock_event_reasons")
_phase = attrgetter("phase")


@record
class Run:
    """Consecutive plain samples of one device, as columns."""

    key: str
    ts: np.ndarray  # (n,) timestamps, base time added
    cols: np.ndarray  # (n, 16): ``tallies.read_row`` of each sample, then its host CPU %
    reasons: list[int]  # clock-event reasons
    labels: list[str | None]  # ground-truth labels
    data: Sequence[bytes | dict[str, Any]]  # each line (``RawReadings.snapshot_of`` parses it)
    static: dict[str, Any]
    consts: tuple  # (power limit, memory size, extras): ``readings._consts``

    def __len__(self) -> int:
        return len(self.ts)

    def reading(self, j: int) -> Reading:
        """The ``Reading`` ``RawReadings`` gives for sample ``j``."""
        limit, total, extra = self.consts
        *row, cpu = self.cols[j].tolist()
        return Reading(float(self.ts[j]), tuple(row), self.reasons[j], None, (), self.labels[j],
                       HostLoad(cpu, 0.0, 0), limit, total, extra, (self.data[j], self.static),
                       False)

    def readings(self, a: int, b: int) -> list[Reading]:
        """The ``Reading``s of samples ``a`` to ``b``."""
        return [self.reading(j) for j in range(a, b)]

    def tail(self, a: int) -> Run:
        """Samples ``a`` onwards."""
        return replace(self, ts=self.ts[a:], cols=self.cols[a:], reasons=self.reasons[a:],
                       labels=self.labels[a:], data=self.data[a:])

    def then(self, other: Run) -> Run:
        """This run followed by ``other`` (same device and static line)."""
        return replace(self, ts=np.concatenate((self.ts, other.ts)),
                       cols=np.concatenate((self.cols, other.cols)),
                       reasons=self.reasons + other.reasons, labels=self.labels + other.labels,
                       data=[*self.data, *other.data])


def plain_run(reading: Reading, key: str, static: dict[str, Any], consts: tuple) -> Run | None:
    """A one-sample run of a ``Reading`` that a run could hold (else ``None``)."""
    r = reading
    host = r.host
    if (r.gaps or r.reasons is None or r.ecc is not None or r.xids or host is None
            or host.cpu_pct is None or host.busy_cores != 0.0 or host.cores != 0
            or type(r.src) is not tuple or r.src[1] is not static
            or (r.power_limit_w, r.mem_total, r.extra) != consts):
        return None
    cols = np.array([r.row + (host.cpu_pct,)], dtype=np.float64)
    if not np.abs(cols).max() < _EXACT:
        return None
    return Run(key, np.array([r.ts]), cols, [r.reasons], [r.phase], [r.src[0]], static, consts)


def read_items(reader: RawReadings) -> Iterator[tuple[str, Reading] | Run]:
    """The samples of ``reader``'s file in order: runs, and (device key, ``Reading``) for the
    rest (every sample of a recording)."""
    if not reader.is_raw():
        yield from reader
        return
    reader.restart()
    with open_regular(reader.path, "trace") as fh:
        lineno = 1
        for lines in iter_line_blocks(fh, reader.path, BLOCK_BYTES):  # each line bounded
            yield from _items(reader, lines, lineno)
            lineno += len(lines)


def _items(reader: RawReadings, lines: list[bytes],
           lineno: int) -> Iterator[tuple[str, Reading] | Run]:
    run = _run_of(reader, lines)
    if run is not None:
        bad = np.flatnonzero(np.abs(run.ts) > MAX_TIMESTAMP_S)  # NaN cannot come (msgspec)
        if bad.size:
            check_timestamp(reader.path, lineno + int(bad[0]), float(run.ts[bad[0]]))
        reader.last_ts = float(run.ts[-1])
        yield run
    elif len(lines) > MIN_RUN:
        half = len(lines) // 2
        yield from _items(reader, lines[:half], lineno)
        yield from _items(reader, lines[half:], lineno + half)
    else:
        line = reader.line
        for i, raw in enumerate(lines, lineno):
            item = line(i, raw)
            if item is not None:
                yield item


def _run_of(reader: RawReadings, lines: list[bytes]) -> Run | None:
    """The run these lines make, or ``None`` if any is not a plain sample (module doc)."""
    if reader.key is None:
        return None
    try:
        samples = list(map(_decode, lines))
    except msgspec.DecodeError:  # (ValidationError included)
        return None
    n, m = len(samples), len(_COLS) + 1
    a = np.fromiter(chain.from_iterable(map(_get, samples)), np.float64, n * m).reshape(n, m)
    if not np.abs(a).max() < _EXACT:
        return None
    ts = a[:, _T] + reader.base_time
    last = reader.last_ts
    if (last is not None and not ts[0] > last) or not np.all(ts[1:] > ts[:-1]):
        return None  # repeated or backward timestamps: counted or reported line by line
    cols = np.empty((n, len(_COLS)))
    for i, (_, s) in enumerate(_COLS):
        cols[:, i] = a[:, i + 1] if s == 1.0 else a[:, i + 1] * s
    return Run(reader.key, ts, cols, list(map(_reasons, samples)), list(map(_phase, samples)),
               lines, reader.static, reader.consts)
