"""The headless commands on a real Prometheus fleet: ``fleet`` and ``monitor --once --json``."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from tests.fleet.test_fleet_view import PHASE_KIND

pytestmark = pytest.mark.prometheus


def run_json(capsys, argv):
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def expected_kinds(fleet):
    return {name: PHASE_KIND[fleet.nodes[i].gpus[0][0].phase]
            for name, i in fleet.node_names().items()}


def test_fleet_json_matches_the_replayed_phases(fleet16, capsys):
    fleet, prom = fleet16
    data = run_json(capsys, ["fleet", "--source", f"prometheus:{prom.url}", "--json",
                             "--window", "6", "--node-price", "40"])
    want = expected_kinds(fleet)
    assert data["fleet"]["nodes"] == 16 and data["fleet"]["devices"] == 32
    assert data["fleet"]["usd_per_hour"] == pytest.approx(16 * 40)
    got = {n["node"]: {d["primary"] for d in n["device_list"]} for n in data["nodes"]}
    assert got == {node: {kind} for node, kind in want.items()}
    idle_nodes = [n for n in want if want[n] == "idle"]
    assert data["fleet"]["idle_devices"] == 2 * len(idle_nodes)
    assert data["fleet"]["idle_usd_per_hour"] == pytest.approx(len(idle_nodes) * 40)
    # worst offenders first: every idle or stalled GPU (all of its price wasted) before any busy one
    by_key = {d["key"]: d for n in data["nodes"] for d in n["device_list"]}
    waste = [by_key[k]["waste_usd_per_hour"] for k in data["offenders"]]
    assert waste == sorted(waste, reverse=True)


def test_fleet_node_drill_down_and_unknown_node(fleet16, capsys):
    fleet, prom = fleet16
    name = next(iter(fleet.node_names()))
    node = run_json(capsys, ["fleet", "--source", f"prometheus:{prom.url}", "--json",
                             "--window", "0", "--node", name])
    assert node["node"] == name and len(node["device_list"]) == 2
    assert main(["fleet", "--source", f"prometheus:{prom.url}", "--window", "0",
                 "--node", "node-999"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_monitor_once_json_through_prometheus(fleet16, capsys):
    fleet, prom = fleet16
    data = run_json(capsys, ["monitor", "--once", "--source", f"prometheus:{prom.url}", "--json"])
    assert data["source_kind"] == "fleet" and len(data["devices"]) == 32
    names = fleet.node_names()
    assert {d["node"] for d in data["devices"]} == set(names)
    for d in data["devices"]:
        assert d["state"] == "ok" and d["age_s"] is not None and d["diagnosis"] is not None
    # the same per-node roll-ups as `fleet --json`, worst first
    roll = data["fleet"]
    assert roll["fleet"]["nodes"] == 16 and roll["fleet"]["devices"] == 32
    assert {n["node"] for n in roll["nodes"]} == set(names)


def test_monitor_once_text_names_each_node(fleet16, capsys):
    fleet, prom = fleet16
    assert main(["monitor", "--once", "--source", f"prometheus:{prom.url}"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[0] == "node"
    for name in fleet.node_names():
        assert name in out
