"""What an instance costs: usage schedules, on-demand, spot and reserved prices, unit costs.

Every cost here is derived from a catalog list price in USD per hour. The rules:

* **On-demand** bills the hours you use: ``usd_per_month = list × hours_per_month``.
* **Spot** bills the hours you use at the spot price, but interruptions throw work away. The
  expected share of wall time lost is the *interruption overhead*

      overhead = interruptions_per_hour × (checkpoint_interval_h / 2 + restart_h)

  (an interruption lands on average half-way between two checkpoints, and then the job waits for a
  new instance and reloads: ``restart_h``). Only ``1 - overhead`` of every paid hour does useful
  work, so the cost of one useful hour is ``spot / (1 - overhead)``. A stateless server has no
  checkpoint to lose (``checkpoint_interval_h = 0``): it only loses the restart time. An overhead of
  1 or more means the job never finishes; that is refused as a user error.
* **Reserved** (1-year or 3-year) bills every hour of the term whether used or not:
  ``usd_per_month = reserved × 730``. Per *used* hour that is ``reserved × 730 / hours_per_month``,
  so a reservation beats on-demand only when utilisation is above the **break-even utilisation**
  ``reserved / on_demand`` (e.g. a 40% discount breaks even at 60% of the month, about 438 h).

A month is 730 hours (8760 / 12), the convention AWS, GCP and Azure use on their price pages; a
schedule may ask for up to 744 hours (a 31-day month). Costs are never negative: a negative or
non-finite price or count is refused.

Default spot interruption rates (override per call with :class:`SpotAssumptions`):

* AWS: the EC2 Spot Instance Advisor puts instance types in buckets of "frequency of interruption"
  over the trailing month (<5%, 5-10%, 10-15%, 15-20%, >20%;
  https://aws.amazon.com/ec2/spot/instance-advisor/, also mirrored as ``pct_interrupt`` by
  ec2instances.info). Large GPU families usually sit in the top bucket; we take its edge, 20% of
  instances interrupted per month.
* Azure: the portal shows Spot eviction rates in the same five buckets per size and region
  (https://learn.microsoft.com/azure/virtual-machines/spot-vms, "eviction rate"); same 20%/month.
* GCP: "Compute Engine has historically had an average preemption rate between 5% and 15% per day
  per project, on a seven-day average" (preemptible VM documentation,
  https://cloud.google.com/compute/docs/instances/preemptible); we take the upper end, 15%/day.
* Others (Nebius, OCI, RunPod, Vast, ...) publish no rate; we assume GCP's 15%/day, the more
  pessimistic of the published figures.

A probability ``p`` of at least one interruption per period ``T`` is turned into a Poisson rate
``-ln(1 - p) / T`` per hour.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record

PricingOption = Literal["on-demand", "spot", "reserved-1y", "reserved-3y"]
PRICING_OPTIONS: tuple[str, ...] = ("on-demand", "spot", "reserved-1y", "reserved-3y")
RESERVED_OPTIONS: frozenset[str] = frozenset({"reserved-1y", "reserved-3y"})
PRICING_CHOICES: tuple[str, ...] = PRICING_OPTIONS + ("any",)  # "any": rank every option

HOURS_PER_MONTH = 730.0  # 8760 h / 12: the cloud price pages' month
MAX_HOURS_PER_MONTH = 744.0  # 31 days × 24 h
TOKENS_PER_MILLION = 1_000_000.0


def _rate_from_probability(p: float, period_h: float) -> float:
    """Poisson rate per hour for a probability ``p`` of >= 1 event within ``period_h`` hours."""
    return -math.log(1.0 - p) / period_h


# Interruptions per hour, by cloud id (see the module docstring for the sources).
SPOT_INTERRUPTIONS_PER_HOUR: dict[str, float] = {
    "aws": _rate_from_probability(0.20, HOURS_PER_MONTH),
    "azure": _rate_from_probability(0.20, HOURS_PER_MONTH),
    "gcp": _rate_from_probability(0.15, 24.0),
}
DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR = _rate_from_probability(0.15, 24.0)
SPOT_RATE_SOURCES: dict[str, str] = {
    "aws": "AWS Spot Instance Advisor, top bucket edge: 20% interrupted per month",
    "azure": "Azure Spot eviction-rate buckets, top bucket edge: 20% per month",
    "gcp": "GCP preemptible docs: 5-15% preempted per day; 15% taken",
}
DEFAULT_SPOT_RATE_SOURCE = "no published rate; GCP's 15% per day assumed"

# A training job checkpoints every hour by default; getting a new instance, pulling the image and
# loading the checkpoint or the weights takes about a quarter of an hour.
DEFAULT_CHECKPOINT_INTERVAL_H = 1.0
DEFAULT_RESTART_H = 0.25


def _check_number(value: float, what: str, *, allow_zero: bool = True) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise UserError(f"{what} must be a finite number {bound}, got {value!r}")
    return x


# --------------------------------------------------------------------------------------------
# Schedules


@record
class Schedule:
    """How many hours a month the instance runs (and is billed, except for reservations)."""

    hours_per_month: float
    label: str = ""

    def __post_init__(self) -> None:
        h = _check_number(self.hours_per_month, "hours per month", allow_zero=False)
        if h > MAX_HOURS_PER_MONTH:
            raise UserError(
                f"hours per month must be at most {MAX_HOURS_PER_MONTH:g} (24 h × 31 days), got {h:g}"
            )
        object.__setattr__(self, "hours_per_month", h)
        if not self.label:
            object.__setattr__(self, "label", f"{h:g} h/month")

    @classmethod
    def always_on(cls) -> "Schedule":
        return cls(HOURS_PER_MONTH, "always on (730 h/month)")

    @classmethod
    def daily(cls, hours_per_day: float, days_per_month: float) -> "Schedule":
        """E.g. ``Schedule.daily(8, 22)`` for a dev box used 8 hours on 22 working days."""
        h = _check_number(hours_per_day, "hours per day", allow_zero=False)
        d = _check_number(days_per_month, "days per month", allow_zero=False)
        if h > 24:
            raise UserError(f"hours per day must be at most 24, got {h:g}")
        if d > 31:
            raise UserError(f"days per month must be at most 31, got {d:g}")
        return cls(h * d, f"{h:g} h/day × {d:g} days = {h * d:g} h/month")

    @classmethod
    def parse(cls, text: str) -> "Schedule":
        """``"730"``, ``"8x22"`` (hours/day × days/month) or ``"always-on"``."""
        s = str(text).strip().lower()
        if s in ("always-on", "always", "24x7", "on"):
            return cls.always_on()
        m = re.fullmatch(r"([0-9.]+)\s*[x×*]\s*([0-9.]+)", s)
        if m:
            return cls.daily(float(m.group(1)), float(m.group(2)))
        try:
            return cls(float(s))
        except ValueError:
            raise UserError(
                f"schedule {text!r} is not understood: give hours per month (e.g. 730), "
                "hours/day x days/month (e.g. 8x22) or always-on"
            ) from None

    @property
    def utilization(self) -> float:
        """Share of a 730-hour month the instance runs (may slightly exceed 1 for 744 h)."""
        return self.hours_per_month / HOURS_PER_MONTH


# --------------------------------------------------------------------------------------------
# Spot


@record
class SpotAssumptions:
    """Interruption model for spot capacity; ``None`` rate means the cloud's default."""

    interruptions_per_hour: float | None = None
    checkpoint_interval_h: float = DEFAULT_CHECKPOINT_INTERVAL_H
    restart_h: float = DEFAULT_RESTART_H

    def __post_init__(self) -> None:
        if self.interruptions_per_hour is not None:
            _check_number(self.interruptions_per_hour, "spot interruptions per hour")
        _check_number(self.checkpoint_interval_h, "checkpoint interval (hours)")
        _check_number(self.restart_h, "restart time (hours)")

    def rate_for(self, cloud: str) -> float:
        if self.interruptions_per_hour is not None:
            return self.interruptions_per_hour
        return SPOT_INTERRUPTIONS_PER_HOUR.get(cloud.lower(), DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR)

    def overhead_fraction(self, cloud: str, *, stateless: bool = False) -> float:
        """Expected share of paid spot time that does no useful work (see module docstring)."""
        checkpoint = 0.0 if stateless else self.checkpoint_interval_h
        return spot_overhead_fraction(self.rate_for(cloud), checkpoint, self.restart_h)


def spot_overhead_fraction(
    interruptions_per_hour: float, checkpoint_interval_h: float, restart_h: float
) -> float:
    rate = _check_number(interruptions_per_hour, "spot interruptions per hour")
    ckpt = _check_number(checkpoint_interval_h, "checkpoint interval (hours)")
    restart = _check_number(restart_h, "restart time (hours)")
    return rate * (ckpt / 2.0 + restart)


def spot_cost_multiplier(overhead_fraction: float) -> float:
    """Paid hours per useful hour on spot: ``1 / (1 - overhead)``."""
    f = _check_number(overhead_fraction, "spot overhead fraction")
    if f >= 1.0:
        raise UserError(
            f"spot interruption overhead is {f:.0%} of the time: the job would never finish; "
            "checkpoint more often or use on-demand"
        )
    return 1.0 / (1.0 - f)


def spot_overhead(
    pricing: str, cloud: str, spot: SpotAssumptions | None = None, *, stateless: bool = False
) -> float:
    """The interruption overhead an offer of ``pricing`` on ``cloud`` carries: 0 unless spot."""
    if pricing != "spot":
        return 0.0
    return (spot or SpotAssumptions()).overhead_fraction(cloud, stateless=stateless)


def spot_rate_source(cloud: str) -> str:
    return SPOT_RATE_SOURCES.get(cloud.lower(), DEFAULT_SPOT_RATE_SOURCE)


# --------------------------------------------------------------------------------------------
# Costs


def check_pricing(pricing: str, *, allow_any: bool = False) -> str:
    allowed = PRICING_CHOICES if allow_any else PRICING_OPTIONS
    if pricing not in allowed:
        raise UserError(f"pricing {pricing!r} is not known; allowed: {', '.join(allowed)}")
    return pricing


def cost_multiplier(
    pricing: str,
    schedule: Schedule,
    *,
    spot_overhead: float = 0.0,
) -> float:
    """Factor from list $/h to the effective cost of one *used* (useful) hour under ``schedule``.

    on-demand: 1; spot: ``1 / (1 - overhead)``; reserved: ``730 / hours_per_month`` (every hour of
    the term is billed).
    """
    check_pricing(pricing)
    if pricing == "spot":
        return spot_cost_multiplier(spot_overhead)
    if pricing in RESERVED_OPTIONS:
        return HOURS_PER_MONTH / schedule.hours_per_month
    return 1.0


def monthly_cost(
    usd_per_hour: float, pricing: str, schedule: Schedule, *, spot_overhead: float = 0.0
) -> float:
    """USD per month of running ``schedule`` at list price ``usd_per_hour`` under ``pricing``."""
    price = _check_number(usd_per_hour, "price (USD per hour)")
    return price * schedule.hours_per_month * cost_multiplier(
        pricing, schedule, spot_overhead=spot_overhead
    )


def effective_usd_per_hour(
    usd_per_hour: float, pricing: str, schedule: Schedule, *, spot_overhead: float = 0.0
) -> float:
    """What one used, useful hour really costs (reservations spread over the hours used)."""
    price = _check_number(usd_per_hour, "price (USD per hour)")
    return price * cost_multiplier(pricing, schedule, spot_overhead=spot_overhead)


def break_even_utilization(reserved_usd_per_hour: float, on_demand_usd_per_hour: float) -> float:
    """Share of the month above which the reservation is cheaper than on-demand."""
    r = _check_number(reserved_usd_per_hour, "reserved price (USD per hour)")
    od = _check_number(on_demand_usd_per_hour, "on-demand price (USD per hour)", allow_zero=False)
    return r / od


def break_even_hours_per_month(reserved_usd_per_hour: float, on_demand_usd_per_hour: float) -> float:
    return break_even_utilization(reserved_usd_per_hour, on_demand_usd_per_hour) * HOURS_PER_MONTH


def usd_per_gpu_hour(usd_per_hour: float, accelerator_count: float) -> float:
    price = _check_number(usd_per_hour, "price (USD per hour)")
    count = _check_number(accelerator_count, "accelerator count", allow_zero=False)
    return price / count


def cost_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """USD per 1M tokens at ``tokens_per_s`` sustained, paying ``usd_per_hour``."""
    price = _check_number(usd_per_hour, "price (USD per hour)")
    tps = _check_number(tokens_per_s, "throughput (tokens/s)", allow_zero=False)
    return price / (tps * 3600.0) * TOKENS_PER_MILLION


def training_run_cost(usd_per_hour: float, seconds: float) -> float:
    """USD for a run of ``seconds`` of wall time (whole instance) at ``usd_per_hour``."""
    price = _check_number(usd_per_hour, "price (USD per hour)")
    secs = _check_number(seconds, "run time (seconds)")
    return price * secs / 3600.0


# --------------------------------------------------------------------------------------------
# A priced instance


@record
class Quote:
    """One instance under one pricing option and schedule."""

    instance_type: str
    cloud: str
    region: str
    pricing: str
    list_usd_per_hour: float  # the catalog price
    usd_per_hour: float  # effective cost of one used, useful hour
    usd_per_month: float
    usd_per_gpu_hour: float  # effective, per device
    spot_overhead: float  # 0 unless spot
    estimated: bool  # reserved price derived from a discount, not a published price
    break_even_utilization: float | None  # reserved only: share of the month where it pays off
    schedule: Schedule

    def cost_per_million_tokens(self, tokens_per_s: float | None) -> float | None:
        """USD per 1M tokens served at ``tokens_per_s`` (e.g. ``Throughput.tokens_per_s``);
        None when the speed is unknown (``tokens_per_s`` None: a spec figure is not published)."""
        if tokens_per_s is None:
            return None
        return cost_per_million_tokens(self.usd_per_hour, tokens_per_s)

    def run_cost(self, seconds: float | None) -> float | None:
        """USD for a run of ``seconds`` (e.g. ``RunEstimate.seconds`` from ``perf.training_run``);
        None when the run time is unknown."""
        if seconds is None:
            return None
        return training_run_cost(self.usd_per_hour, seconds)


def quote(
    instance,
    pricing: str,
    schedule: Schedule | None = None,
    *,
    spot: SpotAssumptions | None = None,
    stateless: bool = False,
) -> Quote | None:
    """Price ``instance`` (a catalog ``Instance``) or ``None`` if it is not offered that way."""
    check_pricing(pricing)
    schedule = schedule or Schedule.always_on()
    price = instance.price(pricing)
    if price is None:
        return None
    overhead = spot_overhead(pricing, instance.cloud, spot, stateless=stateless)
    eff = effective_usd_per_hour(price, pricing, schedule, spot_overhead=overhead)
    break_even = None
    if pricing in RESERVED_OPTIONS:
        od = instance.price("on-demand")
        if od:
            break_even = break_even_utilization(price, od)
    count = instance.accelerator_count or 1.0
    return Quote(
        instance_type=instance.instance_type,
        cloud=instance.cloud,
        region=instance.region,
        pricing=pricing,
        list_usd_per_hour=price,
        usd_per_hour=eff,
        usd_per_month=eff * schedule.hours_per_month,
        usd_per_gpu_hour=eff / count,
        spot_overhead=overhead,
        estimated=pricing in RESERVED_OPTIONS and bool(getattr(instance, "reserved_estimated", False)),
        break_even_utilization=break_even,
        schedule=schedule,
    )
