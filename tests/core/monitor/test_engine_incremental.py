"""The engine's incremental bookkeeping gives what recomputing from scratch gives.

The engine keeps a sliding window per device (signals read once per sample, integer tallies updated
as samples enter and leave), builds display text (diagnosis evidence and explanation, tick findings)
only when read, and indexes alert rules by diagnosis. These tests hold each shortcut to the plain
computation it replaces.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random

import pytest

from fleet_tui.core.monitor.alerts import AlertEvaluator, AlertRule
from fleet_tui.core.monitor.analysis import (
    GROWTH_LOOKBACK_S,
    DeviceAnalysis,
    Diagnosis,
    HostLoad,
    SlidingWindow,
    analyze_device_window,
    analyze_trace,
)
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.history import History
from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.monitor.sources.sim import SimSource
from fleet_tui.core.monitor.trace import load_trace
from fleet_tui.core.monitor.windowing import WindowPolicy, hold_s, no_news

WINDOW_S = 5.0


@pytest.fixture(scope="module")
def trace():
    return load_trace("demo")


def _without_growth(a: DeviceAnalysis) -> tuple:
    """Everything the window decides (the growth rule reads the engine's longer memory log)."""
    return (a.device_key, a.start, a.end, a.samples, a.missing_signals, a.phase,
            tuple(d for d in a.diagnoses if d.kind != "memory_growth"))


def _held(eng: MonitorEngine, key: str) -> bool:
    """The device's window may show its last analysis: settling after a change point, or its
    detector weighing a change it has not confirmed (within the engine's hold)."""
    win = eng.windows._windows[key]
    return win.settling or win.pending(hold_s(eng.history.interval_s))


def _replay_and_compare(snaps, *, interval=0.25, changes=None, every=0.0, **kw) -> int:
    """``every``: the policy's ``analyze_every_s`` (0: every tick is analysed, as compared
    here; with a cadence, a reused analysis is compared with the window of the tick that made it).
    A tick whose window is settling (a change point just confirmed, no sample past its straddle
    yet) or whose detector weighs a change it has not confirmed may show the device's last
    analysis, the very same object."""
    policy = WindowPolicy(seconds=WINDOW_S, analyze_every_s=every,
                          growth_lookback_s=kw.pop("growth_lookback_s", GROWTH_LOOKBACK_S * 5))
    eng = MonitorEngine(None, interval_s=interval, min_interval_s=0.1, usd_per_hour=10.0,
                        policy=policy, **kw)
    compared = 0
    made: dict[str, tuple[float, tuple]] = {}  # key -> (timestamp analysed, expected then)
    shown: dict[str, object] = {}  # key -> the analysis of the last tick
    origin: dict[str, object] = {}  # key -> the reading of the tick that first showed it
    for i, snap in enumerate(snaps):
        if changes and i in changes:
            eng.set_interval(changes[i])
        tick = eng.process(snap)
        for d in snap.devices:
            last, shown[d.key] = shown.get(d.key), tick.analyses[d.key]
            was = origin.get(d.key)
            if tick.analyses[d.key] is not last:
                origin[d.key] = d
            win = eng.windows._windows[d.key]
            # a settling window holds its last analysis unless there is news (memory moving on
            # a device over half full is time to impact: never held)
            if win.settling and last is not None and (tick.analyses[d.key] is last
                                                      or no_news(d, was)):
                assert tick.analyses[d.key] is last, (i, d.key)
                compared += 1
                continue
            if tick.analyses[d.key] is last and _held(eng, d.key):
                compared += 1  # held: a change the detector has not confirmed yet
                continue
            if every and made.get(d.key, (None,))[0] is not None:
                at, then = made[d.key]
                if tick.analyses[d.key].end == then[2] and 0 <= d.timestamp - at < every:
                    assert _without_growth(tick.analyses[d.key]) == then, (i, d.key)
                    compared += 1
                    continue
            # the window: history's last window_s seconds, cut at the current phase's start
            start = tick.analyses[d.key].start
            window = list(eng.history.samples(d.key, eng.window_s))
            while window and window[0].timestamp < start:
                window.pop(0)
            expected = analyze_device_window(window, growth_points=[],
                                             host=HostLoad.of(snap.host))
            assert _without_growth(tick.analyses[d.key]) == _without_growth(expected), (i, d.key)
            made[d.key] = (d.timestamp, _without_growth(expected))
            compared += 1
    return compared


def test_engine_windows_equal_analysing_history_from_scratch(trace):
    assert _replay_and_compare(trace) == len(trace)


def test_engine_reanalyses_at_most_every_second_and_at_once_on_a_change(trace):
    """The default cadence (``analyze_every_s`` 1 s): a tick within a second of the last analysis
    reuses it unchanged; every other tick equals the analysis from scratch. An XID, an ECC error,
    a new throttle reason or a new phase is analysed on the tick it shows."""
    assert _replay_and_compare(trace, every=1.0) == len(trace)
    eng = MonitorEngine(None, interval_s=0.25, min_interval_s=0.1, usd_per_hour=10.0,
                        policy=WindowPolicy(seconds=WINDOW_S))
    snaps = trace[:12]
    ends = [eng.process(s).analyses[s.devices[0].key].end for s in snaps]
    assert len(set(ends)) == 3  # 12 ticks of 0.25 s: analysed at 0, 1 and 2 s
    d = snaps[-1].devices[0]
    alarm = dataclasses.replace(d, timestamp=d.timestamp + 0.25, xid_errors=(79,))
    tick = eng.process(dataclasses.replace(snaps[-1], timestamp=alarm.timestamp,
                                           devices=(alarm,)))
    assert tick.analyses[d.key].end == alarm.timestamp
    assert "xid" in {x.kind for x in tick.analyses[d.key].diagnoses}


def _analysed_per_tick(n: int, interval: float, ticks: int, jitter: float = 0.0):
    """(devices analysed on each tick after the first, ticks between two analyses of a device,
    devices analysed or held on each tick): a tick that showed the last analysis while a change
    was in progress (``_held``) does not count in a gap."""
    src = SimSource(n, start_time=1000.0, interval_s=interval, phase_ticks=10_000)
    eng = MonitorEngine(None, interval_s=interval, min_interval_s=0.1, usd_per_hour=10.0)
    counts, last, gaps, shown, covered = [], {}, set(), {}, []
    for t in range(ticks):
        snap = src.snapshot_at(t)
        if jitter:  # a real clock: ticks land a little early or late
            ts = snap.timestamp + (jitter if t % 2 else -jitter)
            snap = dataclasses.replace(snap, timestamp=ts, devices=tuple(
                dataclasses.replace(d, timestamp=ts) for d in snap.devices))
        tick = eng.process(snap)
        fresh = [k for k, a in tick.analyses.items() if a.end == snap.timestamp]
        held = [k for k, a in tick.analyses.items()
                if k not in fresh and a is shown.get(k) and _held(eng, k)]
        shown = dict(tick.analyses)
        for k in held:
            if k in last:
                last[k] += 1  # held by a change in progress, not skipped by the budget
        for k in fresh:
            if k in last:
                gaps.add(t - last[k])
            last[k] = t
        if t:
            counts.append(len(fresh))
            covered.append(len(fresh) + len(held))
    return counts, gaps, covered


def test_analyses_per_second_are_capped_and_spread_over_the_ticks():
    """A box of 64 devices at 1 s: each device is re-analysed at least every 4 s (16 analyses a
    second, ``WindowPolicy.analyses_per_s``), about 16 on every tick rather than 64 every fourth
    (a device whose phase changes is analysed at once, so a few more). 8 devices stay at every
    tick; at 0.25 s each is analysed at least once a second, about two on each tick."""
    counts, gaps, _ = _analysed_per_tick(64, 1.0, 40)
    assert max(gaps) == 4 and 16 <= sum(counts) / len(counts) <= 18 and max(counts) <= 22
    _, gaps, covered = _analysed_per_tick(8, 1.0, 10)
    assert set(covered) == {8} and gaps == {1}
    counts, gaps, _ = _analysed_per_tick(8, 0.25, 40)
    # (a held tick is one analysis fewer: 1.97 a tick here)
    assert max(gaps) == 4 and 1.8 <= sum(counts) / len(counts) <= 2.5 and max(counts) <= 4


def test_a_jittery_clock_does_not_skip_an_analysis():
    """Ticks 0.998 s and 1.002 s apart at a 1 s interval: every tick is still analysed (the
    period counts as run out within half an interval)."""
    _, gaps, covered = _analysed_per_tick(4, 1.0, 12, jitter=0.002)
    assert set(covered) == {4} and gaps == {1}


def test_engine_windows_do_not_straddle_two_labelled_behaviours(trace):
    """The window restarts at a change point: after the detection delay, a window holds one
    behaviour (the labelled phases of the H200 trace; sizing phases are mixed by design)."""
    eng = MonitorEngine(None, interval_s=0.25, min_interval_s=0.1, usd_per_hour=10.0)
    straddled = 0
    for snap in trace:
        tick = eng.process(snap)
        d = snap.devices[0]
        if d.phase.startswith("sizing"):
            break
        start, end = tick.analyses[d.key].start, tick.analyses[d.key].end
        labels = [s.phase for s in eng.history.samples(d.key, eng.window_s)
                  if start <= s.timestamp <= end]
        minority = min(labels.count(x) for x in set(labels))
        if len(set(labels)) > 1 and minority >= 4 and minority >= 0.3 * len(labels):
            straddled += 1
    assert straddled == 0


def test_windows_stay_exact_when_time_goes_back_or_history_shrinks(trace):
    looped = trace[:300] + trace[:300]  # a replay that starts over: timestamps jump back
    swapped = list(trace[:120])
    for i in range(0, 120, 9):  # out-of-order samples inside the window
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    assert _replay_and_compare(looped) == 600
    assert _replay_and_compare(swapped) == 120
    # history (6 s at 1 s) holds fewer samples than 5 s of this 5 Hz trace: windows are cut to it
    assert _replay_and_compare(trace[:200], interval=1.0, history_s=1.0, growth_lookback_s=1.0)
    assert _replay_and_compare(trace[:300], changes={60: 1.0, 150: 5.0, 220: 0.25}, history_s=3.0)


def test_sliding_window_refuses_time_going_back_and_rebuilds():
    def dev(t: float, util: float) -> DeviceSnapshot:
        return DeviceSnapshot(index=0, name="x", uuid="u", timestamp=t, gpu_util_pct=util)

    win = SlidingWindow(5.0)
    for t in range(10):  # 0-18 %: no change point, so the window is the last 5 s
        assert win.push(dev(float(t), 2.0 * t), limit=100)
    assert [s.timestamp for s in win.samples()] == [5.0, 6.0, 7.0, 8.0, 9.0]
    assert not win.push(dev(3.0, 0.0), limit=100)  # unchanged; the caller rebuilds from history
    assert len(win) == 5
    h = History(seconds=60, interval_s=1.0)
    snaps = [dev(float(t), 2.0 * t) for t in range(10)] + [dev(3.0, 0.0)]
    for s in snaps:
        from fleet_tui.core.monitor.snapshot import Snapshot

        h.add(Snapshot(timestamp=s.timestamp, source="t", source_kind="simulated", devices=(s,)))
    win.reset(h.samples("/u", 5.0))
    assert win.analyze() == analyze_device_window(h.samples("/u", 5.0))
    assert win.push(dev(4.0, 0.0), limit=100) is False  # still out of order inside: rebuild again


def test_lazy_diagnoses_read_compare_copy_and_pickle_like_eager_ones(trace):
    windows = analyze_trace(trace, window_s=WINDOW_S)
    diags = [d for a in windows for d in a.diagnoses]
    assert len({d.kind for d in diags}) >= 6
    for d in diags:
        # a signal read on its own before anything else equals the one in the full evidence
        lazy_value = d.evidence_value("sm_active_pct", "absent")
        eager = Diagnosis(kind=d.kind, confidence=d.confidence, evidence=d.evidence,
                          explanation=d.explanation, action=d.action, severity=d.severity,
                          role=d.role)
        assert d == eager and hash(d) == hash(eager) and repr(d) == repr(eager)
        assert lazy_value == d.evidence_dict.get("sm_active_pct", "absent")
        assert d.explanation and d.evidence and d.to_dict()["explanation"] == d.explanation
    sample = diags[:: max(1, len(diags) // 25)]
    signals = {k for d in diags for k, _ in d.evidence} | {
        "gpu_util_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct", "processes",
        "pcie_link_frac", "power_cap_share", "mem_used_frac", "slope_bytes_s"}
    fresh = [d for a in analyze_trace(trace, window_s=WINDOW_S) for d in a.diagnoses]
    for d in fresh:  # never read before: single signals first, then the whole evidence
        one_by_one = {k: d.evidence_value(k, "absent") for k in signals}
        assert one_by_one == {k: d.evidence_dict.get(k, "absent") for k in signals}
    fresh = [d for a in analyze_trace(trace, window_s=WINDOW_S) for d in a.diagnoses]
    for d in fresh[:: max(1, len(fresh) // 25)]:  # never read before being copied
        text = dataclasses.asdict(d)
        assert text["explanation"] and text["evidence"]
    for d in sample:
        assert pickle.loads(pickle.dumps(d)) == d
        assert copy.deepcopy(d) == d and copy.copy(d) == d
        assert dataclasses.replace(d, confidence=0.5).explanation == d.explanation
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.kind = "idle"  # type: ignore[misc]


def test_tick_findings_are_each_device_s_primary_then_its_other_non_ok_diagnoses():
    """Each device's findings start with its primary (the row's line, even when "ok"), then its
    other non-"ok" diagnoses in the analysis's order; devices whose primary is worst first."""
    src = SimSource(n=6, interval_s=1.0, start_time=1_700_000_000.0)
    eng = MonitorEngine(None, interval_s=1.0, usd_per_hour=10.0)
    rank = {"critical": 0, "warning": 1, "info": 2, "ok": 3}
    for k in range(120):
        tick = eng.process(src.snapshot_at(k))
        order = sorted(enumerate(tick.analyses.items()),
                       key=lambda ia: (rank[ia[1][1].diagnoses[0].severity], ia[0]))
        expected = [(key, d) for _, (key, a) in order for i, d in enumerate(a.diagnoses)
                    if i == 0 or d.severity != "ok"]
        got = tick.diagnoses
        assert [f.primary for f in got] == [
            i == 0 for _, (key, a) in order for i, d in enumerate(a.diagnoses)
            if i == 0 or d.severity != "ok"]
        assert [(f.device_key, f.diagnosis) for f in got] == expected
        for f in got:
            assert f.evidence[0] == f.diagnosis.explanation and f.actions == (f.diagnosis.action,)
            assert f.device.startswith("GPU ")
        assert copy.copy(tick).diagnoses == got


def test_alert_rules_indexed_by_diagnosis_fire_exactly_like_rule_by_rule():
    kinds = ["idle", "input_starved", "thermal_throttled", "healthy_compute", "memory_growth"]
    rules = [AlertRule(name=f"d{i}", severity="warning", duration_s=dur, cooldown_s=cool,
                       diagnosis=kind, min_confidence=conf)
             for i, (kind, dur, cool, conf) in enumerate(
                 [("idle", 2.0, 5.0, 0.5), ("input_starved", 0.0, 0.0, 0.3),
                  ("thermal_throttled", 1.0, 3.0, 0.8), ("idle", 0.0, 4.0, 0.9),
                  ("memory_growth", 3.0, 0.0, 0.5)])]
    rules.insert(2, AlertRule(name="hot", severity="info", duration_s=1.0, cooldown_s=2.0,
                              metric="temp_c", op=">", threshold=80.0))
    rules.append(AlertRule(name="cost", severity="info", duration_s=0.0, cooldown_s=3.0,
                           metric="cost_usd_so_far", op=">", threshold=1.0))
    indexed, by_rule = AlertEvaluator(rules), AlertEvaluator(rules)
    rnd = random.Random(3)
    fired = 0
    for step in range(400):
        now = step * 0.5
        devices = [DeviceSnapshot(index=i, name="g", uuid=f"u{rnd.choice([i, i, 0])}",
                                  temp_c=rnd.choice([40.0, 90.0])) for i in range(rnd.randrange(4))]
        analyses = {}
        for d in devices:
            diags = tuple(Diagnosis(kind=k, confidence=rnd.choice([0.2, 0.6, 0.95]), evidence=(),
                                    explanation=f"{k} now", action="", severity="info")
                          for k in rnd.sample(kinds, rnd.randrange(3)))
            analyses[d.key] = DeviceAnalysis(d.key, d.index, 0.0, now, 1, diags)
        machine = {"cost_usd_so_far": rnd.choice([0.5, 2.0])}
        a = indexed.evaluate(now, devices, analyses, machine)
        b = by_rule._evaluate_by_rule(now, devices, analyses, machine)
        assert a == b, step
        fired += len(a)
    assert fired > 50


def _job(t: float, busy: bool, procs: bool) -> DeviceSnapshot:
    """One reading of an H200 that is idle, or runs dense bf16 GEMMs (what the lent H200 read)."""
    from fleet_tui.core.monitor.snapshot import ProcessInfo

    level = dict(gpu_util_pct=99.0, sm_active_pct=96.0, tensor_active_pct=93.0,
                 dram_active_pct=17.0, fp32_active_pct=1.0, power_w=690.0) if busy else dict(
        gpu_util_pct=0.0, sm_active_pct=0.0, tensor_active_pct=0.0, dram_active_pct=0.0,
        fp32_active_pct=0.0, power_w=80.0)
    return DeviceSnapshot(index=0, name="NVIDIA H200", uuid="GPU-job", timestamp=t,
                          mem_used_bytes=(12 if procs else 1) * 2**30, mem_total_bytes=141 * 2**30,
                          power_limit_w=700.0, sm_clock_mhz=1500.0, sm_clock_max_mhz=1980.0,
                          clock_event_reasons=0, gpm_supported=True,
                          processes=(ProcessInfo(pid=7, device_index=0, used_gpu_bytes=11 * 2**30),)
                          if procs else (), **level)


@pytest.mark.parametrize("interval", [0.25, 0.5, 1.0])
def test_a_job_starting_and_ending_shows_no_third_diagnosis(interval):
    """Idle, then a compute job, then idle: while the change points are found and their first
    samples straddle the change, the monitor shows the behaviour before or the one after, never
    a third (the window of 7 idle samples and a busy one read input_starved on the H200, and the
    first samples after a job ended read it again)."""
    from fleet_tui.core.monitor.snapshot import Snapshot

    eng = MonitorEngine(None, interval_s=interval, min_interval_s=0.1, usd_per_hour=10.0)
    shown = []
    steps = int(36 / interval)
    for i in range(steps):
        t = 1000.0 + i * interval
        busy = 12.0 <= t - 1000.0 < 24.0
        d = _job(t, busy, busy)
        tick = eng.process(Snapshot(timestamp=t, source="t", source_kind="live", devices=(d,)))
        shown.append((t - 1000.0, tick.analyses[d.key].primary))
    kinds = {k for _, k in shown}
    assert kinds <= {"idle", "healthy_compute"}, [x for x in shown if x[1] not in
                                                   ("idle", "healthy_compute")]
    # and each behaviour shows within a few seconds of its start
    assert all(k == "healthy_compute" for t, k in shown if 16.0 <= t < 24.0)
    assert all(k == "idle" for t, k in shown if t >= 28.0)


def test_the_first_sample_of_work_after_idle_ones_is_a_job_starting_not_starvation():
    """GPM's interval can catch a job's first kernels before NVML's utilization does (take b:
    util 0 %, SM 19.7 %, then 100 %). One sample of work after idle ones says a job starts; the
    monitor keeps idle until the change is confirmed, then shows the job."""
    from fleet_tui.core.monitor.snapshot import Snapshot

    eng = MonitorEngine(None, interval_s=0.5, min_interval_s=0.1, usd_per_hour=10.0)
    shown = []
    for i in range(48):
        t = 1000.0 + i * 0.5
        d = _job(t, i > 24, i >= 24)
        if i == 24:
            d = dataclasses.replace(d, sm_active_pct=19.7, tensor_active_pct=15.0)
        tick = eng.process(Snapshot(timestamp=t, source="t", source_kind="live", devices=(d,)))
        shown.append((i, tick.analyses[d.key].primary))
    assert {k for _, k in shown} == {"idle", "healthy_compute"}, shown[22:32]
    assert all(k == "healthy_compute" for i, k in shown if i >= 32)
