"""The engine's per-device window: samples over the last N seconds, kept across ticks."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from fleet_tui.core.monitor.analysis.analyze import analyze_rows
from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
from fleet_tui.core.monitor.analysis.phases import PhaseDetector, host_busy_of, smoothing_s
from fleet_tui.core.monitor.analysis.stream import edge_of
from fleet_tui.core.monitor.analysis.tallies import Counts, read_row
from fleet_tui.core.monitor.analysis.window import HostLoad
from fleet_tui.core.monitor.snapshot import DeviceSnapshot


def _worked(row: tuple) -> bool:
    """A ``read_row`` row shows work: kernels or copies ran (utilization) or SMs were active."""
    util, sm = row[0], row[2]
    return bool(util) or bool(sm)


class SlidingWindow:
    """One device's samples over the last ``seconds``, kept across ticks by the engine.

    Each sample's signals are read once when it arrives (``read_row``) and tallied in ``Counts`` as it
    enters and leaves, instead of rescanning every sample of the window on every tick. The window is
    exactly what ``History.samples(key, seconds)`` returns: the newest samples back to the first one
    at or before ``newest - seconds``. While timestamps never go back that is a suffix kept by
    appending and dropping from the left; ``push`` says when it is not (a replay that loops, a clock
    stepped back) and the caller ``reset``s it from history.

    The window also starts no earlier than the current phase (``phases.PhaseDetector``, the
    detector ``fleet-tui analyze`` uses): at a change point it drops the samples of the previous
    behaviour, so a diagnosis never averages two behaviours. ``phase_start`` says where it cut.

    After a change point the first samples of the new phase still straddle the change (NVML
    averages utilization over up to 1 s; the detector's smoothing trails the change), so, as
    ``fleet-tui analyze`` does (``stream.edge_of``), they are left out once the phase has samples
    past that edge; until it has, ``settling`` is true and the engine keeps showing the last
    analysis. ``pending`` says a change may be starting that the detector has not confirmed (the
    engine holds an idle GPU's diagnosis through it). Replayed on the H100/H200 corpus, the
    window read a third kind, mostly input_starved, in 13-39 % of the ticks within 3 s of a
    labelled change.
    """

    __slots__ = ("seconds", "_samples", "_rows", "_counts", "_ordered", "_detector",
                 "phase_start", "edge")

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._samples: deque[DeviceSnapshot] = deque()
        self._rows: deque[tuple] = deque()
        self._counts = Counts()
        self._ordered = True
        self._detector = PhaseDetector()
        self.phase_start: float | None = None
        self.edge: float | None = None  # the current phase's first sample past its straddle

    @property
    def settling(self) -> bool:
        """The phase began at a change point and has no sample past its straddling edge yet."""
        edge = self.edge
        return edge is not None and bool(self._samples) and self._samples[-1].timestamp < edge

    def pending(self, hold_s: float) -> bool:
        """The newest samples may belong to a phase that has not begun yet: the detector has seen
        the start of a change it has not confirmed, at most ``hold_s`` ago, or the newest sample
        is the first of the window to show any work (its smoothing hides a first sample; one
        sample of work after idle ones says a job starts, not that it waits between bursts)."""
        if not self._samples:
            return False
        since = self._detector.pending_since()
        if since is not None and self._samples[-1].timestamp - since <= hold_s:
            return True
        rows = self._rows
        if len(rows) < 2 or not _worked(rows[-1]):
            return False
        for i in range(len(rows) - 1):
            if _worked(rows[i]):
                return False
        return True

    def push(self, d: DeviceSnapshot, limit: int, host: HostLoad | None = None) -> bool:
        """Append the newest sample; ``limit`` = samples history holds for the device (the window
        never reaches further back); ``host``: the host's reading at that sample. False (nothing
        changed) when the window must be rebuilt."""
        s = self._samples
        ts = d.timestamp
        if not self._ordered or (s and ts < s[-1].timestamp):
            return False
        row = read_row(d)
        s.append(d)
        rows = self._rows
        rows.append(row)
        counts = self._counts
        counts.add(row, d)
        # the row already read (``push`` would read it again)
        prev = self._detector.last_sample()
        change = self._detector.push_values(ts, row, d.power_limit_w, d.mem_total_bytes, d.extra,
                                            host_busy_of(host))
        if change is not None:
            self.phase_start = change
            lag = smoothing_s(ts - prev if prev is not None and ts > prev else None)
            self.edge = change + edge_of(change, ts, lag)
        cutoff = ts - self.seconds
        start = self.phase_start
        edge = self.edge
        if edge is not None and ts >= edge:  # past the straddle: leave it out
            start = edge
        while len(s) > limit or s[0].timestamp <= cutoff or (start is not None
                                                             and s[0].timestamp < start):
            counts.remove(rows.popleft(), s.popleft())
        return True

    def reset(self, samples: Sequence[DeviceSnapshot]) -> None:
        self._ordered = all(a.timestamp <= b.timestamp for a, b in zip(samples, samples[1:]))
        self._detector = PhaseDetector()
        self.phase_start = None
        self.edge = None  # rebuilt from history: its change points are old news
        if self._ordered:
            for d in samples:
                change = self._detector.push(d)
                if change is not None:
                    self.phase_start = change
            if self.phase_start is not None:
                samples = [d for d in samples if d.timestamp >= self.phase_start]
        self._samples = deque(samples)
        self._rows = deque(map(read_row, samples))
        self._counts = Counts(self._rows, self._samples)

    def __len__(self) -> int:
        return len(self._samples)

    def samples(self) -> list[DeviceSnapshot]:
        return list(self._samples)

    def analyze(self, growth_points: Sequence[tuple[float, float]] | None = None,
                key: str | None = None, host: HostLoad | None = None) -> DeviceAnalysis:
        """``host``: the host's CPU load now (the engine's latest reading), for cpu_bound_host."""
        if not self._samples:
            raise ValueError("the window is empty")
        return analyze_rows(self._rows, self._counts, self._samples, growth_points, key=key,
                            host=host)
