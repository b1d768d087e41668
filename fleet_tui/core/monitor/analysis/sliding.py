"""The engine's per-device window: samples over the last N seconds, kept across ticks."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from fleet_tui.core.monitor.analysis.analyze import analyze_rows
from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
from fleet_tui.core.monitor.analysis.phases import PhaseDetector, host_busy_of
from fleet_tui.core.monitor.analysis.tallies import Counts, read_row
from fleet_tui.core.monitor.analysis.window import HostLoad
from fleet_tui.core.monitor.snapshot import DeviceSnapshot


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
    """

    __slots__ = ("seconds", "_samples", "_rows", "_counts", "_ordered", "_detector",
                 "phase_start")

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._samples: deque[DeviceSnapshot] = deque()
        self._rows: deque[tuple] = deque()
        self._counts = Counts()
        self._ordered = True
        self._detector = PhaseDetector()
        self.phase_start: float | None = None

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
        change = self._detector.push_values(ts, row, d.power_limit_w, d.mem_total_bytes, d.extra,
                                            host_busy_of(host))
        if change is not None:
            self.phase_start = change
        cutoff = ts - self.seconds
        start = self.phase_start
        while len(s) > limit or s[0].timestamp <= cutoff or (start is not None
                                                             and s[0].timestamp < start):
            counts.remove(rows.popleft(), s.popleft())
        return True

    def reset(self, samples: Sequence[DeviceSnapshot]) -> None:
        self._ordered = all(a.timestamp <= b.timestamp for a, b in zip(samples, samples[1:]))
        self._detector = PhaseDetector()
        self.phase_start = None
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
