"""Windowing policies: which readings of each device the engine's analysis looks at, and when.

The one ``MonitorEngine`` serves this box, a replay, the simulator and a Prometheus fleet; what
differs is the window, so it is a policy object handed to the engine:

- ``WindowPolicy(seconds=5)`` (this box, a replay, the simulator): every reading enters a sliding
  window of the last ``seconds`` (incrementally, by ``analysis.SlidingWindow``); a device is
  re-analysed once per period, at once when its phase changes or a hardware alarm shows. The
  period is ``analyze_every_s`` (1 s), and longer on a box with more devices than
  ``analyses_per_s`` (16): all devices together are analysed at most that many times a second,
  so 64 devices are each re-analysed every 4 s, spread evenly over the ticks (a per-device
  offset). A diagnosis over a 5 s window gains nothing from being re-run at 4 Hz, and that was
  most of the engine's CPU at a 0.25 s interval (64 devices: 3.38 -> 1.45 ms a tick); the budget
  bounds the rest on large boxes (sim:64 at 1 s, headless: 3.9 -> 1.8 ms a tick).
  A tick counts as due when it is within half an interval of the period, so a real clock's
  jitter (a tick 0.998 s after the last) does not skip a 1 s analysis.
- ``FleetWindowPolicy(seconds=120)`` (a fleet): Prometheus data changes only when a scrape lands, so
  a refresh that returns the same reading (same timestamp) adds nothing; windows hold at most
  ``max_samples`` distinct readings (6: 12 s at a 2 s scrape, 90 s at 15 s), which bounds the
  analysis cost per device; a device's diagnosis is re-run when its time slot turns (slots of
  ``stagger_s`` seconds are offset per device, so a fleet scraped all at once is not re-analysed
  all at once), at once while its window fills or when a hardware alarm shows. Devices unseen for
  ``forget_after_s`` are dropped. Before the first tick the engine backfills ``seconds`` of history
  where the source can (a Prometheus range query), so one-shot reads rest on a window. The engine
  keeps only new readings in its history (``history_repeats=False``) and runs the analysis in a
  worker thread (``off_loop``), so 4,096 GPUs do not hold the UI's event loop.

A policy is immutable configuration; ``policy.start()`` gives the engine its per-device state.
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from fleet_tui.core.monitor.analysis import (
    GROWTH_LOOKBACK_S,
    GROWTH_NOISE_BYTES,
    DeviceAnalysis,
    HostLoad,
    SlidingWindow,
    analyze_device_window,
)
from fleet_tui.core.monitor.analysis.phases import smoothing_s
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_FILLING_FRAC, GROWTH_MIN_FRAC_OF_TOTAL
from fleet_tui.core.monitor.history import MAX_DEVICES, History
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.records import record

FLEET_SOURCE_KIND = "fleet"


class Windows(Protocol):
    """Per-device window state of one engine (made by a policy's ``start``)."""

    def add(self, snapshot: Snapshot, history: History) -> None:
        """A past reading (backfill): keep it, diagnose nothing."""

    def analyze(self, snapshot: Snapshot, keys: Sequence[str],
                history: History) -> dict[str, DeviceAnalysis]:
        """Take the new reading (already in ``history``); the analysis of each device."""
        ...


@record
class WindowPolicy:
    """Sliding windows of every reading over the last ``seconds`` (this box, replay, sim)."""

    seconds: float = 5.0
    growth_lookback_s: float = GROWTH_LOOKBACK_S * 5
    analyze_every_s: float = 1.0  # 0: every tick
    analyses_per_s: float = 16.0  # device analyses a second, all devices together (0: no cap)
    backfill: bool = False  # every reading arrives through the engine
    off_loop: bool = False  # ~0.4 ms a tick for 8 devices: a thread hop would cost more
    history_repeats: bool = True  # every tick is a new reading

    def start(self) -> Windows:
        return SlidingWindows(self)


@record
class FleetWindowPolicy:
    """Distinct scrapes per device, at most ``max_samples`` over ``seconds``, re-analysed on a
    staggered ``stagger_s`` cadence (a fleet)."""

    seconds: float = 120.0
    max_samples: int = 6
    stagger_s: float = 6.0
    forget_after_s: float = 900.0
    growth_lookback_s: float = 600.0
    backfill: bool = True
    # the engine analyses in a worker thread: at 4,096 devices its ~40 ms CPU a refresh
    # (alerts included, loaded) would be one more block of the UI's event loop
    off_loop: bool = True
    # a scrape read again (same timestamp, only older) is not kept again in the engine's history
    history_repeats: bool = False

    def start(self) -> Windows:
        return FleetWindows(self)


Policy = WindowPolicy | FleetWindowPolicy


def policy_for(source_kind: str, window_s: float | None = None) -> Policy:
    """The policy a source of this kind gets (``window_s``: the user's window, else the default)."""
    if source_kind == FLEET_SOURCE_KIND:
        return FleetWindowPolicy() if window_s is None else FleetWindowPolicy(seconds=window_s)
    return WindowPolicy() if window_s is None else WindowPolicy(seconds=window_s)


class SlidingWindows:
    def __init__(self, policy: WindowPolicy):
        self.policy = policy
        self._windows: dict[str, SlidingWindow] = {}
        self._memlog: dict[str, deque] = {}
        # key -> (when its period started, the window's phase start, the device's reading then,
        # the analysis): what a tick within the device's period reuses
        self._analysed: dict[str, tuple[float, float | None, DeviceSnapshot, DeviceAnalysis]] = {}
        # key -> (the reading, the analysis) of the device's last tick: what a settling window shows
        self._shown: dict[str, tuple[DeviceSnapshot, DeviceAnalysis]] = {}
        self._held_since: dict[str, float] = {}  # key -> the first tick a new kind was held

    def period(self, devices: int) -> float:
        """Seconds between two analyses of one device (0: every tick)."""
        every, per_s = self.policy.analyze_every_s, self.policy.analyses_per_s
        if every <= 0:
            return 0.0
        return max(every, devices / per_s) if per_s > 0 else every

    def add(self, snapshot: Snapshot, history: History) -> None:
        """Backfilled readings are in ``history``; windows rebuild from it when they next move."""
        self._windows.clear()
        self._analysed.clear()
        self._shown.clear()
        self._held_since.clear()

    def _reusable(self, key: str, d: DeviceSnapshot, ts: float, win: SlidingWindow,
                  due_s: float) -> DeviceAnalysis | None:
        """The last analysis of ``key`` when its period (``due_s``) has not run out and nothing it
        rests on changed kind: the same phase, the same device state, no new XID, ECC error or
        throttle reason."""
        kept = self._analysed.get(key)
        if kept is None:
            return None
        at, phase_start, then, analysis = kept
        if not 0 <= ts - at < due_s or phase_start != win.phase_start:
            return None
        if (not no_news(d, then) or d.clock_event_reasons != then.clock_event_reasons
                or mem_moved(d, then)):
            return None
        growth = analysis.get("memory_growth")
        if growth is not None and growth.severity == "critical":
            return None  # an out-of-memory countdown moves every tick (it is due, or it stopped)
        return analysis

    def growth_points(self, d: DeviceSnapshot, snap_ts: float, key: str
                      ) -> list[tuple[float, float]]:
        """Memory change points over the growth lookback (only changes above the noise floor are
        kept, so steady memory costs nothing), plus the newest reading."""
        if d.mem_used_bytes is None:
            return []
        ts = d.timestamp or snap_ts
        mem = float(d.mem_used_bytes)
        log = self._memlog.get(key)
        if log is None:
            log = self._memlog[key] = deque(maxlen=4096)
        if not log or abs(mem - log[-1][1]) > GROWTH_NOISE_BYTES:
            log.append((ts, mem))
        cutoff = ts - self.policy.growth_lookback_s
        while len(log) > 1 and log[1][0] <= cutoff:
            log.popleft()
        points = list(log)
        if points[-1][0] != ts:
            points.append((ts, mem))
        return points

    def analyze(self, snapshot: Snapshot, keys: Sequence[str],
                history: History) -> dict[str, DeviceAnalysis]:
        analyses: dict[str, DeviceAnalysis] = {}
        # a key seen twice in one snapshot added two samples: rebuild those windows from history
        dup = len(set(keys)) != len(keys)
        windows = self._windows
        if len(windows) > len(keys) and len(windows) > 2 * MAX_DEVICES:
            kept = set(history.devices())  # a churning fleet: drop devices history dropped
            self._windows = windows = {k: w for k, w in windows.items() if k in kept}
            self._memlog = {k: v for k, v in self._memlog.items() if k in kept}
            self._analysed = {k: v for k, v in self._analysed.items() if k in kept}
            self._shown = {k: v for k, v in self._shown.items() if k in kept}
            self._held_since = {k: v for k, v in self._held_since.items() if k in kept}
        seconds = self.policy.seconds
        n, interval = len(keys), history.interval_s
        period = self.period(n)
        ticks = max(1, math.ceil(period / interval - 1e-9))  # the period in whole ticks
        # due half an interval early: a tick 0.998 s after the last still analyses at 1 s
        due_s = ticks * interval - interval / 2
        host = HostLoad.of(snapshot.host)
        hold = hold_s(interval)
        for j, (d, key) in enumerate(zip(snapshot.devices, keys)):
            win = windows.get(key)
            rebuilt = win is None
            if win is None:  # a new device, or after a backfill: start from what history holds
                win = windows[key] = SlidingWindow(seconds)
                win.reset(history.samples(key, seconds))
            else:
                # the window slides with history (which fills in unset device timestamps)
                newest, held = history.tail(key)
                if dup or newest is None or not win.push(newest, held, host):
                    win.reset(history.samples(key, seconds))
                    rebuilt = True
            if not len(win):
                continue
            growth = self.growth_points(d, snapshot.timestamp, key)  # every reading counts
            ts = d.timestamp or snapshot.timestamp
            shown = self._shown.get(key)
            if shown is not None and win.settling and not rebuilt:
                # a change point was just confirmed; its first samples straddle the change:
                # the last analysis stands until the new phase has a sample past them (a new
                # device state, XID or ECC error is news at once)
                if no_news(d, shown[0]):
                    analyses[key] = shown[1]
                    continue
            kept = None if rebuilt or period <= 0 else self._reusable(key, d, ts, win, due_s)
            if kept is not None:
                analyses[key] = kept
                self._shown[key] = (d, kept)
                continue
            analysis = win.analyze(growth, key, host)
            if (shown is not None and analysis.primary != shown[1].primary and not rebuilt
                    and shown[1].primary == "idle"
                    and ts - self._held_since.setdefault(key, ts) <= hold
                    and win.pending(hold) and no_news(d, shown[0])
                    and analysis.diagnoses[0].severity != "critical"):
                # an idle GPU starts to work and the detector has not confirmed the change: the
                # window dilutes the first samples of work with idle ones (7 idle samples and 1
                # busy read input_starved); idle stands until the change is confirmed or
                # refuted, at most hold_s from the first tick it held. Only from idle: between
                # two kinds of work a bursty workload keeps the detector weighing changes, and
                # holding there delayed its input_starved (sim test: 139 of 160 ticks, was > 90 %)
                analyses[key] = shown[1]
                continue
            self._held_since.pop(key, None)
            analyses[key] = analysis
            self._shown[key] = (d, analysis)
            if period > 0:
                # a device first analysed has its period start 0 to ticks-1 ticks back, by its
                # place: devices seen together (all of them, at start) come due n/ticks a tick
                back = (j * ticks // n) * interval if key not in self._analysed else 0.0
                self._analysed[key] = (ts - back, win.phase_start, d, analysis)
        return analyses


def hold_s(interval: float) -> float:
    """How long a change the detector has not confirmed may hold a device's last analysis: the
    detector's smoothing lag plus a sample (a large shift is confirmed within about that)."""
    return smoothing_s(interval) + interval


def mem_moved(d: DeviceSnapshot, then: DeviceSnapshot) -> bool:
    """Memory moved by more than 1 % of the device since ``then``: a reused analysis would miss
    its time to impact."""
    used, was, total = d.mem_used_bytes, then.mem_used_bytes, d.mem_total_bytes
    if used is None or was is None or not total or used == was:
        return False
    return abs(used - was) > GROWTH_MIN_FRAC_OF_TOTAL * total


def no_news(d: DeviceSnapshot, then: DeviceSnapshot) -> bool:
    """Nothing that must show at once happened since ``then``: the same device state, no new XID
    or uncorrected ECC error, and on a device over half full, memory within 1 % of the device of
    what it was (there memory moving is time to impact: an out-of-memory risk shows on the tick
    it appears, never held; below half, a job allocating as it starts is part of its change)."""
    if not (d.state == then.state and d.xid_errors == then.xid_errors
            and d.ecc_uncorrected == then.ecc_uncorrected):
        return False
    used, was, total = d.mem_used_bytes, then.mem_used_bytes, d.mem_total_bytes
    if used is None or was is None or not total or max(used, was) < GROWTH_FILLING_FRAC * total:
        return True
    return not mem_moved(d, then)


class _Analysed:
    """The last analysis of one fleet device and what it rested on."""

    __slots__ = ("newest_ts", "samples", "slot", "analysis")

    def __init__(self, newest_ts: float, samples: int, slot: int, analysis: DeviceAnalysis):
        self.newest_ts, self.samples, self.slot, self.analysis = newest_ts, samples, slot, analysis


class FleetWindows:
    def __init__(self, policy: FleetWindowPolicy):
        self.policy = policy
        self._windows: dict[str, deque[DeviceSnapshot]] = {}
        self._growth: dict[str, deque[tuple[float, float]]] = {}
        self._last_seen: dict[str, float] = {}
        self._analysed: dict[str, _Analysed] = {}
        self._offset_s: dict[str, float] = {}  # each device's stagger offset (a crc32 per key)
        self._moved: set[str] = set()  # windows that took a reading since the last analysis

    def __len__(self) -> int:
        return len(self._windows)

    def window(self, key: str) -> tuple[DeviceSnapshot, ...]:
        return tuple(self._windows.get(key, ()))

    def add(self, snapshot: Snapshot, history: History | None = None,
            keys: Sequence[str] = ()) -> None:
        """Take the new readings (``keys``: the devices' keys, when the caller has them)."""
        policy = self.policy
        now = snapshot.timestamp
        windows, last_seen = self._windows, self._last_seen
        moved = self._moved
        devices = snapshot.devices
        for d, key in zip(devices, keys if len(keys) == len(devices) else
                          [d.key for d in devices]):
            if d.state != "ok":
                continue
            window = windows.get(key)
            if window is None:
                window = windows[key] = deque(maxlen=policy.max_samples)
                self._growth[key] = deque(maxlen=64)
            ts = d.timestamp or now
            if window and window[-1].timestamp >= ts:
                continue  # the same scrape again (most devices on most refreshes)
            window.append(d)
            moved.add(key)
            while window and ts - window[0].timestamp > policy.seconds:
                window.popleft()
            if d.mem_used_bytes is not None:
                growth = self._growth[key]
                growth.append((ts, float(d.mem_used_bytes)))
                while growth and ts - growth[0][0] > policy.growth_lookback_s:
                    growth.popleft()
            last_seen[key] = now
        for key in [k for k, t in last_seen.items() if now - t > policy.forget_after_s]:
            windows.pop(key, None)
            self._growth.pop(key, None)
            self._analysed.pop(key, None)
            self._offset_s.pop(key, None)
            del last_seen[key]

    def _slot(self, key: str, newest_ts: float) -> int:
        period = self.policy.stagger_s
        if period <= 0:
            return 0
        offset = self._offset_s.get(key)
        if offset is None:
            offset = self._offset_s[key] = (zlib.crc32(key.encode()) % 1000) * period / 1000
        return int((newest_ts + offset) // period)

    def analyze(self, snapshot: Snapshot, keys: Sequence[str] = (),
                history: History | None = None) -> dict[str, DeviceAnalysis]:
        self.add(snapshot, keys=keys)
        moved, self._moved = self._moved, set()
        policy = self.policy
        out = {}
        staggered = policy.stagger_s > 0
        analysed = self._analysed
        for key, window in self._windows.items():
            kept = analysed.get(key)
            if kept is not None and key not in moved:
                out[key] = kept.analysis  # no new reading: the same window as last time
                continue
            if not window:
                continue
            newest = window[-1]
            if kept is not None:
                if kept.newest_ts == newest.timestamp and kept.samples == len(window):
                    out[key] = kept.analysis  # the same window as last time
                    continue
                slot = self._slot(key, newest.timestamp)
                alarm = bool(newest.xid_errors) or (newest.ecc_uncorrected or 0) > (
                    window[-2].ecc_uncorrected or 0 if len(window) > 1 else 0)
                filling = len(window) < policy.max_samples
                if staggered and kept.slot == slot and not alarm and not filling:
                    out[key] = kept.analysis
                    continue
            else:
                slot = self._slot(key, newest.timestamp)
            analysis = analyze_device_window(list(window), growth_points=list(self._growth[key]))
            analysed[key] = _Analysed(newest.timestamp, len(window), slot, analysis)
            out[key] = analysis
        return out
