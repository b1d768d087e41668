"""The Fleet pane's headline with no price known (no --instance): idle devices are counted, and
their cost is not claimed to be $0.00/h — it is unknown (``fleet-tui --source fleet-replay:demo``
showed "idle 204 ($0.00/h)")."""

from __future__ import annotations

from types import SimpleNamespace

from fleet_tui.ui.fleet import summary_markup


def _fleet(usd: float | None, idle_usd: float) -> SimpleNamespace:
    return SimpleNamespace(node_count=32, device_count=256, utilization_pct=11.0,
                           sm_active_pct=8.0, efficiency_pct=8.0, usd_per_hour=usd,
                           idle_devices=204, idle_usd_per_hour=idle_usd, waste_usd_per_hour=None,
                           stale_devices=0, aggregate=None, errors=())


def test_no_price_no_idle_dollars():
    text = summary_markup(_fleet(None, 0.0))
    assert "idle 204" in text and "$0.00" not in text
    assert "price unknown" in text and "--instance" in text


def test_a_priced_fleet_shows_its_idle_dollars():
    text = summary_markup(_fleet(1761.28, 1403.52))
    assert "idle 204" in text and "$1,403.52/h" in text
