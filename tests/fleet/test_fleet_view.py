"""Fleet roll-ups: synthetic fleets for the arithmetic, then the real Prometheus fleet for diagnoses."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from fleet_tui.core.fleet import FleetView, FleetViews, fleet_json
from fleet_tui.core.monitor.analysis import analyze_device_window
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from fleet_tui.core.monitor.windowing import FleetWindowPolicy
from tests.fleet.dcgm_replay import load_frames, phase_runs

GIB = 1024**3

# What the labelled phases of the H200 trace are (the trace's ground truth), as diagnosis kinds.
PHASE_KIND = {
    "idle": "idle", "idle_cooldown": "idle", "compute_bound": "healthy_compute",
    "hbm_bandwidth_bound": "memory_bandwidth_bound", "input_starved": "input_starved",
    "launch_bound": "launch_bound", "host_to_device_pcie": "host_transfer_bound",
    "memory_capacity_full": "memory_capacity_pressure",
}


def dev(node, index, util, sm=None, state="ok", mem=10, power=300.0):
    return DeviceSnapshot(index=index, name="NVIDIA H100", uuid=f"GPU-{node}-{index}", node=node,
                          gpu_util_pct=util, sm_active_pct=sm, mem_used_bytes=mem * GIB,
                          mem_total_bytes=80 * GIB, power_w=power, state=state,
                          age_s=120.0 if state != "ok" else 1.0)


def diag(kind, severity="info", confidence=0.9):
    return [{"kind": kind, "severity": severity, "confidence": confidence, "evidence": {},
             "action": "do something"}]


def make_view(prices=None):
    snap = Snapshot(timestamp=1000.0, source="test", source_kind="fleet", devices=(
        dev("busy", 0, 100, sm=95), dev("busy", 1, 100, sm=90),
        dev("lazy", 0, 0, sm=0), dev("lazy", 1, 40, sm=20),
        dev("dead", 0, 50, sm=50, state="unavailable"), dev("dead", 1, 100, sm=97),
    ), errors=("dead: exporter 10.0.0.3:9400 is down (up == 0)",))
    diagnoses = {
        "busy/GPU-busy-0": diag("healthy_compute", "ok"),
        "busy/GPU-busy-1": diag("healthy_compute", "ok"),
        "lazy/GPU-lazy-0": diag("idle"),
        "lazy/GPU-lazy-1": diag("input_starved", "warning"),
        "dead/GPU-dead-1": diag("healthy_compute", "ok"),
    }
    return FleetView.from_snapshot(snap, diagnoses, prices)


def test_rollups_per_node_and_fleet():
    view = make_view({"*": 8.0})  # $8/h per 2-GPU node = $4/h per GPU
    assert (view.node_count, view.device_count) == (3, 6)
    lazy = view.node("lazy")
    assert lazy.mean_gpu_util_pct == pytest.approx(20.0)
    assert lazy.idle_devices == 1 and lazy.idle_usd_per_hour == pytest.approx(4.0)
    assert lazy.mem_used_bytes == 20 * GIB and lazy.mem_total_bytes == 160 * GIB
    assert lazy.worst.primary == "idle"
    dead = view.node("dead")
    assert dead.stale_devices == 1 and dead.errors and dead.worst.primary == "stale"
    assert dead.mean_gpu_util_pct == pytest.approx(100.0)  # stale readings are not averaged in
    assert view.usd_per_hour == pytest.approx(24.0)
    assert view.idle_usd_per_hour == pytest.approx(4.0) and view.idle_devices == 1
    assert view.utilization_pct == pytest.approx((100 + 100 + 0 + 40 + 100) / 5)
    # waste = price x (1 - efficiency): 0.2 + 0.4 + 4 + 3.2 + 4 (stale: all) + 0.12
    assert view.waste_usd_per_hour == pytest.approx(0.2 + 0.4 + 4.0 + 3.2 + 4.0 + 0.12)


def test_worst_offenders_first():
    view = make_view({"*": 8.0})
    order = [d.key for d in view.offenders]
    assert order[0] == "dead/GPU-dead-0"  # alarms (stale) first
    assert order[1] == "lazy/GPU-lazy-0"  # then the most money wasted (idle: all of it)
    assert order[2] == "lazy/GPU-lazy-1"
    assert order[-1] == "dead/GPU-dead-1"  # 97% SM active wastes least
    assert [n.node for n in view.nodes] == ["dead", "lazy", "busy"]
    # unpriced: same order by wasted share
    assert [d.key for d in make_view().offenders][:3] == order[:3]


def test_drill_down_and_json():
    view = make_view(8.0)
    with pytest.raises(KeyError, match="did you mean lazy"):
        view.node("lazzy")
    data = json.loads(json.dumps(fleet_json(
        Snapshot(timestamp=1.0, source="s", source_kind="fleet", devices=(dev("a", 0, 0),)))))
    assert data["kind"] == "fleet" and data["fleet"]["devices"] == 1
    assert data["nodes"][0]["device_list"][0]["idle"] is True  # no diagnosis: util 0 => idle
    assert data["fleet"]["usd_per_hour"] is None
    full = view.to_dict()
    assert full["offenders"][0] == "dead/GPU-dead-0"
    assert full["nodes"][1]["node"] == "lazy" and full["nodes"][1]["idle_devices"] == 1
    assert full["nodes"][1]["device_list"][1]["diagnoses"][0]["kind"] == "input_starved"


class _NoSource(Source):
    kind = "fleet"

    async def sample(self):  # the tests hand snapshots to process()
        raise AssertionError("not sampled")


def fleet_engine(**policy) -> MonitorEngine:
    """The engine as ``fleet``/``export``/the fleet pane run it, fed by hand."""
    return MonitorEngine(_NoSource(), alert_rules=[], price=False,
                         policy=FleetWindowPolicy(**policy))


def test_fleet_policy_skips_repeated_scrapes_and_forgets_gone_devices():
    engine = fleet_engine(forget_after_s=60)
    d = dev("n", 0, 50, sm=50)
    for t in (10.0, 10.0, 12.0):
        engine.process(Snapshot(timestamp=t, source="s", source_kind="fleet",
                                devices=(replace(d, timestamp=t),)))
    assert len(engine.windows.window(d.key)) == 2
    engine.process(Snapshot(timestamp=100.0, source="s", source_kind="fleet", devices=()))
    assert engine.windows.window(d.key) == ()


def test_fleet_policy_reanalyzes_on_a_staggered_cadence_and_at_once_on_alarms(monkeypatch):
    import fleet_tui.core.monitor.windowing as windowing

    calls = []
    real = windowing.analyze_device_window
    monkeypatch.setattr(windowing, "analyze_device_window",
                        lambda w, **kw: calls.append(w[-1].timestamp) or real(w, **kw))
    engine = fleet_engine(max_samples=4, stagger_s=6.0)
    views = FleetViews()
    d = dev("n", 0, 50, sm=50)
    for t in range(100, 130):
        views(engine.process(Snapshot(timestamp=t, source="s", source_kind="fleet",
                                      devices=(replace(d, timestamp=float(t)),))))
    filling = 4  # every reading while the window fills
    assert filling + 30 / 6 - 1 <= len(calls) <= filling + 30 / 6 + 1
    before = len(calls)
    view = views(engine.process(Snapshot(timestamp=130.0, source="s", source_kind="fleet", devices=(
        replace(d, timestamp=130.0, xid_errors=(79,)),))))
    assert len(calls) == before + 1 and view.offenders[0].primary == "xid"


def test_fleet_views_carry_the_same_diagnoses_as_a_fresh_conversion():
    """FleetViews reuses converted diagnoses while a device's analysis is unchanged; the view must
    equal one built from the analyses themselves, refresh after refresh."""
    engine = fleet_engine(max_samples=3, stagger_s=4.0)
    views = FleetViews({"*": 10.0})
    devices = [dev("a", 0, 0, sm=0), dev("a", 1, 95, sm=20), dev("b", 0, 97, sm=90)]
    for t in range(100, 112):
        snap = Snapshot(timestamp=float(t), source="s", source_kind="fleet",
                        devices=tuple(replace(d, timestamp=float(t) - (t % 3) * (d.index == 1),
                                              gpu_util_pct=d.gpu_util_pct + (t % 2))
                                      for d in devices))
        tick = engine.process(snap)
        view = views(tick)
        fresh = FleetView.from_snapshot(snap, tick.analyses, {"*": 10.0})
        assert view.to_dict() == fresh.to_dict()
        assert [d.diagnoses for d in view.offenders] == [d.diagnoses for d in fresh.offenders]


@pytest.mark.prometheus
def test_fleet_diagnoses_through_prometheus_match_single_box(fleet16):
    fleet, prom = fleet16
    src = PrometheusSource(prom.url, env={})
    engine = fleet_engine()
    views = FleetViews({"*": 32.0})
    view = None
    for _ in range(7):  # ~7 distinct scrapes per device
        view = views(engine.process(src.sample_blocking()))
        time.sleep(1.0)
    runs = phase_runs(load_frames())
    names = fleet.node_names()
    assert view.device_count == 32 and view.stale_devices == 0 and not view.errors
    for node in view.nodes:
        spec = fleet.nodes[names[node.node]]
        phase = spec.gpus[0][0].phase
        single_box = analyze_device_window(runs[phase][:25:5]).primary
        for d in node.devices:
            assert d.primary == PHASE_KIND[phase] == single_box, (node.node, d.index, phase)
            assert d.idle == (phase in ("idle", "idle_cooldown"))
    idle_nodes = sum(1 for n in view.nodes if n.worst_kind == "idle")
    assert view.idle_devices == 2 * idle_nodes == 8  # 4 nodes replay idle phases, 2 GPUs each
    assert view.idle_usd_per_hour == pytest.approx(8 * 16.0)
    wastes = [d.waste_usd_per_hour for d in view.offenders]
    # all of a GPU wasted (the recorded idle phase has SM activity of a few 1e-7, a few 1e-5 $/h)
    assert wastes[0] == pytest.approx(16.0, abs=0.01) == max(wastes)
    assert view.nodes[-1].worst_kind in ("healthy_compute", "memory_bandwidth_bound")
