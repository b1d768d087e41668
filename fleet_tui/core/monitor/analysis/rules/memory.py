"""Memory: nearly full now, or growing towards full (a leak, or a device filling up)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress, count, repeat
from math import isfinite
from operator import gt, itemgetter, le, lt, sub
from statistics import median
from typing import NamedTuple

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.evidence import countdown
from fleet_tui.core.monitor.analysis.rules.common import clamp, duration, gib
from fleet_tui.core.monitor.analysis.thresholds import (
    BURST_MIN_SPAN_S,
    ENGINE_POOL_MAX_FRAC,
    ENGINE_POOL_MIN_FRAC,
    FRESH_MIN_RISES,
    FRESH_S,
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
    OOM_CRITICAL_S,
    OOM_EXTRAPOLATE,
    OOM_MIN_RISING_S,
    PLATEAU_MIN_S,
    RAMP_MIN_RISES,
    RAMP_TOLERANCE,
)
from fleet_tui.core.monitor.analysis.window import GrowthPoints, WindowStats


def memory_capacity_pressure(st: WindowStats) -> Finding | None:
    used = st.mem_now
    if used is None or not st.mem_total:
        return None
    frac = used / st.mem_total
    if frac < MEM_PRESSURE_FRAC or engine_pool_frac(st) is not None:
        return None  # (a serving engine's pool is full by design: engine_pool says so)
    ev = {"mem_used_frac": frac, "mem_used_bytes": used, "mem_total_bytes": st.mem_total}
    return Finding(clamp(0.7 + (frac - MEM_PRESSURE_FRAC) * 3), ev,
                   lambda: f"{frac:.0%} of device memory in use ({gib(used)} of "
                   f"{gib(st.mem_total)}); less than {1 - MEM_PRESSURE_FRAC:.0%} headroom.",
                   frac >= MEM_CRITICAL_FRAC, "critical" if frac >= MEM_CRITICAL_FRAC else None)


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


def engine_pool_frac(st: WindowStats) -> float | None:
    """The share of memory a serving engine's pre-allocated pool holds, or None: an engine process
    on the device, 85-96 % in use (what the engines reserve) and flat on the freshest readings
    (an allocation that stopped: the pool is reserved once at start)."""
    used = st.mem_now
    if st.engine is None or used is None or not st.mem_total:
        return None
    frac = used / st.mem_total
    if not ENGINE_POOL_MIN_FRAC <= frac <= ENGINE_POOL_MAX_FRAC:
        return None
    points = st.growth_points
    if points:
        end_t = points[-1][0]
        i = bisect_left(points, end_t - FRESH_S, key=_time)
        tail = [m for _, m in points[max(0, i - 1):]]
        if any(b - a > _NOISE for a, b in zip(tail, tail[1:])):
            return None  # still filling
    return frac


def engine_pool(st: WindowStats) -> Finding | None:
    """A serving engine's KV-cache pool: reserved on purpose, not a leak, not pressure."""
    frac = engine_pool_frac(st)
    if frac is None:
        return None
    engine, used, total = st.engine, st.mem_now, st.mem_total
    return Finding(0.85, {"engine": engine, "mem_used_frac": frac, "mem_used_bytes": used,
                          "mem_total_bytes": total},
                   lambda: f"{engine} holds {frac:.0%} of device memory ({gib(used)} of "
                   f"{gib(total)}), flat: the KV-cache pool it reserves at start, by design, "
                   f"not a leak; requests are limited by the pool, not by the device's memory.")


class FreshRate(NamedTuple):
    """Memory over the freshest readings (``FRESH_S``)."""

    rate_bytes_s: float  # robust (Theil-Sen) slope over the fresh span
    rises: int  # separate rises in it
    plateau: bool  # no rise for twice the rises' spacing: the filling stopped
    rising_s: float  # how long the current run of rises has lasted (its evidence)
    run_bytes: float = 0.0  # what the current run of rises has allocated since it began
    ramp_rate_bytes_s: float = 0.0  # the rate of a steady ramp still going on (see ramp_rate)
    burst_rate_bytes_s: float = 0.0  # the mean rate since the run began (see burst_rate)
    burst_bytes: float = 0.0  # what that span allocated
    burst_s: float = 0.0  # and how long it is


def fresh_rate(points: GrowthPoints, mem_total: float) -> FreshRate | None:
    """The rate of the last ``FRESH_S`` seconds of ``points`` (memory is a step function between
    readings: the engine keeps only changes, so the reading before the span starts it), counted
    from the last release of memory (a process that exited, then another), or None with fewer
    than two readings."""
    if len(points) < 2:
        return None
    end_t = points[-1][0]
    t0 = end_t - FRESH_S
    # the readings the rises' scan below can reach, from the last release among them
    points = points[bisect_left(points, t0 - GROWTH_MAX_FLAT_S - 1.0, key=_time):]
    if not isfinite(sum(map(_mem, points))):  # NaN/inf readings are missing values
        points = [p for p in points if p[1] - p[1] == 0.0]
    r = _after_release(points, mem_total)
    if r:
        points = points[r:]
    if len(points) < 2:
        return FreshRate(0.0, 0, False, 0.0)
    i = bisect_left(points, t0, key=_time)
    # the newest rises (up to 8): their spacing says when a pause is a plateau, and how far back
    # the current run of rises goes
    rises_t: list[float] = []
    sizes: list[float] = []  # the rises' bytes, newest first
    run_from = points[-1][1]  # memory before the run's first rise
    for k in range(len(points) - 1, 0, -1):
        step = points[k][1] - points[k - 1][1]
        if step > _NOISE:
            if rises_t and rises_t[-1] - points[k][0] > GROWTH_MAX_FLAT_S:
                break  # an earlier run
            rises_t.append(points[k][0])
            sizes.append(step)
            run_from = points[k - 1][1]
            if len(rises_t) >= 8:
                break
    fresh = sum(1 for t in rises_t if t > t0)
    plateau = False
    if len(rises_t) >= 2:
        spacing = (rises_t[0] - rises_t[-1]) / (len(rises_t) - 1)
        plateau = end_t - rises_t[0] > max(2.0 * spacing, PLATEAU_MIN_S)
    elif rises_t:  # one allocation, then nothing for PLATEAU_MIN_S: a step, then flat
        plateau = end_t - rises_t[0] > PLATEAU_MIN_S
    rising_s = end_t - rises_t[-1] if rises_t else 0.0
    rate = 0.0
    if fresh >= FRESH_MIN_RISES:
        span = list(points[max(0, i - 1):])
        if span and span[0][0] < t0:  # the reading before the span holds until the span starts
            span[0] = (t0, span[0][1])
        rate = theil_sen_slope(span)
    burst = burst_rate(points, rises_t[-1] if rises_t else end_t)
    return FreshRate(rate, fresh, plateau, rising_s, points[-1][1] - run_from,
                     ramp_rate(rises_t, sizes, end_t), *burst)


def burst_rate(points: GrowthPoints, first_rise_t: float) -> tuple[float, float, float]:
    """(rate, bytes, seconds): memory's mean rate over the current run of rises (whose first
    rise was read at ``first_rise_t``), from ``BURST_MIN_SPAN_S`` before that rise, over at most
    the freshest ``FRESH_S``. A step read at one reading is not bytes per sampling interval (a
    1.5 GB allocation read 0.25 s after the reading before it is no 6 GB/s), and the span must
    not depend on whether flat readings were kept (the engine keeps only changes)."""
    end_t, end_mem = points[-1]
    t0 = max(first_rise_t - BURST_MIN_SPAN_S, end_t - FRESH_S)
    i = bisect_left(points, t0, key=_time)
    # memory is a step function between readings: the one at or before t0 holds at t0
    m0 = points[i][1] if i < len(points) and points[i][0] == t0 else points[max(0, i - 1)][1]
    grown, span = end_mem - m0, end_t - t0
    return (grown / span if grown > _NOISE else 0.0), grown, span


def ramp_rate(rises_t: Sequence[float], sizes: Sequence[float], end_t: float) -> float:
    """The rate of a steady ramp, or 0.0: the newest ``RAMP_MIN_RISES`` rises (``rises_t`` and
    their ``sizes``, newest first) alike in size and evenly spaced, within ``RAMP_TOLERANCE`` of
    their medians, and the next one not overdue at ``end_t``. A loop allocating the same bytes
    each step (a leak) draws such a ramp from its first steps; a job's start draws a burst of
    unlike allocations (weights, optimizer states, workspace) and a model load or an engine pool
    one step, then a plateau."""
    if len(rises_t) < RAMP_MIN_RISES:
        return 0.0
    times, steps = rises_t[:RAMP_MIN_RISES], sizes[:RAMP_MIN_RISES]
    gaps = [a - b for a, b in zip(times, times[1:])]
    size, gap = median(steps), median(gaps)
    if gap <= 0.0 or end_t - times[0] > (1.0 + RAMP_TOLERANCE) * gap:
        return 0.0
    if any(abs(x - size) > RAMP_TOLERANCE * size for x in steps):
        return 0.0
    if any(abs(g - gap) > RAMP_TOLERANCE * gap for g in gaps):
        return 0.0
    return size / gap


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


def _imminent_oom(st: WindowStats, points: GrowthPoints, mem_total: float, fresh: FreshRate) -> Finding | None:
    """Memory full within a minute at the freshest readings' rate, a steady ramp's or the current
    run's: critical whatever the cause; None when none of them says so."""
    if fresh.rises >= FRESH_MIN_RISES and fresh.rate_bytes_s > GROWTH_NOISE_BYTES:
        # time to impact on the freshest readings: full within a minute is an OOM about to happen
        end_mem = next((m for _, m in reversed(points) if m - m == 0.0), None)
        left = (OOM_CRITICAL_S + 1.0 if end_mem is None
                else max(0.0, (mem_total - end_mem) / fresh.rate_bytes_s))
        if (end_mem is not None and left <= OOM_CRITICAL_S
                and fresh.rising_s >= OOM_MIN_RISING_S
                and left <= OOM_EXTRAPOLATE * fresh.rising_s):
            return _oom_imminent(st, end_mem, fresh, left)
    if (fresh.ramp_rate_bytes_s > GROWTH_NOISE_BYTES
            and not _copying(st, fresh.ramp_rate_bytes_s)):
        # a steady ramp's first seconds: full within a minute at its rate, and no more free
        # than the run has already allocated (it has only to do again what it has done)
        end_mem = next((m for _, m in reversed(points) if m - m == 0.0), mem_total)
        free = mem_total - end_mem
        left = max(0.0, free / fresh.ramp_rate_bytes_s)
        if left <= OOM_CRITICAL_S:
            return _oom_imminent(st, end_mem, fresh._replace(
                rate_bytes_s=fresh.ramp_rate_bytes_s), left,
                f"in a steady ramp (like rises for {fresh.rising_s:.1f} s)"
                f"{_cause(st, fresh.ramp_rate_bytes_s)}", fresh.rising_s)
    if fresh.burst_rate_bytes_s > GROWTH_NOISE_BYTES:
        # Full at the current run's rate within a minute, and within 3x as long as the run has
        # lasted, is critical whatever the cause: a leak's first allocations, a job's start and
        # a load look alike, and one that goes on runs out of memory; a plateau drops it (above).
        end_mem = next((m for _, m in reversed(points) if m - m == 0.0), mem_total)
        left = max(0.0, (mem_total - end_mem) / fresh.burst_rate_bytes_s)
        if left <= min(OOM_CRITICAL_S, OOM_EXTRAPOLATE * fresh.burst_s):
            return _oom_imminent(st, end_mem, fresh._replace(
                rate_bytes_s=fresh.burst_rate_bytes_s), left,
                f"over the last {fresh.burst_s:.1f} s{_cause(st, fresh.burst_rate_bytes_s)}"
                ", if it goes on", fresh.burst_s)
    return None


def _last_run(points: GrowthPoints, steps: list[float], rise_t: list[float], times: list[float],
              ) -> tuple[GrowthPoints, list[float], list[float], int, float]:
    """The trend: the last run of rises no more than GROWTH_MAX_FLAT_S apart, from the reading
    before its first rise (steps that ended before it, a model load then buffers, are not part of
    it); its points, steps and rise times, its falls and its biggest step."""
    first = len(rise_t) - 1
    while first > 0 and rise_t[first] - rise_t[first - 1] <= GROWTH_MAX_FLAT_S:
        first -= 1
    run_start = rise_t[first]
    i = next(compress(count(), map(le, repeat(run_start), times)))  # first at/after it
    steps = steps[max(0, i - 1):]
    return (points[max(0, i - 1):], steps, rise_t[first:],
            sum(map(gt, repeat(_MINUS_NOISE), steps)),  # a - b > GROWTH_NOISE_BYTES
            max(steps))


def memory_growth(st: WindowStats) -> Finding | None:
    """Memory that keeps rising (``st.growth_points``, the growth lookback): a leak with rises
    that continue to the end of the window, or a device filling up (see ``thresholds``).

    The scans over the points are C-level maps (``bench_analysis --lines``: a phase's diagnosis
    reads ~300 points; ~40 % of its cost as Python loops)."""
    mem_total = st.mem_total
    if len(st.growth_points) < 2 or not mem_total or mem_total - mem_total != 0:
        return None
    points = st.growth_points
    fresh = fresh_rate(points, mem_total)
    if fresh is not None and fresh.plateau:
        return None  # a plateau is not growth
    if st.engine is not None and points[-1][1] <= ENGINE_POOL_MAX_FRAC * mem_total:
        return None  # a serving engine loads its weights and reserves its pool (engine_pool)
    if fresh is not None:
        imminent = _imminent_oom(st, points, mem_total, fresh)
        if imminent is not None:
            return imminent
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
        points, steps, rise_t, falls, biggest = _last_run(points, steps, rise_t, times)
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
    conf = clamp(0.7 + 0.3 * frac if filling
                 else 0.5 + 0.05 * min(rises, 6) + (0.1 if time_to_full < 3600 else 0.0))
    how = (f"{frac:.0%} of the device in use and still rising" if filling
           else f"grew {gib(growth)} over {span:.0f} s ({rises} rises)")
    return Finding(conf, ev,
                   lambda: f"Memory {how}: full in {duration(time_to_full)} at "
                   f"+{rate_text(slope)}.",
                   time_to_full <= GROWTH_IMMINENT_S
                   and (filling or rises >= GROWTH_IMMINENT_MIN_RISES))


def _oom_imminent(st: WindowStats, end_mem: float, fresh: FreshRate, left: float,
                  over: str = f"over the last {FRESH_S:.0f} s",
                  span_s: float = FRESH_S) -> Finding:
    mem_total = st.mem_total or 0.0
    frac = end_mem / mem_total
    rate = fresh.rate_bytes_s
    ev = {"slope_bytes_s": rate, "time_to_full_s": left, "rises": fresh.rises,
          "span_s": span_s, "mem_used_bytes": end_mem, "mem_total_bytes": mem_total,
          "mem_used_frac": frac, "filling": True}
    return Finding(clamp(0.8 + 0.2 * frac), ev,
                   lambda: f"Out of memory in about {countdown(left)}: {frac:.0%} used "
                   f"({gib(end_mem)} of {gib(mem_total)}), full at +{rate_text(rate)} {over}.",
                   True, "critical")


def _copying(st: WindowStats, rate: float) -> bool:
    """Host-to-device traffic at half the memory's rate or more: the bytes are a copy (a load),
    paced by the link, so its rises are alike without being a loop's; it stops when the data is
    in. A loop allocating on the device (activations, caches, a leak) moves nothing over PCIe."""
    rx = st.pcie_rx_now
    return rx is not None and rx >= 0.5 * rate


def _cause(st: WindowStats, rate: float) -> str:
    """Where the bytes come from, as PCIe says: host-to-device traffic near the memory's rate is a
    load (weights, a dataset) that stops when the data is in; without it the job allocates on the
    device (activations, caches, a leak)."""
    rx = st.pcie_rx_now
    if rx is None:
        return ""
    if _copying(st, rate):
        return f" (arriving over PCIe at {rate_text(rx)}: a load)"
    return f" (allocated on the device: PCIe host\u2192device {rate_text(rx)})"


def rate_text(bytes_s: float) -> str:
    """A memory rate for people: GB/s from a gigabyte a second, else MB/s."""
    return f"{bytes_s / 1e9:.1f} GB/s" if abs(bytes_s) >= 1e9 else f"{bytes_s / 1e6:.0f} MB/s"


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
