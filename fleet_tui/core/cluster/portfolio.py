"""The cheapest mix of reserved (1 y / 3 y), on-demand and spot capacity for a demand profile.

Input: a demand profile, devices needed in each hour (from a file, a ``record`` database, or a
Prometheus range query by the caller), and an instance's prices (catalog list prices in USD per
instance-hour). Capacity is bought in whole instances of ``devices_per_instance``.

Method. Reservations bill every hour of the profile; flexible capacity (on-demand, and spot for the
share of work allowed on spot) bills only the hours used. Stack instances from the bottom of the
demand: instance ``k`` is needed ``u_k`` of the hours, those with more than ``(k-1)·n`` devices in
demand (a flexible instance is billed for the whole hour however few of its devices work). It is
worth reserving exactly when ``u_k`` times the flexible price
exceeds the reserved price — the break-even utilization of ``pricing.break_even_utilization``
(reserved / on-demand, against the blended flexible price when spot is allowed). ``u_k`` falls with
``k``, so the optimum is a prefix: reserve instances ``1..K`` with the cheapest allowed term, run the
rest flexibly. This is exact for linear prices, which cloud price pages are.

Spot: ``max_spot_share`` is the share of *all* the instance-hours the demand needs that may run on
spot (work that tolerates interruptions); spot takes that many of the flexible hours above the
reservation (or all of them, if fewer). The number of reserved instances is then the one of least
total cost, found exactly over every count (costs are linear in each piece), and the plan reports
the cost of one reservation more and one less (its sensitivity).

Ground. A commitment is recommended only from at least ``min_history_days`` of demand (default
``MIN_HISTORY_DAYS``): a year's reservation bought on an hour of history is a guess. Reserved prices
the catalog derived from on-demand by a standard discount (``reserved_estimated``) are flagged
as estimates. Each useful spot hour costs ``spot / (1 - overhead)`` with the interruption model of
``core.pricing`` (``SpotAssumptions``: interruptions per hour by cloud, checkpoint interval, restart
time); the risk is reported as expected interruptions per month and the chance that an instance is
interrupted at least once a day, ``1 - exp(-rate × 24 h)``.

Every price and break-even comes from ``core.pricing``; nothing here re-derives one.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleet_tui.core.errors import FieldError, UserError, escape_braces
from fleet_tui.core.fsutil import read_text_capped
from fleet_tui.core.jsonio import parse_json
from fleet_tui.core.limits import BOUNDS, check_count, int_limit
from fleet_tui.core.pricing import (
    HOURS_PER_MONTH,
    SpotAssumptions,
    break_even_utilization,
    spot_cost_multiplier,
    training_run_cost,
)
from fleet_tui.core.records import record

TERMS = ("reserved-3y", "reserved-1y")
MIN_HISTORY_DAYS = 7.0  # below this much demand history no commitment is recommended


@record
class Prices:
    """USD per instance-hour; ``None`` = not offered."""

    on_demand: float
    reserved_1y: float | None = None
    reserved_3y: float | None = None
    spot: float | None = None
    cloud: str = ""
    devices_per_instance: int = 1
    reserved_estimated: bool = False  # reserved prices derived from on-demand, not published

    def reserved(self, term: str) -> float | None:
        return self.reserved_3y if term == "reserved-3y" else self.reserved_1y

    @classmethod
    def from_instance(cls, inst: Any) -> "Prices":
        od = inst.price("on-demand")
        if od is None:
            raise UserError(f"{inst.instance_type}: the catalog lists no on-demand price for it")
        return cls(on_demand=od, reserved_1y=inst.price("reserved-1y"),
                   reserved_3y=inst.price("reserved-3y"), spot=inst.price("spot"),
                   cloud=inst.cloud, devices_per_instance=max(1, int(inst.accelerator_count or 1)),
                   reserved_estimated=bool(getattr(inst, "reserved_estimated", False)))


def _usd(usd_per_hour: float, hours: float) -> float:
    return training_run_cost(usd_per_hour, hours * 3600.0)  # pricing's one "price × time"


def instance_activity(demand: Sequence[float], per_instance: int) -> list[float]:
    """``u_k`` for k = 1..peak instances: the share of hours the k-th instance (stacked from the
    bottom) is needed at all. The k-th (0-based) is needed in an hour with ``d > k·n`` devices,
    i.e. when the hour needs more than ``k`` instances: counted once per hour, then summed from
    the top, so the work is hours + peak instances (not their product: 10^6 devices × a year)."""
    hours = len(demand)
    needs = [math.ceil(d / per_instance) for d in demand]  # instances each hour needs
    peak = max(needs, default=0)
    hours_needing = [0] * (peak + 1)  # hours that need exactly m instances
    for m in needs:
        hours_needing[m] += 1
    out = [0.0] * peak
    above = 0  # hours that need more than k instances
    for k in range(peak - 1, -1, -1):
        above += hours_needing[k + 1]
        out[k] = above / hours
    return out


def device_utilization(demand: Sequence[float], per_instance: int, k: int) -> float:
    """Share of the k-th instance's device-hours that carry demand (0-based ``k``)."""
    return sum(min(max(d - k * per_instance, 0.0), per_instance) for d in demand) / (
        per_instance * len(demand))


def reserved_device_utilization(demand: Sequence[float], per_instance: int, k: int) -> float:
    """The mean of ``device_utilization`` over instances ``0..k-1``: the bottom ``k·n`` devices
    carry ``min(d, k·n)`` of each hour's demand, so this is one pass over the hours."""
    return sum(min(d, k * per_instance) for d in demand) / (k * per_instance * len(demand))


def check_demand(demand: Sequence[float], where: str = "demand") -> None:
    """Every hour's count finite, >= 0 and within the ``devices`` bound, and the profile within
    ``demand_hours``: checked before anything is sized from it (a 1e9 once grew past 10 GB)."""
    check_count(len(demand), "demand_hours", where, "hours")
    limit = int_limit("devices")
    for i, d in enumerate(demand):
        if not (0 <= d <= limit):  # NaN fails both
            raise UserError(f"{where}: hour {i + 1}: {d:g} devices is outside 0-{limit} "
                            f"(the bound on {BOUNDS['devices'].why})")


@record
class _Mixes:
    """The cost of every mix of ``k`` reserved instances of a term, the rest spot (up to the cap)
    and on demand."""

    hours: int
    suffix: list[float]  # suffix[k]: instance-hours needed above k instances
    spot_cap: float  # instance-hours spot may cover
    spot_useful: float | None  # spot's price per useful hour, its interruptions paid for
    on_demand: float
    term_prices: dict[str, float]

    def cost(self, term: str | None, k: int) -> dict[str, float]:
        flex = self.suffix[min(k, len(self.suffix) - 1)]
        spot_h = min(flex, self.spot_cap)
        od_h = flex - spot_h
        cost_r = _usd(self.term_prices[term], k * self.hours) if term is not None and k else 0.0
        cost_s = _usd(self.spot_useful, spot_h) if spot_h and self.spot_useful is not None else 0.0
        cost_od = _usd(self.on_demand, od_h)
        return {"k": k, "od_hours": od_h, "spot_hours": spot_h, "reserved": cost_r,
                "on_demand": cost_od, "spot": cost_s, "total": cost_r + cost_od + cost_s}


def plan_portfolio(demand: Sequence[float], prices: Prices, *, max_spot_share: float = 0.0,
                   terms: Sequence[str] = TERMS, spot: SpotAssumptions | None = None,
                   min_history_days: float = MIN_HISTORY_DAYS) -> dict:
    """The cheapest mix (see the module docstring) as a JSON-ready document."""
    _check_plan_args(demand, max_spot_share, terms, min_history_days)
    n = prices.devices_per_instance
    hours = len(demand)
    spot_model = spot or SpotAssumptions()
    overhead = spot_model.overhead_fraction(prices.cloud or "other")
    share = max_spot_share if prices.spot is not None else 0.0
    spot_useful = prices.spot * spot_cost_multiplier(overhead) if prices.spot is not None else None
    use_spot = spot_useful is not None and spot_useful < prices.on_demand and share > 0
    term_prices: dict[str, float] = {t: p for t in terms if (p := prices.reserved(t)) is not None}
    util = instance_activity(demand, n)
    needed_hours = sum(util) * hours  # instance-hours the demand needs
    spot_cap = share * needed_hours if use_spot else 0.0
    suffix = [0.0] * (len(util) + 1)
    for k in range(len(util) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + util[k] * hours
    mixes = _Mixes(hours=hours, suffix=suffix, spot_cap=spot_cap, spot_useful=spot_useful,
                   on_demand=prices.on_demand, term_prices=term_prices)

    days = hours / 24.0
    ground = None
    if days < min_history_days:
        ground = (f"only {hours} h ({days:.1f} days) of demand history: no commitment is "
                  f"recommended below {min_history_days:g} days (--min-history-days)")
    best_term, best = None, mixes.cost(None, 0)
    per_term: dict[str, dict[str, float]] = {}
    for term in term_prices:
        costs = [mixes.cost(term, k) for k in range(len(util) + 1)]
        per_term[term] = min(costs, key=lambda c: (c["total"], c["k"]))
        if ground is None and per_term[term]["k"] and per_term[term]["total"] < best["total"]:
            best_term, best = term, per_term[term]
    reserved = int(best["k"])
    total = best["total"]
    all_od = _usd(prices.on_demand, needed_hours)
    scale = HOURS_PER_MONTH / hours
    flex_rate = (prices.on_demand * (needed_hours - spot_cap) + (spot_useful or 0.0) * spot_cap
                 ) / needed_hours if needed_hours else prices.on_demand
    commitments = [_commitment(term, price, reserved if term == best_term else 0, prices, flex_rate, demand,
                               int(per_term[term]["k"]))
                   for term, price in sorted(term_prices.items())]
    term_for_sens = best_term or (min(term_prices, key=term_prices.__getitem__) if term_prices else None)
    sensitivity = _sensitivity(mixes, term_for_sens, reserved, len(util), total)
    return {
        "hours": hours, "history_days": round(days, 3), "min_history_days": min_history_days,
        "devices_per_instance": n,
        "peak_devices": max(demand), "mean_devices": round(sum(demand) / hours, 3),
        "plan": {"reserved_term": best_term if reserved else None, "reserved_instances": reserved,
                 "on_demand_instance_hours": round(best["od_hours"], 3),
                 "spot_instance_hours": round(best["spot_hours"], 3),
                 "no_commitment_reason": ground},
        "prices_estimated": prices.reserved_estimated and bool(term_prices),
        "usd_total": round(total, 2), "usd_per_month": round(total * scale, 2),
        "all_on_demand_usd": round(all_od, 2),
        "savings_pct": round(100 * (1 - total / all_od), 2) if all_od else 0.0,
        "cost_usd": {"reserved": round(best["reserved"], 2), "on_demand": round(best["on_demand"], 2),
                     "spot": round(best["spot"], 2)},
        "commitments": commitments,
        "sensitivity": sensitivity,
        "instance_hours_needed_pct": [round(100 * u, 2) for u in util],
        "spot": None if prices.spot is None else _spot_terms(prices, spot_model, share, overhead,
                                                             best["spot_hours"], scale),
    }


def _check_plan_args(demand: Sequence[float], max_spot_share: float, terms: Sequence[str],
                     min_history_days: float) -> None:
    """A ``FieldError`` naming the first bad argument of :func:`plan_portfolio`."""
    if not demand:
        raise FieldError("demand", "{demand} has no hours")
    if any(d < 0 or not math.isfinite(d) for d in demand):
        raise FieldError("demand", "{demand}: device counts must be finite and >= 0")
    check_demand(demand)
    if not 0.0 <= max_spot_share <= 1.0:
        raise FieldError("spot_share", f"{{spot_share}} must be 0-1, got {max_spot_share:g}")
    if not 0.0 <= min_history_days < math.inf:
        raise FieldError("min_history_days", "{min_history_days} must be zero or more days, "
                                             f"got {min_history_days:g}")
    bad = [t for t in terms if t not in TERMS]
    if bad:
        raise FieldError("terms", f"{{terms}} {escape_braces(repr(bad[0]))} is not a term; "
                                  f"allowed: {', '.join(TERMS)}")


def _commitment(term: str, price: float, k: int, prices: Prices, flex_rate: float,
                demand: Sequence[float], cheapest: int) -> dict[str, Any]:
    """One term's row: ``k`` instances committed (0 unless it is the plan's), break-evens, use."""
    return {
        "term": term, "instances": k, "usd_per_instance_hour": price,
        "estimated": prices.reserved_estimated,
        "break_even_utilization_pct": round(100 * break_even_utilization(price, prices.on_demand), 2),
        "break_even_vs_flexible_pct": round(100 * price / flex_rate, 2) if flex_rate > 0 else None,
        "device_utilization_pct": round(
            100 * reserved_device_utilization(demand, prices.devices_per_instance, k), 2) if k else None,
        "cheapest_instances": cheapest,
    }


def _sensitivity(mixes: _Mixes, term: str | None, reserved: int, most: int, total: float) -> list[dict[str, Any]]:
    """The plan's cost with one reserved instance fewer and one more (within 0..``most``)."""
    if term is None:
        return []
    rows = []
    for k in (reserved - 1, reserved, reserved + 1):
        if 0 <= k <= most:
            c = mixes.cost(term, k)
            rows.append({"term": term, "reserved_instances": k, "usd_total": round(c["total"], 2),
                         "usd_vs_plan": round(c["total"] - total, 2)})
    return rows


def _spot_terms(prices: Prices, spot_model: SpotAssumptions, share: float, overhead: float,
                spot_hours: float, month_scale: float) -> dict[str, Any]:
    """What the plan assumes of spot: its share, price, interruptions and their overhead."""
    rate = spot_model.rate_for(prices.cloud or "other")
    return {
        "share": share, "share_of": "all instance-hours",
        "usd_per_instance_hour": prices.spot,
        "interruptions_per_hour": round(rate, 6), "overhead_pct": round(100 * overhead, 2),
        "paid_hours_per_useful_hour": round(spot_cost_multiplier(overhead), 4),
        "expected_interruptions_per_month": round(rate * spot_hours * month_scale, 3),
        "p_interrupted_per_instance_day": round(1 - math.exp(-rate * 24.0), 4),
    }


# --------------------------------------------------------------------------------------------
# Demand profiles


def read_demand(path: str | Path) -> list[float]:
    """Hourly device counts: JSON (a list, or ``{"demand": [...]}``), CSV with a ``devices``
    column, or one number per line. Errors name the file and line."""
    p = Path(path).expanduser()
    demand = _parse_demand(p, read_text_capped(p, "demand profile",
                                               max_bytes=int_limit("demand_file_bytes")))
    check_demand(demand, str(p))
    return demand


def _parse_demand(p: Path, text: str) -> list[float]:
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        doc = parse_json(text, str(p))
        values = doc.get("demand") if isinstance(doc, dict) else doc
        if not isinstance(values, list):
            raise UserError(f"{p}:1: expected a list of hourly device counts or {{\"demand\": [...]}}")
        return [_count(v, f"{p}:1: demand[{i}]") for i, v in enumerate(values)]
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if "," in first or not _is_number(first):
        reader = csv.DictReader(io.StringIO(text))
        try:
            if "devices" not in (reader.fieldnames or []):
                raise UserError(f"{p}:1: a CSV demand profile needs a 'devices' column "
                                "(one row per hour)")
            counts: list[float] = []
            hours, last_hour = "hour" in (reader.fieldnames or []), None
            for row in reader:
                where = f"{p}:{reader.line_num}"
                if hours:  # one row per hour: a gap or a repeat would shift every later hour
                    last_hour = _next_hour(row["hour"], last_hour, where)
                counts.append(_count(row["devices"], where))
            return counts
        except csv.Error as exc:
            raise UserError(f"{p}:{reader.line_num}: not CSV: {exc}") from None
    return [_count(ln, f"{p}:{i}") for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]


def _next_hour(text: str | None, last: int | None, where: str) -> int:
    """The ``hour`` of a CSV row, which must follow ``last`` by one (rows are read as consecutive
    hours, so a gap or a repeat would shift every later hour)."""
    try:
        hour = int((text or "").strip())
    except ValueError:
        raise UserError(f"{where}: hour {text!r} is not a whole number of hours") from None
    if last is not None and hour != last + 1:
        raise UserError(f"{where}: hour {hour} follows hour {last}: give one row per hour, in "
                        f"order (hour {last + 1} expected; write 0 devices for an idle hour)")
    if hour < 0:
        raise UserError(f"{where}: hour {hour} is negative")
    return hour


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _count(v: Any, where: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {v!r} is not a device count") from None
    if not math.isfinite(x) or x < 0:
        raise UserError(f"{where}: device counts must be finite and >= 0, got {v!r}")
    check_count(x, "devices", where, "device count")
    return x


def demand_from_rows(rows: Sequence[Any], *, busy_util_pct: float = 1.0) -> list[float]:
    """Hourly demand from recorded samples (``monitor.recorder.read_rows``): the devices that did
    any work (utilization >= ``busy_util_pct``) in each hour, oldest hour first."""
    if not rows:
        return []
    start = min(r.ts for r in rows)
    check_count((max(r.ts for r in rows) - start) / 3600, "demand_hours", "the history",
                "hours spanned")
    busy: dict[int, set[str]] = {}
    for r in rows:
        hour = int((r.ts - start) // 3600)
        busy.setdefault(hour, set())
        util = r.get("gpu_util_pct")
        if util is not None and util >= busy_util_pct:
            busy[hour].add(r.device_key)
    return [float(len(busy.get(h, ()))) for h in range(max(busy) + 1)]
