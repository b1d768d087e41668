"""MonitorEngine: one-shot scheduling, history, analysis, alerts and cost per tick, controls."""

from __future__ import annotations

import asyncio

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.alerts import AlertRule
from fleet_tui.core.monitor.engine import MonitorEngine, Tick
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.trace import load_trace


class TraceSource(Source):
    """Plays the labelled H200 trace as fast as asked (test-only stand-in for replay)."""

    kind = "replay"

    def __init__(self, snaps):
        self.snaps = snaps
        self.i = 0
        self.opened = self.closed = 0
        self.calls: list[float] = []

    async def open(self):
        self.opened += 1

    async def sample(self):
        self.calls.append(asyncio.get_running_loop().time())
        s = self.snaps[self.i % len(self.snaps)]
        self.i += 1
        return s

    async def close(self):
        self.closed += 1


@pytest.fixture(scope="module")
def trace():
    return load_trace("demo")


def test_process_replays_the_trace_with_diagnoses_alerts_and_cost(trace):
    rules = [AlertRule(name="starved", severity="warning", duration_s=3, cooldown_s=1000,
                       diagnosis="input_starved")]
    eng = MonitorEngine(TraceSource(trace), interval_s=0.25, window_s=5, alert_rules=rules,
                        usd_per_hour=32.0)
    ticks = [eng.process(s) for s in trace]
    by_phase = {}
    for t in ticks:
        d = t.snapshot.devices[0]
        by_phase.setdefault(d.phase, []).append(t.primaries[d.key])
    assert by_phase["launch_bound"][-5:] == ["launch_bound"] * 5
    assert by_phase["host_to_device_pcie"][-5:] == ["host_transfer_bound"] * 5
    alerts = [a for t in ticks for a in t.new_alerts]
    assert [a.rule for a in alerts] == ["starved"]  # once, thanks to the cooldown
    cost = ticks[-1].cost
    span = trace[-1].timestamp - trace[0].timestamp
    assert cost.usd_so_far == pytest.approx(32.0 * span / 3600, rel=1e-6)
    assert 0 < cost.usd_idle < cost.usd_so_far and cost.usd_waiting > 0
    assert 0 < cost.efficiency < 1
    assert len(eng.history.samples(trace[0].devices[0].key)) == eng.history.maxlen or \
        len(eng.history.samples(trace[0].devices[0].key)) == len(trace)
    t = ticks[100]
    assert isinstance(t, Tick)
    with pytest.raises(AttributeError):
        t.seq = 5  # frozen
    with pytest.raises(TypeError):
        t.analyses["x"] = None  # read-only mapping
    assert t.to_dict()["analysis"][0]["primary"] == t.primaries[t.snapshot.devices[0].key]


async def test_run_publishes_to_callbacks_and_queues_and_closes_source(trace):
    src = TraceSource(trace[:50])
    eng = MonitorEngine(src, interval_s=0.25, alert_rules=[])
    got, q = [], asyncio.Queue()
    eng.subscribe(got.append)

    async def async_cb(tick):
        await asyncio.sleep(0)
    eng.subscribe(async_cb)
    unsub = eng.subscribe(q)
    await eng.run(count=3)
    assert [t.seq for t in got] == [1, 2, 3]
    assert q.qsize() == 3
    unsub()
    assert src.opened == 1 and src.closed == 1
    # polls are spaced by the interval (one-shot sleep after each finished poll)
    gaps = [b - a for a, b in zip(src.calls, src.calls[1:])]
    assert all(g >= 0.2 for g in gaps)


async def test_pause_resume_interval_and_stop(trace):
    src = TraceSource(trace)
    eng = MonitorEngine(src, interval_s=10.0, alert_rules=[])
    seen = asyncio.Queue()
    eng.subscribe(seen)
    task = asyncio.create_task(eng.run())
    await asyncio.wait_for(seen.get(), 2)
    eng.set_interval(0.25)  # wakes the 10 s sleep and re-plans
    await asyncio.wait_for(seen.get(), 2)
    eng.pause()
    assert eng.paused
    await asyncio.sleep(0.6)
    while not seen.empty():
        seen.get_nowait()
    n = src.i
    await asyncio.sleep(0.6)
    assert src.i == n  # nothing sampled while paused
    eng.resume()
    await asyncio.wait_for(seen.get(), 2)
    eng.set_focus("/x")
    t = await asyncio.wait_for(seen.get(), 2)
    assert t.focus == "/x"
    eng.stop()
    await asyncio.wait_for(task, 2)
    assert src.closed == 1
    with pytest.raises(UserError, match="0.25"):
        eng.set_interval(0.1)
    with pytest.raises(UserError):
        MonitorEngine(src, interval_s=0.05)


async def test_engine_with_sim_source_and_recorder(tmp_path):
    from fleet_tui.core.monitor.recorder import Recorder, read_rows
    from fleet_tui.core.monitor.sources import open_source

    rec = Recorder(tmp_path / "h.db")
    eng = MonitorEngine(open_source("sim:3", interval_s=0.25), interval_s=0.25, alert_rules=[],
                        recorder=rec, usd_per_hour=10.0)
    await eng.run(count=4)
    rec.close()
    rows, devices = read_rows(tmp_path / "h.db")
    assert len(rows) == 12 and len(devices) == 3
    assert eng.latest.cost.usd_so_far > 0


def test_simulated_behaviours_are_recognised():
    """The sim source (written separately) labels each device's behaviour; steady ticks of the
    clear-cut behaviours must get that diagnosis."""
    from collections import Counter

    from fleet_tui.core.monitor.sources.sim import SimSource

    src = SimSource(n=10, interval_s=1.0, start_time=0.0, phase_ticks=40)
    eng = MonitorEngine(src, interval_s=1.0, alert_rules=[], usd_per_hour=1.0)
    hits, totals, kinds = Counter(), Counter(), Counter()
    for tick in range(200):
        t = eng.process(src.snapshot_at(tick))
        if tick % 40 < 8:  # let the 5 s window settle into the new behaviour
            continue
        for d in t.snapshot.devices:
            an = t.analyses[d.key]
            totals[d.phase] += 1
            hits[d.phase] += an.primary == d.phase
            kinds[d.phase] += d.phase in an.kinds()
    for beh in ("idle", "healthy_compute", "memory_bandwidth_bound", "launch_bound",
                "host_transfer_bound", "compute_no_tensor_cores", "thermal_throttled",
                "input_starved", "memory_growth"):
        assert hits[beh] / totals[beh] >= 0.9, (beh, hits[beh], totals[beh])
    assert kinds["power_capped"] / totals["power_capped"] >= 0.9


def test_filling_until_readings_span_the_history_and_the_growth_lookback():
    from dataclasses import replace

    from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
    from fleet_tui.core.monitor.windowing import FleetWindowPolicy

    engine = MonitorEngine(TraceSource([]), interval_s=2.0, price=False, alert_rules=[],
                           policy=FleetWindowPolicy())
    assert engine.fill_s == 720.0  # the 600 s growth lookback behind the 120 s window
    dev = DeviceSnapshot(index=0, name="H200", uuid="U", node="n1", gpu_util_pct=50.0)
    seen = []
    for t in range(1000, 1000 + 740, 20):
        engine.process(Snapshot(timestamp=t, source="prometheus:test", source_kind="fleet",
                                devices=(replace(dev, timestamp=t),)))
        seen.append((t - 1000, engine.filling))
    assert all(f for dt, f in seen if dt < 720) and all(not f for dt, f in seen if dt >= 720)
    assert MonitorEngine(TraceSource([]), price=False, alert_rules=[]).filling  # no reading yet
