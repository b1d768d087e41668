"""Memory: nearly full now, or growing towards full (a leak)."""

from __future__ import annotations

from collections.abc import Sequence

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.common import clamp, duration, gib
from fleet_tui.core.monitor.analysis.thresholds import (
    GROWTH_HORIZON_S, GROWTH_MAX_POINTS, GROWTH_MAX_SINGLE_STEP_FRAC, GROWTH_MIN_FRAC_OF_TOTAL,
    GROWTH_MIN_RISES, GROWTH_MIN_SPAN_S, GROWTH_NOISE_BYTES, MEM_PRESSURE_FRAC)
from fleet_tui.core.monitor.analysis.window import WindowStats


def memory_capacity_pressure(st: WindowStats) -> Finding | None:
    if st.mem_used is None or not st.mem_total:
        return None
    frac = st.mem_used / st.mem_total
    if frac < MEM_PRESSURE_FRAC:
        return None
    ev = {"mem_used_frac": frac, "mem_used_bytes": st.mem_used, "mem_total_bytes": st.mem_total}
    return Finding(clamp(0.7 + (frac - MEM_PRESSURE_FRAC) * 3), ev,
                   lambda: f"{frac:.0%} of device memory in use ({gib(st.mem_used)} of "
                   f"{gib(st.mem_total)}); less than {1 - MEM_PRESSURE_FRAC:.0%} headroom.")


def memory_growth(st: WindowStats) -> Finding | None:
    """Memory rising steadily over the growth lookback (``st.growth_points``)."""
    points, mem_total = st.growth_points, st.mem_total
    if len(points) < GROWTH_MIN_RISES + 1 or not mem_total:
        return None
    # Only the stretch since memory was last released counts: a freed model followed by a leak is
    # a leak, whatever the lookback held before.
    release = GROWTH_MIN_FRAC_OF_TOTAL * mem_total
    start = 0
    for i in range(len(points) - 1, 0, -1):
        if points[i - 1][1] - points[i][1] > release:
            start = i
            break
    points = points[start:]
    if len(points) < GROWTH_MIN_RISES + 1:
        return None
    span = points[-1][0] - points[0][0]
    if span < GROWTH_MIN_SPAN_S:
        return None
    rises = falls = 0
    biggest = 0.0
    for (_, a), (_, b) in zip(points, points[1:]):
        if b - a > GROWTH_NOISE_BYTES:
            rises += 1
            if b - a > biggest:
                biggest = b - a
        elif a - b > GROWTH_NOISE_BYTES:
            falls += 1
    if rises < GROWTH_MIN_RISES or falls * 4 > rises:
        return None
    growth = points[-1][1] - points[0][1]
    if (growth < GROWTH_MIN_FRAC_OF_TOTAL * mem_total
            or biggest > GROWTH_MAX_SINGLE_STEP_FRAC * growth):
        return None
    slope = theil_sen_slope(points)
    if slope <= 0:
        return None
    time_to_full = max(0.0, (mem_total - points[-1][1]) / slope)
    if time_to_full > GROWTH_HORIZON_S:
        return None
    ev = {"slope_bytes_s": slope, "time_to_full_s": time_to_full, "rises": rises,
          "span_s": span, "mem_used_bytes": points[-1][1], "mem_total_bytes": mem_total}
    conf = clamp(0.5 + 0.05 * min(rises, 6) + (0.1 if time_to_full < 3600 else 0.0))
    return Finding(conf, ev,
                   lambda: f"Memory grew {gib(growth)} over {span:.0f} s ({rises} rises, "
                   f"{slope / 2**20:.1f} MiB/s): full in about {duration(time_to_full)} at this "
                   f"rate.")


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
