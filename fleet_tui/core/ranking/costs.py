"""An offer's costs, from :mod:`fleet_tui.core.pricing`'s formulas evaluated at a unit price.

Pricing is linear in the list price, so ranking evaluates each formula once per (pricing option,
cloud) or per device group at $1/h and multiplies: ``month = list price × instances ×
monthly_rate(pricing, cloud)`` is ``pricing.monthly_cost``, and ``cost per unit = month ×
unit_factor(...)`` is ``pricing.cost_per_million_tokens`` / ``training_run_cost`` of the
effective $/h. The current setup and every ranked offer go through the same two functions.
"""

from __future__ import annotations

from fleet_tui.core.pricing import Schedule, SpotAssumptions, monthly_cost, spot_overhead


class MonthlyRates:
    """USD per month for each list USD per hour, by (pricing option, cloud)."""

    def __init__(self, schedule: Schedule, spot: SpotAssumptions, *, stateless: bool):
        self.schedule = schedule
        self.spot = spot
        self.stateless = stateless
        self._rates: dict[tuple[str, str], float] = {}

    def __call__(self, pricing: str, cloud: str) -> float:
        rate = self._rates.get((pricing, cloud))
        if rate is None:
            overhead = spot_overhead(pricing, cloud, self.spot, stateless=self.stateless)
            rate = self._rates[(pricing, cloud)] = monthly_cost(
                1.0, pricing, self.schedule, spot_overhead=overhead)
        return rate


def unit_factor(unit_cost_per_usd_hour: float | None, hours_per_month: float) -> float | None:
    """Cost per unit of work per USD of the monthly bill (None when the speed is unknown)."""
    if unit_cost_per_usd_hour is None:
        return None
    return unit_cost_per_usd_hour / hours_per_month


def savings_against(current, cost_per_unit: float | None) -> tuple[float | None, float | None]:
    """(savings %, savings USD/month) of paying ``cost_per_unit`` instead of the ``current``
    setup's, for the current setup's monthly amount of work; (None, None) when either is unknown
    or the current setup does not fit."""
    if not (current.cost_per_unit and cost_per_unit is not None and current.fits):
        return None, None
    frac = 1.0 - cost_per_unit / current.cost_per_unit
    return 100.0 * frac, current.usd_per_month * frac


def speedup(current_tokens_per_s: float | None, tokens_per_s: float | None) -> float | None:
    """How many times faster than the current setup (None when either speed is unknown)."""
    if current_tokens_per_s and tokens_per_s:
        return tokens_per_s / current_tokens_per_s
    return None
