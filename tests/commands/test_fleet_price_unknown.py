"""``fleet`` on the bundled replay with no price (no --instance / --node-price): the idle devices'
cost is unknown, not $0 — the header says so and the JSON carries no idle dollars; with a price,
the idle dollars are there."""

from __future__ import annotations

import json

from fleet_tui.cli import main


def test_unpriced_fleet_says_the_price_is_unknown(capsys):
    assert main(["fleet", "--source", "fleet-replay:demo"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "price unknown" in header and "--instance" in header and "$0.00" not in header


def test_unpriced_fleet_json_has_no_idle_dollars(capsys):
    assert main(["fleet", "--source", "fleet-replay:demo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fleet"]["idle_devices"] > 0 and data["fleet"]["idle_usd_per_hour"] is None
    assert all(n["idle_usd_per_hour"] is None for n in data["nodes"])


def test_priced_fleet_json_has_idle_dollars(capsys):
    assert main(["fleet", "--source", "fleet-replay:demo", "--json", "--node-price", "8"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fleet"]["idle_usd_per_hour"] == data["fleet"]["idle_devices"] * 1.0
