"""Running the rules: one device over one window, and a whole recorded trace window by window."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis, Diagnosis, Finding, RuleDiagnosis
from fleet_tui.core.monitor.analysis.registry import PRIORITY, RULES
from fleet_tui.core.monitor.analysis.tallies import Counts, read_row
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_LOOKBACK_S
from fleet_tui.core.monitor.analysis.window import GrowthPoints, HostLoad, WindowStats, missing_signals, window_stats
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot


def _rules_for(*when: str) -> tuple:
    return tuple((r.rule, r) for r in RULES.values() if r.rule is not None and r.when in when)


# The rules a window runs, in registry order, by (``Activity.state``, whether the window holds an
# alarm signal): each window calls only the rules that can fire on it (a rule call costs ~0.07 us,
# bench_analysis's engine figures are ~20 us per device per tick).
_RULES_BY_STATE = {
    ("lost", True): _rules_for("alarm"),
    ("unknown", False): _rules_for("any"),
    ("unknown", True): _rules_for("alarm", "any"),
    ("idle", False): _rules_for("any", "idle"),
    ("idle", True): _rules_for("alarm", "any", "idle"),
    ("active", False): _rules_for("any", "active"),
    ("active", True): _rules_for("alarm", "any", "active"),
}
_UNKNOWN = RULES["unknown"]
_PRIORITY = dict(PRIORITY)  # a plain dict: read for every diagnosis


def analyze_device_window(samples: Sequence[DeviceSnapshot], *,
                          growth_points: GrowthPoints | None = None,
                          start: float | None = None, end: float | None = None,
                          host: HostLoad | None = None) -> DeviceAnalysis:
    """Diagnose one device from its samples over a window (oldest first).

    ``growth_points`` are (timestamp, mem_used_bytes) over a longer lookback for the memory-growth
    rule; by default the window's own samples are used.
    """
    if not samples:
        raise ValueError("analyze_device_window needs at least one sample")
    rows = list(map(read_row, samples))
    return analyze_rows(rows, Counts(rows, samples), samples, growth_points, start, end,
                        host=host)


def analyze_rows(rows: Sequence[tuple], counts: Counts, samples: Sequence[DeviceSnapshot],
                 growth_points: GrowthPoints | None, start: float | None = None,
                 end: float | None = None, key: str | None = None,
                 host: HostLoad | None = None) -> DeviceAnalysis:
    """``analyze_device_window`` for callers that keep the window's rows (``read_row`` of each of
    ``samples``, oldest first) and their tallies ``counts`` up to date themselves."""
    last = samples[-1]
    if growth_points is None:
        growth_points = [(s.timestamp, float(s.mem_used_bytes)) for s in samples
                         if s.mem_used_bytes is not None]
    st = window_stats(rows, samples, counts, growth_points, host)
    return diagnose(st, last.key if key is None else key, last.index,
                    samples[0].timestamp if start is None else start,
                    last.timestamp if end is None else end, len(samples), counts.phase(samples))


def diagnose(st: WindowStats, key: str, index: int, start: float, end: float, samples: int,
             phase: str | None) -> DeviceAnalysis:
    """Run the rules over one window's (or phase's) statistics; diagnoses ranked by ``rank``."""
    missing = missing_signals(st)
    alarm = st.lost or bool(st.xids) or st.ecc_uncorrected_delta > 0 or \
        (st.ecc_uncorrected_last or 0) > 0
    state = "lost" if st.activity is None else st.activity.state
    keyed: list[tuple[tuple, RuleDiagnosis]] = []
    for rule, rec in _RULES_BY_STATE[state, alarm]:
        found = rule(st)
        if found is not None:
            d = RuleDiagnosis(rec.kind, round(min(1.0, max(0.0, found.confidence)), 3),
                              None, None, rec.action, found.severity or rec.severity, found,
                              rec.role)
            keyed.append((rank(d, found.urgent), d))
    if not keyed:
        d = RuleDiagnosis(
            "unknown", 0.2, action=_UNKNOWN.action, severity=_UNKNOWN.severity,
            finding=Finding(0.2, {"missing": ",".join(missing)},
                            lambda: "Not enough signals: " + (", ".join(missing) or "none") + "."))
        keyed.append((rank(d, False), d))
    if len(keyed) > 1:
        keyed = _with_capping(keyed, st)
        keyed.sort(key=_first, reverse=True)
    diags = [d for _, d in keyed]
    return DeviceAnalysis(  # positional, in field order (once per device per tick)
        key, index, start, end, samples, tuple(diags), tuple(missing), phase)


_CAPS = {"power_capped": "power-capped", "thermal_throttled": "thermal-throttled"}


def _with_capping(keyed: list[tuple[tuple, RuleDiagnosis]], st: WindowStats
                  ) -> list[tuple[tuple, RuleDiagnosis]]:
    """A power or thermal cap modifies the bottleneck, it does not replace it: a memory-bound
    kernel at the power limit is still memory-bound, with slower clocks. The bottleneck's
    evidence and sentence name the cap ("memory-bound, and power-capped")."""
    cap = next((d for _, d in keyed if d.kind in _CAPS), None)
    if cap is None or st.sm_clock is None:
        return keyed
    words = _CAPS[cap.kind]
    clock, clock_max, power, limit = st.sm_clock, st.sm_clock_max, st.power_w, st.power_limit_w
    out = []
    for k, d in keyed:
        found = d.finding if isinstance(d, RuleDiagnosis) else None
        if d.role != "bottleneck" or found is None:
            out.append((k, d))
            continue
        base = found.describe
        facts = dict(found.facts, capped_by=cap.kind, sm_clock_mhz=clock,
                     sm_clock_max_mhz=clock_max, power_w=power, power_limit_w=limit)

        def describe(base=base) -> str:
            return (base() + f" And {words}: SM clock {clock:.0f} of {clock_max or 0:.0f} MHz"
                    + (f" at {power:.0f} of {limit:.0f} W." if power and limit else "."))
        out.append((k, RuleDiagnosis(d.kind, d.confidence, None, None, d.action, d.severity,
                                     found._replace(facts=facts, describe=describe), d.role)))
    return out


_ROLE_RANK = {"bottleneck": 1, "risk": 0, "note": -1}


def rank(d: Diagnosis, urgent: bool) -> tuple:
    """Sort key, highest first: critical or urgent risks, then bottlenecks by the strength of their
    evidence, then risks, then notes (``registry`` module doc)."""
    pressing = urgent or d.severity == "critical"
    return (pressing, _ROLE_RANK.get(d.role, 0), _PRIORITY.get(d.kind, 0) if pressing else 0,
            d.confidence, _PRIORITY.get(d.kind, 0))


def _first(item: tuple) -> tuple:
    return item[0]


def device_series(snapshots: Iterable[Snapshot]) -> dict[str, list[DeviceSnapshot]]:
    """Group a stream of snapshots into per-device sample lists (by device key), in time order."""
    out: dict[str, list[DeviceSnapshot]] = {}
    for snap in snapshots:
        for d in snap.devices:
            if d.timestamp == 0.0 and snap.timestamp:
                # sources that leave the device timestamp unset use the snapshot's
                d = replace(d, timestamp=snap.timestamp)
            out.setdefault(d.key, []).append(d)
    return out


def analyze_trace(snapshots: Iterable[Snapshot], *, window_s: float = 5.0,
                  step_s: float | None = None,
                  growth_lookback_s: float = GROWTH_LOOKBACK_S) -> list[DeviceAnalysis]:
    """Diagnose every device over windows ``[start, start + window_s)`` stepped by ``step_s``
    (default: the window, i.e. back-to-back windows). Windows are ordered by start, then device."""
    if window_s <= 0:
        raise ValueError("window_s must be positive")
    step = window_s if step_s is None else step_s
    if step <= 0:
        raise ValueError("step_s must be positive")
    per_device = device_series(snapshots)
    results: list[DeviceAnalysis] = []
    for samples in per_device.values():
        times = [s.timestamp for s in samples]
        rows = list(map(read_row, samples))  # each sample's signals read once, not once per window
        counts, c_lo, c_hi = Counts(), 0, 0
        mem_points = [(s.timestamp, float(s.mem_used_bytes)) for s in samples
                      if s.mem_used_bytes is not None]
        mem_times = [p[0] for p in mem_points]
        if not times:
            continue
        t0, t_last = times[0], times[-1]
        k = 0
        while True:
            start = t0 + k * step
            if start > t_last:
                break
            end = start + window_s
            lo = bisect.bisect_left(times, start - 1e-9)
            hi = bisect.bisect_left(times, end - 1e-9)
            k += 1
            if hi - lo < 1:  # a gap: on to the first window that holds the next sample
                if lo < len(times):
                    k = max(k, math.floor((times[lo] - window_s - t0) / step))
                continue
            g_lo = bisect.bisect_left(mem_times, end - growth_lookback_s)
            g_hi = bisect.bisect_left(mem_times, end - 1e-9)
            # counts tally rows[c_lo:c_hi]; windows move forward, so usually only the rows that
            # left and entered since the previous window are tallied
            if c_lo <= lo < c_hi <= hi:
                for i in range(c_lo, lo):
                    counts.remove(rows[i], samples[i])
                for i in range(c_hi, hi):
                    counts.add(rows[i], samples[i])
            else:
                counts = Counts(rows[lo:hi], samples[lo:hi])
            c_lo, c_hi = lo, hi
            results.append(analyze_rows(rows[lo:hi], counts, samples[lo:hi],
                                        mem_points[g_lo:g_hi], start=start, end=end))
            if end >= t_last + 1e-9 and step >= window_s:
                break
    results.sort(key=lambda a: (a.start, a.device_index, a.device_key))
    return results
