"""Pricing math: schedules, spot interruption overhead, reserved break-even, unit costs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_tui.core.errors import UserError
from fleet_tui.core.pricing import (
    HOURS_PER_MONTH,
    PRICING_OPTIONS,
    Schedule,
    SpotAssumptions,
    break_even_hours_per_month,
    break_even_utilization,
    cost_per_million_tokens,
    effective_usd_per_hour,
    monthly_cost,
    quote,
    spot_cost_multiplier,
    spot_overhead_fraction,
    training_run_cost,
    usd_per_gpu_hour,
)


@dataclass(frozen=True)
class _Box:
    """Minimal stand-in with the catalog Instance's pricing surface."""

    cloud: str = "aws"
    instance_type: str = "box.8x"
    region: str = "us-east-1"
    accelerator_count: float = 8.0
    on_demand: float | None = 10.0
    spot_price: float | None = 4.0
    r1y: float | None = 6.5
    r3y: float | None = 4.5
    reserved_estimated: bool = True

    def price(self, pricing: str) -> float | None:
        return {"on-demand": self.on_demand, "spot": self.spot_price,
                "reserved-1y": self.r1y, "reserved-3y": self.r3y}[pricing]


# ---------------------------------------------------------------- schedules

def test_dev_box_schedule_is_hours_times_days():
    s = Schedule.daily(8, 22)
    assert s.hours_per_month == 176
    assert "8" in s.label and "22" in s.label


def test_parse_accepts_hours_days_and_always_on():
    assert Schedule.parse("8x22").hours_per_month == 176
    assert Schedule.parse("10×20").hours_per_month == 200
    assert Schedule.parse("300").hours_per_month == 300
    assert Schedule.parse("always-on").hours_per_month == HOURS_PER_MONTH
    assert Schedule.always_on().utilization == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [745, 1000, -1, 0, float("nan"), float("inf")])
def test_bad_hours_per_month_are_user_errors(bad):
    with pytest.raises(UserError, match="hours per month"):
        Schedule(bad)


@pytest.mark.parametrize("h,d,msg", [(25, 20, "hours per day"), (8, 32, "days per month"),
                                     (-8, 22, "hours per day"), (8, 0, "days per month")])
def test_bad_daily_schedules_name_the_part(h, d, msg):
    with pytest.raises(UserError, match=msg):
        Schedule.daily(h, d)


def test_unparseable_schedule_says_what_is_allowed():
    with pytest.raises(UserError, match="8x22"):
        Schedule.parse("weekdays")


# ---------------------------------------------------------------- on-demand and reserved

def test_on_demand_bills_used_hours():
    assert monthly_cost(2.0, "on-demand", Schedule.daily(8, 22)) == pytest.approx(2.0 * 176)


def test_reserved_bills_every_hour_of_the_month():
    dev = Schedule.daily(8, 22)
    assert monthly_cost(6.0, "reserved-1y", dev) == pytest.approx(6.0 * HOURS_PER_MONTH)
    assert monthly_cost(6.0, "reserved-1y", Schedule.always_on()) == pytest.approx(6.0 * 730)
    # per used hour, the reservation is spread over few hours on a dev box
    assert effective_usd_per_hour(6.0, "reserved-1y", dev) == pytest.approx(6.0 * 730 / 176)


def test_break_even_utilization_separates_reserved_and_on_demand():
    od, r = 10.0, 6.0
    u = break_even_utilization(r, od)
    assert u == pytest.approx(0.6)
    assert break_even_hours_per_month(r, od) == pytest.approx(0.6 * 730)
    below = Schedule(u * HOURS_PER_MONTH * 0.9)
    above = Schedule(min(u * HOURS_PER_MONTH * 1.1, 744))
    assert monthly_cost(od, "on-demand", below) < monthly_cost(r, "reserved-1y", below)
    assert monthly_cost(od, "on-demand", above) > monthly_cost(r, "reserved-1y", above)


# ---------------------------------------------------------------- spot

def test_spot_overhead_formula():
    # 0.1 interruptions/h, checkpoint every 2 h (lose 1 h on average), 0.5 h restart
    f = spot_overhead_fraction(0.1, 2.0, 0.5)
    assert f == pytest.approx(0.1 * (1.0 + 0.5))
    assert spot_cost_multiplier(f) == pytest.approx(1 / (1 - 0.15))
    s = Schedule(100)
    assert monthly_cost(3.0, "spot", s, spot_overhead=f) == pytest.approx(3.0 * 100 / 0.85)


def test_stateless_serving_loses_only_restart_time():
    a = SpotAssumptions(interruptions_per_hour=0.01, checkpoint_interval_h=4, restart_h=0.25)
    assert a.overhead_fraction("aws", stateless=True) == pytest.approx(0.0025)
    assert a.overhead_fraction("aws") == pytest.approx(0.01 * 2.25)


def test_default_rates_depend_on_cloud_and_are_positive():
    a = SpotAssumptions()
    assert a.rate_for("gcp") > a.rate_for("aws") > 0  # 15%/day vs 20%/month
    assert a.rate_for("some-new-cloud") > 0


def test_overhead_of_one_or_more_is_refused():
    with pytest.raises(UserError, match="never finish"):
        spot_cost_multiplier(1.0)


def test_more_frequent_checkpoints_cut_the_overhead():
    rare = spot_overhead_fraction(0.05, 4, 0.25)
    often = spot_overhead_fraction(0.05, 0.5, 0.25)
    assert often < rare


# ---------------------------------------------------------------- unit costs

def test_cost_per_million_tokens():
    # $3.6/h at 1000 tok/s = 3.6M tokens/h -> $1 per 1M tokens
    assert cost_per_million_tokens(3.6, 1000) == pytest.approx(1.0)


def test_training_run_cost_and_gpu_hour():
    assert training_run_cost(10.0, 7200) == pytest.approx(20.0)
    assert usd_per_gpu_hour(16.0, 8) == pytest.approx(2.0)


@pytest.mark.parametrize("call", [
    lambda: cost_per_million_tokens(1.0, 0),
    lambda: cost_per_million_tokens(-1.0, 10),
    lambda: usd_per_gpu_hour(1.0, 0),
    lambda: training_run_cost(1.0, -5),
    lambda: monthly_cost(float("nan"), "on-demand", Schedule(10)),
    lambda: monthly_cost(1.0, "lease", Schedule(10)),
])
def test_bad_values_are_user_errors(call):
    with pytest.raises(UserError):
        call()


# ---------------------------------------------------------------- quotes

def test_quote_for_every_option():
    box = _Box()
    s = Schedule.always_on()
    q = {p: quote(box, p, s) for p in PRICING_OPTIONS}
    assert q["on-demand"].usd_per_month == pytest.approx(10.0 * 730)
    assert q["on-demand"].usd_per_gpu_hour == pytest.approx(10.0 / 8)
    assert q["spot"].spot_overhead > 0
    assert q["spot"].usd_per_hour > 4.0
    assert q["reserved-1y"].break_even_utilization == pytest.approx(0.65)
    assert q["reserved-1y"].estimated and not q["on-demand"].estimated


def test_quote_unit_costs_use_the_effective_price():
    q = quote(_Box(), "reserved-1y", Schedule(365))  # half the month: reservation costs double
    assert q.usd_per_hour == pytest.approx(13.0)
    assert q.cost_per_million_tokens(1000) == pytest.approx(13.0 / 3.6)
    assert q.run_cost(1800) == pytest.approx(6.5)
    # unknown speed (Throughput.tokens_per_s / RunEstimate.seconds None): unknown cost, not 0
    assert q.cost_per_million_tokens(None) is None and q.run_cost(None) is None


def test_quote_is_none_when_not_offered():
    assert quote(_Box(spot_price=None), "spot") is None


# ---------------------------------------------------------------- properties

prices = st.floats(min_value=0, max_value=1e4, allow_nan=False, allow_infinity=False)
hours = st.floats(min_value=0.01, max_value=744, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(price=prices, h=hours, pricing=st.sampled_from(PRICING_OPTIONS),
       rate=st.floats(min_value=0, max_value=0.3), ckpt=st.floats(min_value=0, max_value=4),
       restart=st.floats(min_value=0, max_value=0.5))
def test_costs_are_never_negative(price, h, pricing, rate, ckpt, restart):
    f = spot_overhead_fraction(rate, ckpt, restart)
    s = Schedule(h)
    m = monthly_cost(price, pricing, s, spot_overhead=f)
    e = effective_usd_per_hour(price, pricing, s, spot_overhead=f)
    assert m >= 0 and e >= 0 and math.isfinite(m)
    assert e >= price * (0.98 if pricing.startswith("reserved") else 1.0) or price == 0


@settings(max_examples=100, deadline=None)
@given(price=st.floats(min_value=0.01, max_value=1e3), tps=st.floats(min_value=1e-3, max_value=1e7))
def test_cost_per_token_is_positive_and_falls_with_speed(price, tps):
    a = cost_per_million_tokens(price, tps)
    b = cost_per_million_tokens(price, tps * 2)
    assert a > 0 and b == pytest.approx(a / 2)


def test_spot_overhead_is_zero_unless_spot():
    from fleet_tui.core.pricing import PRICING_CHOICES, PRICING_OPTIONS, spot_overhead

    spot = SpotAssumptions(interruptions_per_hour=0.01, checkpoint_interval_h=2.0, restart_h=0.5)
    assert [spot_overhead(p, "aws", spot) for p in PRICING_OPTIONS if p != "spot"] == [0.0, 0.0, 0.0]
    assert spot_overhead("spot", "aws", spot) == pytest.approx(0.01 * (1.0 + 0.5))
    assert spot_overhead("spot", "aws", spot, stateless=True) == pytest.approx(0.01 * 0.5)
    assert PRICING_CHOICES == PRICING_OPTIONS + ("any",)
