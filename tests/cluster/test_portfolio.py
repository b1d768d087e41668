"""Portfolio plan: a hand-computed profile, break-evens from core.pricing, demand readers."""

from __future__ import annotations

import pytest

from fleet_tui.core.cluster.portfolio import Prices, demand_from_rows, plan_portfolio, read_demand
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.monitor.recorder import RecordedRow
from fleet_tui.core.pricing import SpotAssumptions, spot_cost_multiplier

# 24 h: 2 devices all day, 4 more for 8 working hours; 1 device per instance.
DAY = [2.0] * 16 + [6.0] * 8
P = Prices(on_demand=10.0, reserved_1y=6.0, reserved_3y=4.0, spot=3.0, cloud="aws")


def test_reserve_the_base_run_the_peak_on_demand():
    doc = plan_portfolio(DAY, P, min_history_days=0)
    # instances 1-2 are needed 100% of hours, 3-6 a third: break-even for 3y is 4/10 = 40%
    assert doc["plan"] == {"reserved_term": "reserved-3y", "reserved_instances": 2,
                           "on_demand_instance_hours": 32.0, "spot_instance_hours": 0.0,
                           "no_commitment_reason": None}
    assert doc["usd_total"] == 2 * 24 * 4 + 32 * 10 == 512
    assert doc["all_on_demand_usd"] == 800 and doc["savings_pct"] == 36.0
    be = {c["term"]: c["break_even_utilization_pct"] for c in doc["commitments"]}
    assert be == {"reserved-1y": 60.0, "reserved-3y": 40.0}
    # the next and the previous reservation: instance 3 reserved costs 96, saves 8 h × 10
    sens = {c["reserved_instances"]: c["usd_vs_plan"] for c in doc["sensitivity"]}
    assert sens == {1: 24 * 10 - 24 * 4, 2: 0.0, 3: 24 * 4 - 8 * 10}
    assert doc["prices_estimated"] is False
    one_year = plan_portfolio(DAY, P, terms=["reserved-1y"], min_history_days=0)
    assert one_year["usd_total"] == 2 * 24 * 6 + 320


def test_spot_share_is_a_share_of_all_the_work():
    overhead = SpotAssumptions().overhead_fraction("aws")
    useful = 3.0 * spot_cost_multiplier(overhead)
    # 80 instance-hours needed; half of them (40) may run on spot: the 32 above the 2 reserved do
    doc = plan_portfolio(DAY, P, max_spot_share=0.5, min_history_days=0)
    assert doc["plan"]["spot_instance_hours"] == 32.0 and doc["spot"]["share_of"] == \
        "all instance-hours"
    assert doc["usd_total"] == pytest.approx(192 + 32 * useful, abs=0.01)
    # a quarter (20 h) of the work: 20 of the 32 flexible hours on spot, 12 on demand
    quarter = plan_portfolio(DAY, P, max_spot_share=0.25, min_history_days=0)
    assert quarter["plan"]["spot_instance_hours"] == 20.0
    assert quarter["plan"]["on_demand_instance_hours"] == 12.0
    assert doc["spot"]["expected_interruptions_per_month"] > 0
    assert 0 < doc["spot"]["p_interrupted_per_instance_day"] < 0.01


def test_whole_instances_and_bad_inputs():
    doc = plan_portfolio([3.0] * 10 + [0.0] * 14, Prices(on_demand=8.0, reserved_3y=2.0,
                                                         devices_per_instance=8),
                         min_history_days=0)
    assert doc["plan"]["reserved_instances"] == 1  # needed 10/24 > 2/8 of hours
    assert doc["commitments"][0]["device_utilization_pct"] == pytest.approx(100 * 30 / (8 * 24), abs=0.01)
    with pytest.raises(FieldError):
        plan_portfolio([], P)
    with pytest.raises(FieldError):
        plan_portfolio(DAY, P, max_spot_share=2)


def test_no_commitment_below_the_minimum_history():
    doc = plan_portfolio(DAY, P)  # one day of history, default minimum 7 days
    assert doc["plan"]["reserved_instances"] == 0 and doc["plan"]["reserved_term"] is None
    assert "only 24 h (1.0 days) of demand history" in doc["plan"]["no_commitment_reason"]
    assert doc["usd_total"] == doc["all_on_demand_usd"] == 800
    # what a reservation would do is still shown
    assert {c["term"]: c["cheapest_instances"] for c in doc["commitments"]} == {
        "reserved-1y": 2, "reserved-3y": 2}
    week = plan_portfolio(DAY * 7, P)
    assert week["plan"]["reserved_instances"] == 2 and week["plan"]["no_commitment_reason"] is None
    with pytest.raises(FieldError):
        plan_portfolio(DAY, P, min_history_days=-1)


def test_estimated_reserved_prices_are_flagged():
    est = Prices(on_demand=10.0, reserved_1y=7.0, reserved_3y=5.0, reserved_estimated=True)
    doc = plan_portfolio(DAY * 7, est)
    assert doc["prices_estimated"] is True and all(c["estimated"] for c in doc["commitments"])


def test_demand_files(tmp_path):
    (tmp_path / "d.csv").write_text("hour,devices\n0,2\n1,3\n")
    assert read_demand(tmp_path / "d.csv") == [2, 3]
    (tmp_path / "d.json").write_text('{"demand": [1, 2, 3]}')
    assert read_demand(tmp_path / "d.json") == [1, 2, 3]
    (tmp_path / "d.txt").write_text("4\n5\n")
    assert read_demand(tmp_path / "d.txt") == [4, 5]
    (tmp_path / "bad.csv").write_text("hour,devices\n0,2\n1,lots\n")
    with pytest.raises(UserError, match=r"bad.csv:3: 'lots' is not a device count"):
        read_demand(tmp_path / "bad.csv")


def test_demand_from_recorded_rows():
    rows = [RecordedRow(ts=t, device_key=k, weight=1, values=(("gpu_util_pct", u),))
            for t, k, u in [(0, "a", 50), (10, "b", 0), (3700, "a", 90), (3800, "b", 40)]]
    assert demand_from_rows(rows) == [1.0, 2.0]
