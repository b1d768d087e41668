"""A raw capture read a block of lines at a time into runs of plain samples held as columns
(numpy), for ``blocks``' phase-by-phase analysis of long traces (issue 10: 10^6 lines).

A run is consecutive sample lines of one device that ``readings.RawReadings._fast`` would read
with no N/A among its readings: every reading a number (``int`` or ``float``, no ``bool``), the
memory used and clock-event reasons integers, the timestamps rising, a string label or none,
plain processes, no per-core CPU readings, every magnitude below 2**53 (so an integer's float is
exact and the float sums ``stream.Span`` makes of them are the same). A block of lines (~4 MB)
that is not one run is split in halves until it is, down to ``MIN_RUN`` lines, which are read
one by one by ``RawReadings.line``: the same readings and the same ``file:line`` errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np
import orjson

from fleet_tui.core.monitor.analysis.readings import RawReadings, plain_procs, row_keys
from fleet_tui.core.monitor.analysis.stream import Reading
from fleet_tui.core.monitor.analysis.window import HostLoad

BLOCK_BYTES = 4 * 2**20
MIN_RUN = 64
_MIB = float(2**20)
_EXACT = float(2**53)

_KEYS = row_keys()
_get = itemgetter(*_KEYS)
_col = {k: i for i, k in enumerate(_KEYS)}
# read_row's columns from the keys (scale as in ``RawReadings._fast``): (row column, key, scale)
_ROW_FROM = tuple((i, k, s) for i, (k, s) in enumerate((
    ("gpu_util", 1.0), ("mem_util", 1.0), ("gpm_sm_util", 1.0), ("gpm_any_tensor_util", 1.0),
    ("gpm_dram_bw_util", 1.0), ("gpm_fp32_util", 1.0), ("gpm_fp16_util", 1.0),
    ("power_mw", 1e-3), ("sm_clock_mhz", 1.0), ("temp_c", 1.0), ("gpm_pcie_rx_mib_s", _MIB),
    ("gpm_pcie_tx_mib_s", _MIB), ("mem_used_bytes", 1.0), ("gpm_nvlink_rx_mib_s", _MIB),
    ("gpm_nvlink_tx_mib_s", _MIB))))
_T, _USED, _REASONS, _CPU = (_col[k] for k in ("t", "mem_used_bytes", "clock_event_reasons",
                                                "host_cpu_pct"))
_used = itemgetter(_USED)
_reasons = itemgetter(_REASONS)
_kind = itemgetter("kind")
_phase = methodcaller("get", "phase")
_procs = methodcaller("get", "procs")
_per_core = methodcaller("get", "host_cpu_per_core_pct")
_LABEL_TYPES = frozenset({str, type(None)})
_NUMBER_TYPES = frozenset({int, float})


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive plain samples of one device, as columns."""

    key: str
    ts: np.ndarray  # (n,) timestamps, base time added
    rows: np.ndarray  # (n, 15) ``tallies.read_row`` of each sample
    cpu: np.ndarray  # (n,) host CPU %
    reasons: list[int]  # clock-event reasons
    labels: list[str | None]  # ground-truth labels
    data: list[dict[str, Any]]  # the parsed lines (a phase's last sample's snapshot)
    static: dict[str, Any]
    consts: tuple  # (power limit, memory size, extras): ``readings._consts``

    def __len__(self) -> int:
        return len(self.ts)

    def reading(self, j: int) -> Reading:
        """The ``Reading`` ``RawReadings`` gives for sample ``j``."""
        limit, total, extra = self.consts
        return Reading(float(self.ts[j]), tuple(self.rows[j].tolist()), self.reasons[j], None, (),
                       self.labels[j], HostLoad(float(self.cpu[j]), 0.0, 0), limit, total, extra,
                       (self.data[j], self.static), False)

    def tail(self, a: int) -> Run:
        """Samples ``a`` onwards."""
        return replace(self, ts=self.ts[a:], rows=self.rows[a:], cpu=self.cpu[a:],
                             reasons=self.reasons[a:], labels=self.labels[a:], data=self.data[a:])

    def then(self, other: Run) -> Run:
        """This run followed by ``other`` (same device and static line)."""
        return replace(self, ts=np.concatenate((self.ts, other.ts)),
                             rows=np.concatenate((self.rows, other.rows)),
                             cpu=np.concatenate((self.cpu, other.cpu)),
                             reasons=self.reasons + other.reasons,
                             labels=self.labels + other.labels, data=self.data + other.data)


def plain_run(reading: Reading, key: str, static: dict[str, Any], consts: tuple) -> Run | None:
    """A one-sample run of a ``Reading`` that a run could hold (else ``None``)."""
    r = reading
    host = r.host
    if (r.gaps or r.reasons is None or r.ecc is not None or r.xids or host is None
            or host.cpu_pct is None or host.busy_cores != 0.0 or host.cores != 0
            or type(r.src) is not tuple or r.src[1] is not static
            or (r.power_limit_w, r.mem_total, r.extra) != consts):
        return None
    row = np.array([r.row], dtype=np.float64)
    if not np.abs(row).max() < _EXACT:
        return None
    return Run(key, np.array([r.ts]), row, np.array([host.cpu_pct]), [r.reasons], [r.phase],
               [r.src[0]], static, consts)


def read_items(reader: RawReadings) -> Iterator[tuple[str, Reading] | Run]:
    """The samples of ``reader``'s file in order: runs, and (device key, ``Reading``) for the
    rest (every sample of a recording)."""
    if not reader.is_raw():
        yield from reader
        return
    reader.restart()
    with reader.path.open("rb") as fh:
        lineno = 1
        while True:
            lines = fh.readlines(BLOCK_BYTES)
            if not lines:
                break
            yield from _items(reader, lines, lineno)
            lineno += len(lines)


def _items(reader: RawReadings, lines: list[bytes],
           lineno: int) -> Iterator[tuple[str, Reading] | Run]:
    run = _run_of(reader, lines)
    if run is not None:
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
        data = list(map(orjson.loads, lines))
        vals = list(map(_get, data))
        kinds = set(map(_kind, data))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if kinds != {"sample"} or not set(map(type, map(_phase, data))) <= _LABEL_TYPES:
        return None
    if any(map(_procs, data)) and not all(map(plain_procs, map(_procs, data))):
        return None
    if list(map(_per_core, data)).count(None) != len(data):
        return None
    if set(map(type, map(_used, vals))) != {int} or \
            set(map(type, map(_reasons, vals))) != {int}:
        return None
    if not set(map(type, chain.from_iterable(vals))) <= _NUMBER_TYPES:
        return None  # None, strings, bools, lists: one by one
    a = np.array(vals, dtype=np.float64)
    if not np.abs(a).max() < _EXACT:
        return None
    ts = a[:, _T] + reader.base_time
    last = reader.last_ts
    if (last is not None and not ts[0] > last) or not np.all(ts[1:] > ts[:-1]):
        return None  # repeated or backward timestamps: counted or reported line by line
    rows = np.empty((len(vals), len(_ROW_FROM)))
    for i, k, s in _ROW_FROM:
        rows[:, i] = a[:, _col[k]] if s == 1.0 else a[:, _col[k]] * s
    return Run(reader.key, ts, rows, a[:, _CPU].copy(), list(map(_reasons, vals)),
               list(map(_phase, data)), data, reader.static, reader.consts)
