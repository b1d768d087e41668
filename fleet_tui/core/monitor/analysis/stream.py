"""Diagnosing a recorded trace as it streams: by phase (change points) or by fixed windows.

Memory is bounded whatever the trace's length: each device keeps running sums of its current
phase or window (``Span``), the samples of the last ``LAG_S`` seconds (a change point is found a
few samples after it happened, and those samples belong to the new phase), and its memory readings
over the growth lookback. Results are yielded as each phase or window ends, so a caller can print
and forget them.

``--window`` with a ``--step`` shorter than the window (overlapping windows) is
``analyze.analyze_trace``, which holds the trace.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace

from fleet_tui.core.monitor.analysis.analyze import diagnose
from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
from fleet_tui.core.monitor.analysis.phases import PhaseDetector
from fleet_tui.core.monitor.analysis.tallies import MEAN_FIELDS, Counts, read_row
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_LOOKBACK_S
from fleet_tui.core.monitor.analysis.window import HostLoad, stats_from
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot

# How far back a change point may be placed (samples newer than this wait before they are summed).
LAG_S = 10.0
# The first second of a phase is left out of its statistics when the phase has more: NVML
# averages utilization over up to 1 s, so it still reads the previous behaviour (the same settle
# time the trace tests skip at each labelled boundary).
EDGE_S = 1.0
_NCOL = len(MEAN_FIELDS)


class Span:
    """Running sums of one device's samples over a phase or a window: O(1) memory."""

    __slots__ = ("start", "n", "sums", "cnts", "counts", "last", "xids", "ecc_last", "labels",
                 "head", "edge_s", "host_n", "host_cpu", "host_cpu_n", "host_busy", "host_cores",
                 "newest")

    def __init__(self, start: float, edge_s: float = 0.0):
        self.start = start
        self.edge_s = edge_s
        self.head: list[tuple[DeviceSnapshot, HostLoad | None]] = []  # the first edge_s seconds
        self.host_n = self.host_cpu_n = self.host_cores = 0
        self.host_cpu = self.host_busy = 0.0
        self.newest: float | None = None  # timestamp of the newest sample added
        self.n = 0
        self.sums = [0.0] * _NCOL
        self.cnts = [0] * _NCOL
        self.counts = Counts()
        self.last: DeviceSnapshot | None = None
        self.xids: list[int] = []
        self.ecc_last: int | None = None
        self.labels: list[DeviceSnapshot] = []  # the first sample of each ground-truth label

    def add(self, d: DeviceSnapshot, host: HostLoad | None) -> None:
        self.newest = d.timestamp
        if self.edge_s and d.timestamp < self.start + self.edge_s:
            self.head.append((d, host))
            return
        self._add(d, host)

    def _add(self, d: DeviceSnapshot, host: HostLoad | None) -> None:
        if host is not None:
            self.host_n += 1
            if host.cpu_pct is not None:
                self.host_cpu += host.cpu_pct
                self.host_cpu_n += 1
            self.host_busy += host.busy_cores
            self.host_cores = host.cores
        row = read_row(d)
        sums, cnts = self.sums, self.cnts
        for i, v in enumerate(row):
            if v is not None:
                sums[i] += v
                cnts[i] += 1
        self.counts.add(row, d)
        self.n += 1
        self.last = d
        if d.ecc_uncorrected is not None:
            self.ecc_last = d.ecc_uncorrected
        for x in d.xid_errors:
            if x not in self.xids:
                self.xids.append(x)
        if d.phase and self.counts.phases.get(d.phase) == 1:
            self.labels.append(d)

    def __len__(self) -> int:
        return self.n + len(self.head)

    def analysis(self, key: str, end: float, growth: deque) -> DeviceAnalysis:
        if not self.n:  # a phase no longer than its edge: its samples are all there is
            for d, host in self.head:
                self._add(d, host)
        means = [s / c if c else None for s, c in zip(self.sums, self.cnts)]
        host = None
        if self.host_n:
            host = HostLoad(self.host_cpu / self.host_cpu_n if self.host_cpu_n else None,
                            self.host_busy / self.host_n, self.host_cores)
        st = stats_from(self.n, means, self.last, self.counts, tuple(self.xids), self.ecc_last,
                        list(growth), host)
        return diagnose(st, key, self.last.index, self.start, end, len(self),
                        self.counts.phase(self.labels))


class _Device:
    __slots__ = ("key", "span", "pending", "growth", "detector", "window_end")

    def __init__(self, key: str, d: DeviceSnapshot, window_s: float | None):
        self.key = key
        self.span = Span(d.timestamp, EDGE_S if window_s is None else 0.0)
        self.pending: deque[tuple[DeviceSnapshot, HostLoad | None]] = deque()
        self.growth: deque[tuple[float, float]] = deque()
        self.detector = PhaseDetector() if window_s is None else None
        self.window_end = d.timestamp + window_s if window_s is not None else None


def analyze_stream(snapshots: Iterable[Snapshot], *, window_s: float | None = None,
                   growth_lookback_s: float = GROWTH_LOOKBACK_S) -> Iterator[DeviceAnalysis]:
    """Diagnose each device phase by phase (``window_s=None``: change points, see ``phases``) or
    over back-to-back windows of ``window_s`` seconds, yielding each as it ends (so in end order;
    one device's results are in time order). Timestamps must not go back (``trace.TraceReader``
    checks)."""
    if window_s is not None and window_s <= 0:
        raise ValueError("window_s must be positive")
    devices: dict[str, _Device] = {}
    for snap in snapshots:
        host = HostLoad.of(snap.host)
        for d in snap.devices:
            if d.timestamp == 0.0 and snap.timestamp:
                d = replace(d, timestamp=snap.timestamp)
            dev = devices.get(d.key)
            if dev is None:
                dev = devices[d.key] = _Device(d.key, d, window_s)
            yield from _push(dev, d, host, window_s, growth_lookback_s)
    for dev in devices.values():
        yield from _flush(dev, None, growth_lookback_s)


def _push(dev: _Device, d: DeviceSnapshot, host: HostLoad | None, window_s: float | None,
          lookback: float) -> Iterator[DeviceAnalysis]:
    ts = d.timestamp
    if window_s is not None:
        while ts >= dev.window_end - 1e-9:
            if dev.span.n:
                yield dev.span.analysis(dev.key, dev.window_end, dev.growth)
            dev.span = Span(dev.window_end)
            dev.window_end += window_s
            if ts >= dev.window_end and not dev.span.n:  # skip empty windows (a gap)
                k = int((ts - dev.window_end) // window_s) + 1
                dev.span.start += k * window_s
                dev.window_end += k * window_s
        _grow(dev, d, lookback)
        dev.span.add(d, host)
        return
    change = dev.detector.push(d)
    if change is not None:
        # samples before the change point close the old phase; the rest start the new one
        pending = dev.pending
        while pending and pending[0][0].timestamp < change:
            _settle(dev, *pending.popleft(), lookback)
        # a change placed before samples already summed (older than LAG_S) moves to the first
        # sample not yet summed: phases stay back to back
        boundary = change if not pending else min(change, pending[0][0].timestamp)
        if dev.span.newest is not None and boundary <= dev.span.newest:
            boundary = pending[0][0].timestamp if pending else ts
        if len(dev.span):
            yield dev.span.analysis(dev.key, boundary, dev.growth)
            dev.span = Span(boundary, EDGE_S)
    dev.pending.append((d, host))
    while dev.pending and dev.pending[0][0].timestamp < ts - LAG_S:
        _settle(dev, *dev.pending.popleft(), lookback)


def _settle(dev: _Device, d: DeviceSnapshot, host: HostLoad | None, lookback: float) -> None:
    _grow(dev, d, lookback)
    dev.span.add(d, host)


def _grow(dev: _Device, d: DeviceSnapshot, lookback: float) -> None:
    if d.mem_used_bytes is None:
        return
    g = dev.growth
    g.append((d.timestamp, float(d.mem_used_bytes)))
    cutoff = d.timestamp - lookback
    while g[0][0] < cutoff:
        g.popleft()


def _flush(dev: _Device, _end: float | None, lookback: float) -> Iterator[DeviceAnalysis]:
    while dev.pending:
        _settle(dev, *dev.pending.popleft(), lookback)
    if len(dev.span):
        end = dev.window_end if dev.window_end is not None else dev.span.newest
        yield dev.span.analysis(dev.key, end, dev.growth)
