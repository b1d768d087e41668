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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from operator import add
from typing import Any, NamedTuple

from fleet_tui.core.monitor.analysis.analyze import diagnose
from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
from fleet_tui.core.monitor.analysis.phases import PhaseDetector, host_busy_of, smoothing_s
from fleet_tui.core.monitor.analysis.tallies import MEAN_FIELDS, Counts, read_row
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_LOOKBACK_S
from fleet_tui.core.monitor.analysis.window import DeviceFacts, HostLoad, stats_from
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot

# How far back a change point may be placed (samples newer than this wait before they are summed).
LAG_S = 10.0
# The first second of a phase is left out of its statistics when the phase has more: NVML
# averages utilization over up to 1 s, so it still reads the previous behaviour (the same settle
# time the trace tests skip at each labelled boundary).
EDGE_S = 1.0
# ... and so are the samples in the last ``phases.smoothing_s`` before the change point that ends
# a phase: the detector's smoothing makes its change points trail the change by up to that long,
# so those samples may already read the next behaviour. Kept when the phase would be left with
# fewer than TAIL_KEEP_MIN samples past its edge.
TAIL_KEEP_MIN = 2
_NCOL = len(MEAN_FIELDS)


def edge_of(start: float, alarm: float, lag: float) -> float:
    """The edge of a phase that starts at ``start`` on an alarm at ``alarm``: EDGE_S from the
    later of the start and ``alarm - lag``. The CUSUM's estimate of the change can lie well
    before the alarm when a noisy feature drifted before the change; the change
    itself is no more than the smoothing's lag before the alarm, and the samples after it
    still straddle it."""
    late = alarm - lag - start
    return EDGE_S + late if late > 0.0 else EDGE_S


class Reading(NamedTuple):
    """One device's sample as the plain values the phase detector and a ``Span`` read; ``src`` is
    whatever ``snapshot_of`` turns into the ``DeviceSnapshot`` or ``DeviceFacts`` (only a phase's
    newest sample is ever turned into one: ``readings.RawReadings`` keeps the parsed line)."""

    ts: float
    row: tuple  # tallies.read_row
    reasons: int | None  # clock_event_reasons
    ecc: int | None  # ecc_uncorrected
    xids: tuple[int, ...]
    phase: str | None
    host: HostLoad | None
    power_limit_w: float | None
    mem_total: int | None
    extra: tuple
    src: DeviceSnapshot | tuple[bytes | dict[str, Any], dict[str, Any]]  # (a raw line, its static)
    gaps: bool  # an N/A (None) in ``row``


def reading_of(d: DeviceSnapshot, host: HostLoad | None) -> Reading:
    row = read_row(d)
    return Reading(d.timestamp, row, d.clock_event_reasons, d.ecc_uncorrected, d.xid_errors,
                   d.phase, host, d.power_limit_w, d.mem_total_bytes, d.extra, d, None in row)


# a reading's DeviceSnapshot, or the facts of it that a phase's statistics read
SnapshotOf = Callable[[Reading], DeviceSnapshot | DeviceFacts]


def _own_snapshot(r: Reading) -> DeviceSnapshot:
    src = r.src
    if isinstance(src, DeviceSnapshot):  # a reading of a snapshot (device_readings) holds it
        return src
    raise TypeError("a raw capture's reading is turned into facts by RawReadings.snapshot_of")


class Span:
    """Running sums of one device's samples over a phase or a window: O(1) memory."""

    __slots__ = ("start", "n", "full", "sums", "cnts", "counts", "last", "xids", "ecc_last",
                 "labels", "head", "edge_s", "host_n", "host_cpu", "host_cpu_n", "host_busy",
                 "host_cores", "newest", "head_n", "tail_n")

    def __init__(self, start: float, edge_s: float = 0.0):
        self.start = start
        self.edge_s = edge_s
        # the first edge_s seconds: readings, or functions that make a run's (``add_head``)
        self.head: list[Reading | Callable[[], Iterable[Reading]]] = []
        self.head_n = 0
        self.tail_n = 0  # samples left out at the end (``skip``)
        self.host_n = self.host_cpu_n = self.host_cores = 0
        self.host_cpu = self.host_busy = 0.0
        self.newest: float | None = None  # timestamp of the newest sample added
        self.n = 0
        self.full = 0  # samples with every MEAN_FIELDS reading (not counted in cnts)
        self.sums = [0.0] * _NCOL
        self.cnts = [0] * _NCOL
        self.counts = Counts()
        self.last: Reading | None = None
        self.xids: list[int] = []
        self.ecc_last: int | None = None
        self.labels: list[str] = []  # each ground-truth label, in the order first seen

    def add(self, r: Reading) -> None:
        self.newest = r.ts
        if self.edge_s and r.ts < self.start + self.edge_s:
            self.head.append(r)
            self.head_n += 1
            return
        self._add(r)

    def skip(self, newest: float, m: int = 1) -> None:
        """Count ``m`` samples, the newest at ``newest``, without adding them to the statistics
        (the transition before a change point, ``TAIL_KEEP_MIN``)."""
        self.newest = newest
        self.tail_n += m

    def _add(self, r: Reading) -> None:
        host = r.host
        if host is not None:
            self.host_n += 1
            if host.cpu_pct is not None:
                self.host_cpu += host.cpu_pct
                self.host_cpu_n += 1
            self.host_busy += host.busy_cores
            self.host_cores = host.cores
        row = r.row
        if r.gaps:
            sums, cnts = self.sums, self.cnts
            for i, v in enumerate(row):
                if v is not None:
                    sums[i] += v
                    cnts[i] += 1
        else:  # every reading there: summed in C, in the same order
            self.sums = list(map(add, self.sums, row))
            self.full += 1
        phase = r.phase
        self.counts.add_values(row, r.reasons, r.ecc, bool(r.xids), phase, r.gaps)
        self.n += 1
        self.last = r
        if r.ecc is not None:
            self.ecc_last = r.ecc
        for x in r.xids:
            if x not in self.xids:
                self.xids.append(x)
        if phase and self.counts.phases.get(phase) == 1:
            self.labels.append(phase)

    def add_plain(self, m: int, sums: list[float], host_cpu: float, wait: int,
                  reasons: dict[int, int], labels: dict[str | None, int], last: Reading) -> None:
        """``add`` of ``m`` samples past the edge, each with every ``MEAN_FIELDS`` reading, its
        clock-event reasons and host CPU % and nothing else (``analysis.blocks``' runs), from
        their totals: ``sums`` and ``host_cpu`` summed in sample order from this span's,
        ``wait`` of them under ``SPARSE_DUTY_MAX_PCT`` duty, their reasons and labels tallied
        in sample order (first seen first)."""
        self.newest = last.ts
        self.host_n += m
        self.host_cpu = host_cpu
        self.host_cpu_n += m
        self.host_busy += 0.0
        self.host_cores = 0
        self.sums = sums
        self.full += m
        known = self.counts.phases
        self.labels += [p for p in labels if p and p not in known]
        self.counts.add_plain(m, wait, reasons, labels)
        self.n += m
        self.last = last

    def add_head(self, newest: float, m: int, readings: Callable[[], Iterable[Reading]]) -> None:
        """``add`` of ``m`` samples inside the edge, the newest at ``newest``: their readings
        are made by ``readings()`` only if the span ends with no other sample (``analysis``;
        a run's sample costs ~2 us to turn into a ``Reading``, ~5 of them a phase)."""
        self.newest = newest
        self.head.append(readings)
        self.head_n += m

    def __len__(self) -> int:
        return self.n + self.head_n + self.tail_n

    def analysis(self, key: str, end: float, growth: deque,
                 snapshot_of: SnapshotOf = _own_snapshot) -> DeviceAnalysis:
        if not self.n:  # a phase no longer than its edge: its samples are all there is
            for h in self.head:
                for r in (h,) if isinstance(h, Reading) else h():
                    self._add(r)
        full = self.full
        means = [s / (c + full) if c + full else None for s, c in zip(self.sums, self.cnts)]
        host = None
        if self.host_n:
            host = HostLoad(self.host_cpu / self.host_cpu_n if self.host_cpu_n else None,
                            self.host_busy / self.host_n, self.host_cores)
        if self.last is None:  # (every span analysed holds a sample: add, add_plain or the head)
            raise ValueError("a span without samples has no analysis")
        last = snapshot_of(self.last)
        st = stats_from(self.n, means, last, self.counts, tuple(self.xids), self.ecc_last,
                        list(growth), host)
        return diagnose(st, key, last.index, self.start, end, len(self),
                        self.counts.phase_of(self.labels))


class DeviceState:
    __slots__ = ("key", "span", "pending", "growth", "detector", "window_end")

    def __init__(self, key: str, ts: float, window_s: float | None):
        self.key = key
        self.span = Span(ts, EDGE_S if window_s is None else 0.0)
        self.pending: deque[Reading] = deque()
        self.growth: deque[tuple[float, float]] = deque()
        self.detector = PhaseDetector() if window_s is None else None
        self.window_end = ts + window_s if window_s is not None else None


def analyze_stream(snapshots: Iterable[Snapshot], *, window_s: float | None = None,
                   growth_lookback_s: float = GROWTH_LOOKBACK_S) -> Iterator[DeviceAnalysis]:
    """Diagnose each device phase by phase (``window_s=None``: change points, see ``phases``) or
    over back-to-back windows of ``window_s`` seconds, yielding each as it ends (so in end order;
    one device's results are in time order). Timestamps must not go back (``trace.TraceReader``
    checks)."""
    return analyze_readings(device_readings(snapshots), window_s=window_s,
                            growth_lookback_s=growth_lookback_s)


def device_readings(snapshots: Iterable[Snapshot]) -> Iterator[tuple[str, Reading]]:
    """(device key, ``Reading``) of each device of each snapshot, in order."""
    for snap in snapshots:
        host = HostLoad.of(snap.host)
        for d in snap.devices:
            if d.timestamp == 0.0 and snap.timestamp:
                d = replace(d, timestamp=snap.timestamp)
            yield d.key, reading_of(d, host)


def analyze_readings(readings: Iterable[tuple[str, Reading]], *, window_s: float | None = None,
                     growth_lookback_s: float = GROWTH_LOOKBACK_S,
                     snapshot_of: SnapshotOf = _own_snapshot) -> Iterator[DeviceAnalysis]:
    """``analyze_stream`` over (device key, ``Reading``) pairs; ``snapshot_of`` gives the
    ``DeviceSnapshot`` (or ``DeviceFacts``) of a reading (the newest of each phase or window)."""
    if window_s is not None and window_s <= 0:
        raise ValueError("window_s must be positive")
    devices: dict[str, DeviceState] = {}
    get = devices.get
    for key, r in readings:
        dev = get(key)
        if dev is None:
            dev = devices[key] = DeviceState(key, r.ts, window_s)
        # a function, not a generator: one sample ends at most one phase or window (a generator
        # per sample cost ~1 us of bench_analysis's 10^6-line figure)
        done = push_reading(dev, r, window_s, growth_lookback_s, snapshot_of)
        if done is not None:
            yield done
    for dev in devices.values():
        yield from flush(dev, growth_lookback_s, snapshot_of)


def push_reading(dev: DeviceState, r: Reading, window_s: float | None, lookback: float,
          snapshot_of: SnapshotOf) -> DeviceAnalysis | None:
    ts = r.ts
    done = None
    detector = dev.detector
    if window_s is not None:
        end = dev.window_end
        if end is None:  # (DeviceState sets it whenever there is a window_s)
            raise ValueError("a windowed device without a window end")
        while ts >= end - 1e-9:
            if dev.span.n:
                done = dev.span.analysis(dev.key, end, dev.growth, snapshot_of)
            dev.span = Span(end)
            end += window_s
            if ts >= end and not dev.span.n:  # skip empty windows (a gap)
                k = int((ts - end) // window_s) + 1
                dev.span.start += k * window_s
                end += k * window_s
        dev.window_end = end
        settle(dev, r, lookback)
        return done
    if detector is None:  # (DeviceState makes one whenever there is no window_s)
        raise ValueError("a phase-split device without a phase detector")
    change = detector.push_values(ts, r.row, r.power_limit_w, r.mem_total, r.extra,
                                      host_busy_of(r.host))
    pending = dev.pending
    if change is not None:
        # samples before the change point close the old phase; the rest start the new one
        lag = smoothing_s(ts - pending[-1].ts if pending else None)
        tail_from = change - lag
        while pending and pending[0].ts < tail_from:
            settle(dev, pending.popleft(), lookback)
        keep = dev.span.n < TAIL_KEEP_MIN
        while pending and pending[0].ts < change:
            settle(dev, pending.popleft(), lookback, keep)
        # a change placed before samples already summed (older than LAG_S) moves to the first
        # sample not yet summed: phases stay back to back
        boundary = change if not pending else min(change, pending[0].ts)
        if dev.span.newest is not None and boundary <= dev.span.newest:
            boundary = pending[0].ts if pending else ts
        if len(dev.span):
            done = dev.span.analysis(dev.key, boundary, dev.growth, snapshot_of)
            dev.span = Span(boundary, edge_of(boundary, ts, lag))
    pending.append(r)
    cutoff = ts - LAG_S
    while pending[0].ts < cutoff:
        settle(dev, pending.popleft(), lookback)
    return done


def settle(dev: DeviceState, r: Reading, lookback: float, stats: bool = True) -> None:
    """Sum a sample into its phase (``stats`` False: only count it, ``TAIL_KEEP_MIN``); its memory
    reading joins the growth lookback either way."""
    used = r.row[12]  # mem_used_bytes
    if used is not None:
        g = dev.growth
        g.append((r.ts, float(used)))
        cutoff = r.ts - lookback
        while g[0][0] < cutoff:
            g.popleft()
    if stats:
        dev.span.add(r)
    else:
        dev.span.skip(r.ts)


def flush(dev: DeviceState, lookback: float, snapshot_of: SnapshotOf) -> Iterator[DeviceAnalysis]:
    while dev.pending:
        settle(dev, dev.pending.popleft(), lookback)
    end = dev.window_end if dev.window_end is not None else dev.span.newest
    if len(dev.span) and end is not None:  # (a span holding samples has its newest)
        yield dev.span.analysis(dev.key, end, dev.growth, snapshot_of)
