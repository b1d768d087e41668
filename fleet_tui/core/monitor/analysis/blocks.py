"""``analyze`` of a raw capture phase by phase, a run of plain samples at a time (``runs``): the
same phases, sums and results as ``stream.analyze_readings`` (a test compares them), with the
per-sample work done on columns.

For a run: the detector's features and smoothing factors are computed for every sample at once
(the formulas of ``phases.features_of`` and ``PhaseDetector.push_values``, element by element in
the same order, so the same floats), then ``PhaseDetector.step`` runs per sample (its smoothing is
a recursion). Where ``stream.push_reading`` settles pending samples one by one, here the samples
settled between two change points are a slice of the run: their sums are ``numpy.cumsum`` from
the phase's sums (a running sum, added in sample order like ``Span.add``), their tallies counted
at once (``Span.add_plain``). Samples not yet settled (the last ``LAG_S`` seconds) are carried
into the next run. Anything else (a sample with an N/A reading, ECC or XIDs, a recording) goes
through ``stream.push_reading`` with the same state.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import partial
from typing import NamedTuple

import numpy as np

from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
from fleet_tui.core.monitor.analysis.phases import SMOOTH_S, SMOOTH_SAMPLES, PhaseDetector, smoothing_s
from fleet_tui.core.monitor.analysis.runs import Run, plain_run
from fleet_tui.core.monitor.analysis.stream import (
    LAG_S,
    TAIL_KEEP_MIN,
    DeviceState,
    Reading,
    SnapshotOf,
    Span,
    edge_of,
    flush,
    push_reading,
)
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_LOOKBACK_S, SPARSE_DUTY_MAX_PCT

_accumulate = np.add.accumulate


def analyze_items(items: Iterable[tuple[str, Reading] | Run], snapshot_of: SnapshotOf, *,
                  growth_lookback_s: float = GROWTH_LOOKBACK_S) -> Iterator[DeviceAnalysis]:
    """``stream.analyze_readings`` (phases) over ``runs.read_items``: runs and readings."""
    lookback = growth_lookback_s
    devices: dict[str, DeviceState] = {}
    carried: dict[str, Run] = {}  # a device's pending samples, as a run (its deque is empty)
    for item in items:
        if isinstance(item, Run):
            run, start = item, 0
            dev = devices.get(run.key)
            if dev is None:
                dev = devices[run.key] = DeviceState(run.key, float(run.ts[0]), None)
            held = carried.pop(run.key, None)
            if held is not None and held.static is run.static:
                run, start = held.then(run), len(held)
            elif held is not None:
                _uncarry(dev, held)
            if dev.pending:
                before = _run_of_pending(dev, run)
                if before is None:  # e.g. a sample with ECC counts still pending
                    for j in range(start, len(run)):
                        done = push_reading(dev, run.reading(j), None, lookback, snapshot_of)
                        if done is not None:
                            yield done
                    continue
                dev.pending.clear()
                run, start = before.then(run), len(before)
            done_list, rest = _push_run(dev, run, start, lookback, snapshot_of)
            yield from done_list
            if len(rest):
                carried[run.key] = rest
        else:
            key, r = item
            dev = devices.get(key)
            if dev is None:
                dev = devices[key] = DeviceState(key, r.ts, None)
            held = carried.pop(key, None)
            if held is not None:
                _uncarry(dev, held)
            done = push_reading(dev, r, None, lookback, snapshot_of)
            if done is not None:
                yield done
    for key, dev in devices.items():
        held = carried.pop(key, None)
        if held is not None:
            _uncarry(dev, held)
        yield from flush(dev, lookback, snapshot_of)


def _uncarry(dev: DeviceState, held: Run) -> None:
    dev.pending.extend(held.reading(j) for j in range(len(held)))


def _run_of_pending(dev: DeviceState, run: Run) -> Run | None:
    out = None
    for r in dev.pending:
        one = plain_run(r, run.key, run.static, run.consts)
        if one is None:
            return None
        out = one if out is None else out.then(one)
    return out


def _push_run(dev: DeviceState, run: Run, start: int, lookback: float,
              snapshot_of: SnapshotOf) -> tuple[list[DeviceAnalysis], Run]:
    """``push_reading`` of samples ``start`` onwards of ``run`` (those before are pending):
    the phases that end, and the samples left pending."""
    det = dev.detector
    if det is None:  # (the devices here are phase-split: DeviceState(..., None) makes one)
        raise ValueError("a phase-split device without a phase detector")
    n = len(run)
    ts = run.ts.tolist()
    feats = features(det, run, start)
    if feats is None:  # no power limit or memory size: features missing, one by one
        dev.pending.extend(run.reading(j) for j in range(start))
        out = []
        for j in range(start, n):
            done = push_reading(dev, run.reading(j), None, lookback, snapshot_of)
            if done is not None:
                out.append(done)
        return out, run.tail(n)
    xs, alphas = feats
    # (index, change point) of the samples that start a phase
    changes = det.steps(ts[start:], xs, alphas, start)
    det.skip_to(ts[-1])
    # per run, not per settle: memory used, and how many samples ran kernels under half the time
    # up to each (an integer prefix sum: exact)
    cols = run.cols
    used = cols[:, 12].tolist()
    waits = np.concatenate(((0,), np.cumsum(cols[:, 0] < SPARSE_DUTY_MAX_PCT))).tolist()
    at = _RunLists(ts, used, waits)
    out = []
    s = 0  # samples before s are settled; s..j-1 pending
    for j, c in changes:
        # the lag settle after sample j-1, then the pending samples before the change point
        lag = bisect_left(ts, ts[j - 1] - LAG_S, s, j) if j > start else s
        moved = max(lag, bisect_left(ts, c, lag, j))
        # the samples in the detector's lag before the change are counted, not summed
        # (stream.TAIL_KEEP_MIN)
        smooth = smoothing_s(ts[j] - ts[j - 1] if j else None)
        tail = max(lag, bisect_left(ts, c - smooth, lag, moved))
        _settle(dev, run, at, s, tail, lookback)
        _settle(dev, run, at, tail, moved, lookback, dev.span.n >= TAIL_KEEP_MIN)
        s = moved
        boundary = c if s == j else min(c, ts[s])
        span = dev.span
        if span.newest is not None and boundary <= span.newest:
            boundary = ts[s] if s < j else ts[j]
        if len(span):
            out.append(span.analysis(dev.key, boundary, dev.growth, snapshot_of))
            dev.span = Span(boundary, edge_of(boundary, ts[j], smooth))
    if n - 1 >= start:
        end = max(s, bisect_left(ts, ts[n - 1] - LAG_S, s, n))
        _settle(dev, run, at, s, end, lookback)
        s = end
    return out, run.tail(s)


class _RunLists(NamedTuple):
    """A run's timestamps, memory used and running count of waiting samples, as lists."""

    ts: list[float]
    used: list[float]
    waits: list[int]  # samples before each under SPARSE_DUTY_MAX_PCT duty (len n + 1)


def _settle(dev: DeviceState, run: Run, at: _RunLists, a: int, b: int,
            lookback: float, skip: bool = False) -> None:
    """``stream.settle`` of samples ``a`` to ``b`` of ``run`` (``skip``: counted, not summed)."""
    if a >= b:
        return
    ts = at.ts
    g = dev.growth
    g.extend(zip(ts[a:b], at.used[a:b]))
    cutoff = ts[b - 1] - lookback
    while g[0][0] < cutoff:
        g.popleft()
    span = dev.span
    if skip:
        span.skip(ts[b - 1], b - a)
        return
    h = a
    if span.edge_s:
        h = bisect_left(ts, span.start + span.edge_s, a, b)
        if h > a:
            span.add_head(ts[h - 1], h - a, partial(run.readings, a, h))
    if h < b:
        # (a running sum: each column added in sample order from the span's, as Span.add does)
        sums = _accumulate(np.concatenate(((span.sums + [span.host_cpu],), run.cols[h:b])),
                           axis=0)[-1].tolist()
        cpu = sums.pop()
        span.add_plain(b - h, sums, cpu, at.waits[b] - at.waits[h], _tally(run.reasons[h:b]),
                       _tally(run.labels[h:b]), run.reading(b - 1))


def _tally(values: list) -> dict:
    """Each value's count, in the order first seen (one value throughout: the common case)."""
    first = values[0]
    if values.count(first) == len(values):
        return {first: len(values)}
    return Counter(values)


def features(det: PhaseDetector, run: Run, start: int
             ) -> tuple[list[list[float]], list[float]] | None:
    """``phases.features_of`` and the smoothing factor of ``PhaseDetector.push_values`` for
    samples ``start`` onwards of ``run`` (after the detector's last sample), or ``None`` where
    the device has no power limit or memory size (features missing)."""
    limit, total, extra = run.consts
    if not limit or not total:
        return None
    link = det.link_for(extra)
    last_t = det.last_sample()
    ts = run.ts[start:]
    rows = run.cols[start:]
    prev_ts = np.concatenate(((np.nan if last_t is None else last_t,), ts[:-1]))
    used = rows[:, 12]
    x = np.empty((len(ts), 8))  # phases.features_of but the host feature (none in a run)
    x[:, 0] = rows[:, 0] / 100.0  # duty (util present in a run)
    x[:, 1:5] = rows[:, 2:6] / 100.0  # sm, tensor, dram, fp32
    rx = np.where(rows[:, 10] == 0.0, 0.0, rows[:, 10])  # rx or 0.0
    tx = np.where(rows[:, 11] == 0.0, 0.0, rows[:, 11])
    pcie = np.where(tx > rx, tx, rx) / link
    x[:, 5] = np.where(pcie < 1.0, pcie, 1.0)
    power = rows[:, 7] / limit
    x[:, 6] = np.where(power < 1.0, power, 1.0)
    x[:, 7] = used / total
    xs = x.tolist()
    dt = np.where(ts > prev_ts, ts - prev_ts, SMOOTH_S)  # (nan > x is False: the first sample)
    span = SMOOTH_SAMPLES * dt
    span = np.where(span > SMOOTH_S, span, SMOOTH_S)
    return xs, (dt / (span + dt)).tolist()
