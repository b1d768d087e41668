"""Memory: nearly full now, or growing towards full (a leak, or a device filling up)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress, count, repeat
from math import isfinite
from operator import gt, itemgetter, le, lt, sub

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.common import clamp, duration, gib
from fleet_tui.core.monitor.analysis.thresholds import (
    GROWTH_FILLING_FRAC,
    GROWTH_HORIZON_S,
    GROWTH_IMMINENT_MIN_RISES,
    GROWTH_IMMINENT_S,
    GROWTH_MAX_FLAT_S,
    GROWTH_MAX_POINTS,
    GROWTH_MAX_SINGLE_STEP_FRAC,
    GROWTH_MIN_FRAC_OF_TOTAL,
    GROWTH_MIN_RISES,
    GROWTH_MIN_SPAN_S,
    GROWTH_NOISE_BYTES,
    GROWTH_RECENT_S,
    HEADROOM_MAX_FRAC,
    MEM_CRITICAL_FRAC,
    MEM_PRESSURE_FRAC,
)
from fleet_tui.core.monitor.analysis.window import GrowthPoints, WindowStats


def memory_capacity_pressure(st: WindowStats) -> Finding | None:
    if st.mem_used is None or not st.mem_total:
        return None
    frac = st.mem_used / st.mem_total
    if frac < MEM_PRESSURE_FRAC:
        return None
    ev = {"mem_used_frac": frac, "mem_used_bytes": st.mem_used, "mem_total_bytes": st.mem_total}
    return Finding(clamp(0.7 + (frac - MEM_PRESSURE_FRAC) * 3), ev,
                   lambda: f"{frac:.0%} of device memory in use ({gib(st.mem_used)} of "
                   f"{gib(st.mem_total)}); less than {1 - MEM_PRESSURE_FRAC:.0%} headroom.",
                   frac >= MEM_CRITICAL_FRAC)


def memory_headroom(st: WindowStats) -> Finding | None:
    """A GPU that computes most of the time with under half its memory in use."""
    a = st.activity
    if (a is None or a.state != "active" or a.waiting is not None or st.mem_used is None
            or not st.mem_total or a.duty < 50.0):
        return None
    frac = st.mem_used / st.mem_total
    if frac >= HEADROOM_MAX_FRAC:
        return None
    free = st.mem_total - st.mem_used
    return Finding(clamp(0.5 + 0.4 * (1 - frac / HEADROOM_MAX_FRAC)),
                   {"mem_used_frac": frac, "mem_free_bytes": free},
                   lambda: f"Only {frac:.0%} of device memory in use ({gib(free)} free) while "
                   f"kernels run {a.duty:.0f}% of the time: room for a larger batch.")


_time = itemgetter(0)
_mem = itemgetter(1)
_NOISE = float(GROWTH_NOISE_BYTES)
_MINUS_NOISE = -_NOISE
# (the comparisons below map operator.lt/gt/le over repeat(x): calling a bound ``x.__lt__`` per
# element goes through a slot wrapper, ~5x slower; _after_release's scan of ~300 points was ~50 us)


def _after_release(points: GrowthPoints, mem_total: float) -> int:
    """Only the stretch since memory was last released counts: a freed model followed by a leak
    is a leak, whatever the lookback held before. The index of the first reading after the last
    release (a fall a - b > the release size, i.e. b - a < -size: a float difference changes sign
    exactly), 0 if none. Scanned from the newest reading back, stopping at the first release
    found (bench_analysis --lines: a phase's ~300 points, a release a phase or two back)."""
    release = -(GROWTH_MIN_FRAC_OF_TOTAL * mem_total)
    back = map(_mem, reversed(points))
    next(back, None)
    steps_back = map(sub, map(_mem, reversed(points)), back)  # b - a, newest pair first
    r = next(compress(count(), map(gt, repeat(release), steps_back)), None)
    return 0 if r is None else len(points) - 1 - r


def memory_growth(st: WindowStats) -> Finding | None:
    """Memory that keeps rising (``st.growth_points``, the growth lookback): a leak with rises
    that continue to the end of the window, or a device filling up (see ``thresholds``).

    The scans over the points are C-level maps (``bench_analysis --lines``: a phase's diagnosis
    reads ~300 points; ~40 % of its cost as Python loops)."""
    mem_total = st.mem_total
    if len(st.growth_points) < 3 or not mem_total or mem_total - mem_total != 0:
        return None
    points = st.growth_points
    # a quick no without reading the whole lookback (bench_analysis --lines: a phase's ~300
    # points): no rise among the readings of the last GROWTH_MAX_FLAT_S (+1 s, and the one
    # before them). Any rise the checks below would keep as recent is one of those.
    i = bisect_left(points, points[-1][0] - GROWTH_MAX_FLAT_S - 1.0, key=_time)
    tail = list(map(_mem, points[i - 1 if i else 0:]))
    if isfinite(sum(tail)) and not any(map(lt, repeat(_NOISE), map(sub, tail[1:], tail))):
        return None
    i = _after_release(points, mem_total)
    # NaN/inf readings are missing values: left out, and the release found again. Readings
    # before the release pair cannot move it (bench_analysis --lines: ~60 of ~300 read here)
    if not isfinite(sum(map(_mem, points[i - 1 if i else 0:]))):
        points = [p for p in points if p[1] - p[1] == 0.0]
        i = _after_release(points, mem_total)
    if i:
        points = points[i:]
    mems = list(map(_mem, points))
    steps = list(map(sub, mems[1:], mems))  # b - a of each pair of readings
    if len(points) < 3:
        return None
    end_t, end_mem = points[-1]
    times = list(map(_time, points))
    rise_t = list(compress(times[1:], map(lt, repeat(_NOISE), steps)))
    # the rise must still be going on: a staircase that stopped is not growth
    if not rise_t or end_t - rise_t[-1] > GROWTH_MAX_FLAT_S:
        return None
    frac = end_mem / mem_total
    filling = False
    if frac >= GROWTH_FILLING_FRAC:
        recent = list(compress(points, map(le, repeat(end_t - GROWTH_RECENT_S), times)))
        filling = (len(recent) >= 3
                   and sum(1 for t in rise_t if t >= end_t - GROWTH_RECENT_S) >= 2)
    slope = theil_sen_slope(recent) if filling else 0.0
    filling = filling and slope > GROWTH_NOISE_BYTES
    if not filling:
        # the trend is the last run of rises no more than GROWTH_MAX_FLAT_S apart: steps that
        # ended before it (a model load, then buffers) are not part of it
        first = len(rise_t) - 1
        while first > 0 and rise_t[first] - rise_t[first - 1] <= GROWTH_MAX_FLAT_S:
            first -= 1
        run_start = rise_t[first]
        i = next(compress(count(), map(le, repeat(run_start), times)))  # first at/after it
        points = points[max(0, i - 1):]  # from the reading before the run's first rise
        steps = steps[max(0, i - 1):]
        rise_t = rise_t[first:]
        falls = sum(map(gt, repeat(_MINUS_NOISE), steps))  # a - b > GROWTH_NOISE_BYTES
        biggest = max(steps)
    rises = len(rise_t)
    span = end_t - points[0][0]
    growth = end_mem - points[0][1]
    if not filling:
        if (rises < GROWTH_MIN_RISES or falls * 4 > rises or span < GROWTH_MIN_SPAN_S
                or growth < GROWTH_MIN_FRAC_OF_TOTAL * mem_total
                or biggest > GROWTH_MAX_SINGLE_STEP_FRAC * growth):
            return None
        slope = theil_sen_slope(points)
    if slope <= 0:
        return None
    time_to_full = max(0.0, (mem_total - end_mem) / slope)
    if time_to_full > GROWTH_HORIZON_S:
        return None
    ev = {"slope_bytes_s": slope, "time_to_full_s": time_to_full, "rises": rises,
          "span_s": span, "mem_used_bytes": end_mem, "mem_total_bytes": mem_total,
          "mem_used_frac": frac, "filling": filling}
    if filling:
        conf = clamp(0.7 + 0.3 * frac)
    else:
        conf = clamp(0.5 + 0.05 * min(rises, 6) + (0.1 if time_to_full < 3600 else 0.0))
    how = (f"{frac:.0%} of the device in use and still rising" if filling
           else f"grew {gib(growth)} over {span:.0f} s ({rises} rises)")
    return Finding(conf, ev,
                   lambda: f"Memory {how}, {slope / 2**20:.1f} MiB/s: full in about "
                   f"{duration(time_to_full)} at this rate.",
                   time_to_full <= GROWTH_IMMINENT_S
                   and (filling or rises >= GROWTH_IMMINENT_MIN_RISES))


def theil_sen_slope(points: Sequence[tuple[float, float]]) -> float:
    """Median of pairwise slopes: robust to single jumps and outliers (Theil 1950, Sen 1968)."""
    if len(points) > GROWTH_MAX_POINTS:
        step = len(points) / GROWTH_MAX_POINTS
        idx = sorted({int(i * step) for i in range(GROWTH_MAX_POINTS)} | {len(points) - 1})
        points = [points[i] for i in idx]
    slopes = []
    for i in range(len(points)):
        ti, yi = points[i]
        for j in range(i + 1, len(points)):
            tj, yj = points[j]
            if tj > ti:
                slopes.append((yj - yi) / (tj - ti))
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2
