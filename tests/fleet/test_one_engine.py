"""One recording, every front end, the same diagnoses.

The DCGM replay (16 nodes × 2 GPUs replaying the labelled H200 trace's phases) is scraped by a real
Prometheus; ``fleet --json``, ``monitor --once --json``, the exporter's metrics and its alert
gauge, and the app's fleet-pane path (the engine with the policy the pane picks, then
``FleetViews``, as ``ui/fleet.py`` draws it) all run the one ``MonitorEngine`` and must agree on
every device's primary diagnosis (and on the phase the replay plays).
"""

from __future__ import annotations

import asyncio

import pytest

from fleet_tui.core.exporter import FleetExporter
from fleet_tui.core.fleet import FleetViews
from fleet_tui.core.monitor.alerts import AlertRule
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from fleet_tui.core.monitor.windowing import FleetWindowPolicy, policy_for
from tests.fleet.promserver import wait_until
from tests.fleet.test_cli_fleet import expected_kinds, run_json
from tests.fleet.test_exporter import scrape

pytestmark = pytest.mark.prometheus

IDLE_RULE = AlertRule(name="gpu-idle", severity="warning", duration_s=0.0, cooldown_s=3600.0,
                      diagnosis="idle")


def _by_device(pairs) -> dict[tuple[str, int], str]:
    return {(node, int(index)): kind for node, index, kind in pairs}


def test_one_recording_gives_the_same_diagnoses_everywhere(fleet16, capsys):
    fleet, prom = fleet16
    spec = f"prometheus:{prom.url}"
    want = expected_kinds(fleet)  # node -> the kind its replayed phase is

    # `fleet --json`
    data = run_json(capsys, ["fleet", "--source", spec, "--json", "--window", "6"])
    cli = _by_device((n["node"], d["index"], d["primary"])
                     for n in data["nodes"] for d in n["device_list"])
    assert len(cli) == 32
    assert cli == {(node, i): want[node] for node, i in cli}
    # devices the idle rule holds for: an idle diagnosis (primary or not) the rule is sure enough of
    idle = {(n["node"], d["index"]) for n in data["nodes"] for d in n["device_list"]
            if any(x["kind"] == "idle" and x["confidence"] >= IDLE_RULE.min_confidence
                   for x in d["diagnoses"])}
    assert idle >= {dev for dev, kind in cli.items() if kind == "idle"}

    # `monitor --once --json` (a fleet source: the fleet policy, the same roll-ups)
    data = run_json(capsys, ["monitor", "--once", "--json", "--window", "6", "--source", spec])
    monitor = _by_device((d["node"], d["index"], d["diagnosis"]["primary"])
                         for d in data["devices"])
    assert monitor == cli
    assert {n["node"]: n["worst_kind"] for n in data["fleet"]["nodes"]} == want

    # the app's fleet pane: MonitorLink's engine (policy_for the source's kind) -> FleetViews
    source = PrometheusSource(prom.url, env={})
    assert policy_for(source.kind) == FleetWindowPolicy()
    engine = MonitorEngine(source, policy=policy_for(source.kind), alert_rules=[IDLE_RULE],
                           price=False)
    views = FleetViews()
    ticks = []
    engine.subscribe(lambda tick: ticks.append((tick, views(tick))))
    asyncio.run(engine.run(count=1))
    (tick, view), = ticks
    pane = _by_device((d.node, d.index, d.primary) for d in view.offenders)
    assert pane == cli
    # alerts: the engine fired the idle rule for exactly the idle devices
    fired = {a.device_key for a in tick.new_alerts if a.rule == "gpu-idle"}
    assert fired == {d.key for d in view.offenders if (d.node, d.index) in idle}

    # `export`: the exporter subscribes to its engine; primaries and held alerts as metrics
    exporter = FleetExporter(PrometheusSource(prom.url, env={}), interval_s=0.5,
                             alert_rules=[IDLE_RULE], policy=FleetWindowPolicy(seconds=6))
    port = exporter.start("127.0.0.1", 0)
    try:
        wait_until(lambda: exporter.collector.refreshes >= 1, 20, what="a refresh")
        metrics = scrape(port)
    finally:
        exporter.stop()
    exported = _by_device((lab["node"], lab["gpu"], lab["kind"])
                          for lab, _ in metrics["fleet_tui_device_primary_diagnosis"])
    assert exported == cli
    held = {(lab["node"], int(lab["gpu"])) for lab, _ in metrics["fleet_tui_alert_active"]
            if lab["rule"] == "gpu-idle"}
    assert held == idle
