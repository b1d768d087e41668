"""Per-sample signal rows and the integer tallies of a window, kept as samples enter and leave.

A sample's averaged signals are read once into a row (``read_row``); ``Counts`` tallies what is
not averaged (clock-event reasons, waits, ECC counts, XIDs, phase labels) so a sliding window never
rescans its samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter

from fleet_tui.core.monitor.analysis.thresholds import SPARSE_DUTY_MAX_PCT
from fleet_tui.core.monitor.snapshot import DeviceSnapshot

# Signals read from each sample once, in one C-level call (operator.attrgetter with many names),
# and averaged over the window (N/A readings skipped).
MEAN_FIELDS = ("gpu_util_pct", "mem_util_pct", "sm_active_pct", "tensor_active_pct",
                "dram_active_pct", "fp32_active_pct", "fp16_active_pct", "power_w", "sm_clock_mhz",
                "temp_c", "pcie_rx_bytes_s", "pcie_tx_bytes_s", "mem_used_bytes",
                "nvlink_rx_bytes_s", "nvlink_tx_bytes_s")
read_row: Callable[[DeviceSnapshot], tuple] = attrgetter(*MEAN_FIELDS)


class Counts:
    """Integer tallies over the samples of a window, updated as samples enter and leave: exact,
    O(1) per sample, so a sliding window never rescans its samples for them."""

    __slots__ = ("reasons", "util_n", "wait_n", "ecc", "xid_n", "phases", "gaps")

    def __init__(self, rows: Iterable[tuple] = (), samples: Iterable[DeviceSnapshot] = ()):
        self.reasons: dict[int, int] = {}  # clock-event mask -> samples with it
        self.util_n = 0  # samples with a duty cycle (NVML util, else SM activity)
        self.wait_n = 0  # ... of which kernels ran under half the time
        self.ecc: dict[int, int] = {}  # uncorrected-ECC count -> samples with it
        self.xid_n = 0  # samples with XID codes
        self.phases: dict[str, int] = {}  # ground-truth label -> samples
        self.gaps = 0  # samples with an N/A among the averaged signals
        for row, d in zip(rows, samples):
            self.add(row, d)

    def add(self, row: tuple, d: DeviceSnapshot) -> None:
        """``row``: ``read_row(d)``."""
        self.add_values(row, d.clock_event_reasons, d.ecc_uncorrected, bool(d.xid_errors),
                        d.phase)

    def add_values(self, row: tuple, r: int | None, e: int | None, xid: bool,
                   p: str | None, gaps: bool | None = None) -> None:
        """``add`` from plain values: the sample's row, clock-event reasons, uncorrected-ECC
        count, whether it has XID codes, and its ground-truth label (``gaps``: whether the row
        has an N/A, where the caller knows)."""
        if (None in row) if gaps is None else gaps:
            self.gaps += 1
        if r is not None:
            c = self.reasons
            c[r] = c.get(r, 0) + 1
        u = row[0]
        if u is None:
            u = row[2]
        if u is not None:
            self.util_n += 1
            if u < SPARSE_DUTY_MAX_PCT:
                self.wait_n += 1
        if e is not None:
            c = self.ecc
            c[e] = c.get(e, 0) + 1
        if xid:
            self.xid_n += 1
        if p:
            c = self.phases
            c[p] = c.get(p, 0) + 1

    def add_plain(self, m: int, wait: int, reasons: dict[int, int],
                  labels: dict[str | None, int]) -> None:
        """``add_values`` of ``m`` samples with no N/A reading, no ECC count or XID, from their
        totals: ``wait`` of them under ``SPARSE_DUTY_MAX_PCT`` duty, ``reasons`` and ``labels``
        their clock-event reasons and ground-truth labels tallied in sample order."""
        c = self.reasons
        for r, k in reasons.items():
            c[r] = c.get(r, 0) + k
        self.util_n += m
        self.wait_n += wait
        c = self.phases
        for p, k in labels.items():
            if p:
                c[p] = c.get(p, 0) + k

    def remove(self, row: tuple, d: DeviceSnapshot) -> None:
        if None in row:
            self.gaps -= 1
        r = d.clock_event_reasons
        if r is not None:
            c = self.reasons
            if c[r] == 1:
                del c[r]
            else:
                c[r] -= 1
        u = row[0]
        if u is None:
            u = row[2]
        if u is not None:
            self.util_n -= 1
            if u < SPARSE_DUTY_MAX_PCT:
                self.wait_n -= 1
        e = d.ecc_uncorrected
        if e is not None:
            c = self.ecc
            if c[e] == 1:
                del c[e]
            else:
                c[e] -= 1
        if d.xid_errors:
            self.xid_n -= 1
        p = d.phase
        if p:
            c = self.phases
            if c[p] == 1:
                del c[p]
            else:
                c[p] -= 1

    def phase(self, samples: Iterable[DeviceSnapshot]) -> str | None:
        """The label most samples carry; a tie goes to the one seen first in the window."""
        return self.phase_of(d.phase for d in samples)

    def phase_of(self, labels: Iterable[str | None]) -> str | None:
        """``phase`` from the samples' labels in window order."""
        c = self.phases
        if not c:
            return None
        if len(c) == 1:
            return next(iter(c))
        top = max(c.values())
        tied = [p for p, k in c.items() if k == top]
        if len(tied) == 1:
            return tied[0]
        return next(p for p in labels if p in tied)


def col_means(cols: Sequence[tuple], n: int) -> list[float | None]:
    """Mean of the non-None values of each column, summed in window order exactly like
    ``sum(values) / len(values)`` over the samples: bit-identical to rescanning them (running
    sums with subtraction would drift, e.g. leave 1e-5 B/s of PCIe after a 50 GB/s burst leaves
    the window)."""
    out: list[float | None] = []
    for c in cols:
        if c[0] is not None:
            try:
                out.append(sum(c) / n)  # no N/A reading: the common case, all in C
                continue
            except TypeError:
                pass
        elif c.count(None) == n:  # identity matches: cheap
            out.append(None)
            continue
        vs = [v for v in c if v is not None]
        out.append(sum(vs) / len(vs) if vs else None)
    return out
