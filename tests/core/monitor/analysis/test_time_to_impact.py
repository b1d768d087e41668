"""Risks by time to impact, bottlenecks from the roofline, engine pools named: on the labelled
SYNTHETIC traces (scripts/synth_corpus.py states the physics they model) and the real ones."""

from __future__ import annotations

import dataclasses
from bisect import bisect_left

import pytest

from bench.bench_diagnosis_accuracy import live_ticks, score_oom
from fleet_tui.core.monitor.alerts import AlertEvaluator, load_alert_rules
from fleet_tui.core.monitor.analysis import analyze_device_window, analyze_trace
from fleet_tui.core.monitor.analysis.thresholds import PLATEAU_MIN_S
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, ProcessInfo
from fleet_tui.core.monitor.trace import load_trace
from tests.paths import TESTS

TRACES = TESTS / "fixtures" / "traces"
SYNTH = TRACES / "synthetic"


def _windows(name: str, label: str) -> list:
    """The 5 s windows that lie inside the label's stretch (1 s settle time at each end)."""
    snaps = load_trace(str(SYNTH / name))
    times = [s.timestamp for s in snaps if s.devices[0].phase == label]
    lo, hi = min(times) + 1.0, max(times) - 1.0
    return [a for a in analyze_trace(snaps, window_s=5.0, step_s=1.0)
            if a.start >= lo and a.end <= hi]


@pytest.mark.parametrize("path", ["demo", str(TRACES / "holdout" / "h200_take_c.jsonl")])
def test_every_tick_within_a_minute_of_full_memory_is_critical_on_the_real_traces(path):
    ticks, critical = score_oom(path)
    assert ticks and critical == ticks, (ticks, critical)


def test_a_13_gb_s_leak_is_critical_from_its_first_allocation_to_its_oom():
    ticks, critical = score_oom(str(SYNTH / "synthetic_leak_to_oom.jsonl"))
    # one allocation to 40 %: done again three times it fills the device, and at its rate it
    # does within the minute; then like rises at an even pace, a ramp: every tick is critical
    assert ticks >= 12 and critical == ticks, (ticks, critical)
    snaps = load_trace(str(SYNTH / "synthetic_leak_to_oom.jsonl"))
    near = []
    for s, tick in live_ticks(snaps):
        d = s.devices[0]
        used, total = d.mem_used_bytes, d.mem_total_bytes
        assert used is not None and total
        if d.phase == "leak_to_oom" and used > 0.85 * total:
            near.append(next(iter(tick.analyses.values())))
    assert near
    for a in near:  # above 85 %, seconds from the OOM: critical and the primary, whatever else
        top = a.diagnoses[0]
        assert top.kind == "memory_growth" and top.severity == "critical", a.kinds()
        assert top.headline.startswith("out of memory in ") and "GB/s" in top.headline


def test_a_leak_from_an_empty_device_is_critical_from_its_third_like_rise():
    path = str(SYNTH / "synthetic_leak_from_start.jsonl")
    ticks, critical = score_oom(path)
    # its first two rises (6.5 and 13 GB of 141) are what a job's start draws too; from the third
    # like rise at an even pace it is a loop allocating the same bytes: a ramp
    assert ticks >= 20 and ticks - critical <= 2, (ticks, critical)
    first = None
    for s, tick in live_ticks(load_trace(path)):
        if s.devices[0].phase != "leak_from_start":
            continue
        first = s.timestamp if first is None else first
        g = next(iter(tick.analyses.values())).get("memory_growth")
        if s.timestamp >= first + 1.0:
            assert g is not None and g.severity == "critical", s.timestamp


def test_a_load_that_would_fill_the_device_is_critical_while_it_fills_not_once_loaded():
    path = str(SYNTH / "synthetic_weights_load.jsonl")
    crit: dict[str, list[float]] = {"weights_load": [], "weights_loaded": []}
    last_rise, prev = 0.0, None
    for s, tick in live_ticks(load_trace(path)):
        d = s.devices[0]
        if prev is not None and d.mem_used_bytes is not None and d.mem_used_bytes > prev:
            last_rise = s.timestamp
        prev = d.mem_used_bytes
        g = next(iter(tick.analyses.values())).get("memory_growth")
        if d.phase in crit and g is not None and g.severity == "critical":
            crit[str(d.phase)].append(s.timestamp - last_rise)
    # 120 GB at 26 GB/s into 141 GB: it would be full in seconds if it went on
    assert len(crit["weights_load"]) >= 4
    # loaded and flat: dropped once the pause is a plateau (PLATEAU_MIN_S)
    assert all(quiet <= PLATEAU_MIN_S for quiet in crit["weights_loaded"]), crit
    windows = _windows("synthetic_weights_load.jsonl", "weights_loaded")
    assert windows and not any(a.get("memory_growth") for a in windows)


def _windows_near_full(path: str) -> tuple[int, int]:
    """(windows, windows with a critical memory risk) of ``fleet-tui analyze``'s 5 s windows
    whose last reading is, in hindsight, within a minute of full memory: it rose by >= 1 % of
    the device over the second before, and memory goes on rising (no release, no 10 s without a
    rise) to >= 95 % of the device within the next 60 s."""
    snaps = load_trace(path)
    mem = [(s.timestamp, s.devices[0].mem_used_bytes or 0, s.devices[0].mem_total_bytes or 0)
           for s in snaps]
    times = [t for t, _, _ in mem]
    n = hit = 0
    for a in analyze_trace(snaps, window_s=5.0, step_s=1.0):
        i = bisect_left(times, a.end - 1e-9) - 1  # the window is [start, end)
        t, used, total = mem[i]
        before = mem[bisect_left(times, t - 1.0)][1]
        if not total or used - before < 0.01 * total:
            continue
        ahead = [(tt, m) for tt, m, _ in mem[i:] if tt <= t + 60.0]
        reached = next((k for k, (_, m) in enumerate(ahead) if m >= 0.95 * total), None)
        if reached is None:
            continue
        rises = [t] + [tb for (_, ma), (tb, mb) in zip(ahead, ahead[1:reached + 1]) if mb > ma]
        pairs = zip(ahead[:reached], ahead[1:reached + 1])
        if (any(mb < ma - 0.01 * total for (_, ma), (_, mb) in pairs)
                or any(b - a_ > 10.0 for a_, b in zip(rises, rises[1:]))):
            continue
        n += 1
        hit += any(d.kind in ("memory_growth", "memory_capacity_pressure")
                   and d.severity == "critical" for d in a.diagnoses)
    return n, hit


def test_every_analyze_window_ending_within_a_minute_of_full_is_critical():
    for path in ("demo", str(TRACES / "holdout" / "h200_take_c.jsonl"),
                 str(SYNTH / "synthetic_leak_to_oom.jsonl")):
        n, hit = _windows_near_full(path)
        assert n and hit == n, (path, n, hit)
    # a leak from an empty device: the windows that end on its first two rises are not (a job's
    # start draws those too); from the third like rise on, all are
    n, hit = _windows_near_full(str(SYNTH / "synthetic_leak_from_start.jsonl"))
    assert n >= 8 and n - hit <= 2, (n, hit)


def test_a_job_start_is_critical_only_while_it_fills():
    # the demo's sizing runs allocate 1 % to 79 % of an H200 in under a second: full at that rate
    # within seconds, so critical while memory rises; the plateau that follows drops it
    prev, last_rise = None, 0.0
    for s, tick in live_ticks(load_trace("demo")):
        d = s.devices[0]
        if prev is not None and d.mem_used_bytes is not None and d.mem_used_bytes > prev + 2**20:
            last_rise = s.timestamp
        prev = d.mem_used_bytes
        g = next(iter(tick.analyses.values())).get("memory_growth")
        if g is not None and g.severity == "critical":
            assert s.timestamp - last_rise <= PLATEAU_MIN_S + 0.5, (s.timestamp, last_rise)


def test_small_batch_mat_vec_at_the_power_cap_is_memory_bound_and_power_capped():
    windows = _windows("synthetic_matvec_decode.jsonl", "matvec_decode")
    assert windows
    for a in windows:
        top = a.diagnoses[0]
        assert top.kind == "memory_bandwidth_bound", a.kinds()
        assert top.headline == "memory bandwidth bound, and power-capped"
        ev = top.evidence_dict
        assert ev["intensity_flop_per_byte"] < ev["ridge_flop_per_byte"]
        assert "power-capped" in top.explanation
        assert any("of peak HBM bandwidth" in line for line in top.evidence_text)


def test_a_plateau_is_not_growth():
    windows = _windows("synthetic_plateau.jsonl", "plateau")
    assert windows
    # once flat for longer than twice the rises' spacing, no window reports growth
    assert not any(a.get("memory_growth") for a in windows if a.start >= windows[0].start + 3)
    assert all(a.primary == "healthy_compute" for a in windows)


def test_a_serving_engine_s_pool_is_named_not_alarmed_on():
    for label in ("engine_pool_idle", "engine_pool_decode"):
        windows = _windows("synthetic_engine_pool.jsonl", label)
        assert windows
        for a in windows:
            assert a.get("engine_pool") is not None, a.kinds()
            assert a.get("memory_capacity_pressure") is None and a.get("memory_growth") is None
            assert "vLLM" in a.get("engine_pool").explanation


def _fired(path: str, rule_name: str) -> set[str]:
    """The labels during which the bundled rule fires, held for 8 s instead of its 5 minutes
    (the traces are short; the pool is named once flat for its 5 s of freshest readings)."""
    rules, problems = load_alert_rules(include_user=False)
    assert not problems
    rule = next(r for r in rules if r.name == rule_name)
    held_s = min(rule.duration_s, 8.0)
    evaluator = AlertEvaluator([dataclasses.replace(rule, duration_s=held_s)])
    labels = set()
    for s, tick in live_ticks(load_trace(path)):
        for _alert in evaluator.evaluate(s.timestamp, s.devices, tick.analyses):
            labels.add(s.devices[0].phase)
    return labels


def test_memory_high_does_not_fire_on_an_engine_pool_but_does_on_a_full_device():
    assert not _fired(str(SYNTH / "synthetic_engine_pool.jsonl"), "memory-high")
    assert "leak_under_compute" in _fired(str(SYNTH / "synthetic_leak_to_oom.jsonl"),
                                          "memory-high")


def test_out_of_memory_within_a_minute_is_told_within_seconds_and_not_on_job_starts():
    fired = _fired(str(SYNTH / "synthetic_leak_to_oom.jsonl"), "out-of-memory-soon")
    assert "leak_to_oom" in fired
    assert "leak_from_start" in _fired(str(SYNTH / "synthetic_leak_from_start.jsonl"),
                                       "out-of-memory-soon")
    # the demo's job starts are critical while they fill, for under the rule's 3 s hold
    assert not _fired("demo", "out-of-memory-soon") - {"memory_capacity_full"}


GB = 1e9
TOTAL = 150.75 * GB  # an H200


def _critical_oom_at(mem: list[tuple[float, float]], command: str = "python train.py",
                     rx_bytes_s: float | None = None) -> bool:
    """Whether the analysis of the last 5 s of readings ``mem`` (time, bytes; idle compute)
    carries a critical memory-growth risk, as the engine makes it (every reading a growth
    point)."""
    def dev(t: float, used: float) -> DeviceSnapshot:
        return DeviceSnapshot(index=0, name="NVIDIA H200", uuid="GPU-1", timestamp=t,
                              gpu_util_pct=0.0, sm_active_pct=0.0, mem_used_bytes=int(used),
                              mem_total_bytes=int(TOTAL), power_w=80.0, power_limit_w=700.0,
                              pcie_rx_bytes_s=rx_bytes_s,
                              processes=(ProcessInfo(pid=7, device_index=0, used_gpu_bytes=int(used),
                                                     command=command),))
    end = mem[-1][0]
    window = [dev(t, m) for t, m in mem if t > end - 5.0]
    a = analyze_device_window(window, growth_points=mem)
    g = a.get("memory_growth")
    return g is not None and g.severity == "critical"


def _trace(steps_gb: list[float], flat_s: float = 10.0, after_s: float = 0.0,
           every_s: float = 0.5) -> list[tuple[float, float]]:
    """Idle at 0.6 GB for ``flat_s``, then one rise of each of ``steps_gb`` per ``every_s``,
    then flat for ``after_s``."""
    t, used, out = 0.0, 0.6 * GB, []
    while t < flat_s:
        out.append((t, used))
        t += every_s
    for step in steps_gb:
        used += step * GB
        out.append((t, used))
        t += every_s
    for _k in range(int(after_s / every_s)):
        out.append((t, used))
        t += every_s
    return out


def test_a_fast_leak_is_critical_from_its_first_allocation():
    # one allocation of 60 GB, then +6.5 GB every 0.5 s: 13 GB/s, full in ~5 s
    leak = _trace([60.0] + [6.5] * 12)
    first = len(_trace([]))  # the index of the step
    for k in range(first + 1, len(leak) + 1):
        assert _critical_oom_at(leak[:k]), leak[k - 1]


def test_a_small_step_a_slow_load_and_a_plateau_are_not_an_oom_alarm():
    cases = {
        "a 1.5 GB allocation": (_trace([1.5], after_s=10.0), None),
        # like rises, but host-to-device traffic at the memory's rate: a copy, not a loop
        "16 GB of weights at 5.2 GB/s from empty": (_trace([2.6] * 6, after_s=10.0), 5.2 * GB),
        "bursts under a quarter of the device": (_trace([15.0, 1.0, 1.7, 4.0, 4.2, 0.5],
                                                        after_s=2.0, every_s=0.2), None),
    }
    for name, (mem, rx) in cases.items():
        for k in range(3, len(mem) + 1):
            assert not _critical_oom_at(mem[:k], rx_bytes_s=rx), (name, mem[k - 1])
    # the same like rises with no host-to-device traffic: a loop allocating on the device, full
    # within the minute at its 5.2 GB/s
    assert _critical_oom_at(_trace([2.6] * 4))
    # a step to 40 % is critical on its step (a leak's first allocation looks the same), and
    # not once flat for PLATEAU_MIN_S
    step = _trace([60.0], after_s=10.0)
    at = len(_trace([]))
    assert _critical_oom_at(step[:at + 1])
    assert not any(_critical_oom_at(step[:k]) for k in range(at + 5, len(step) + 1))


def test_a_ramp_that_stopped_is_not_critical():
    # the ramp to 75 % stops: once its next rise is overdue it is no ramp, and then a plateau
    mem = _trace([60.0] + [6.5] * 8, after_s=6.0)
    stop = len(_trace([])) + 9  # the index after the last rise
    assert _critical_oom_at(mem[:stop])
    assert not any(_critical_oom_at(mem[:k]) for k in range(stop + 4, len(mem) + 1))


def _critical_ticks(path: str) -> list[tuple[float, str]]:
    """(time, label) of the live ticks that carry a critical memory-growth risk."""
    out = []
    for s, tick in live_ticks(load_trace(path)):
        g = next(iter(tick.analyses.values())).get("memory_growth")
        if g is not None and g.severity == "critical":
            out.append((s.timestamp, str(s.devices[0].phase)))
    return out


def test_an_engine_pool_s_step_to_90_percent_is_never_an_oom_alarm_nor_a_plateau():
    # vLLM's weights and its one allocation to 0.90 of the device: on no tick, not even the step
    assert _critical_ticks(str(SYNTH / "synthetic_engine_pool.jsonl")) == []
    # an allocator's warm-up (8 rises of 4 GB, full at that rate within seconds) may be; once
    # flat for PLATEAU_MIN_S, never
    snaps = load_trace(str(SYNTH / "synthetic_plateau.jsonl"))
    flat_from = min(s.timestamp for s in snaps if s.devices[0].phase == "plateau")
    late = [t for t, _ in _critical_ticks(str(SYNTH / "synthetic_plateau.jsonl"))
            if t > flat_from + PLATEAU_MIN_S]
    assert late == []
