"""One setup sized and priced without ranking: the current setup, and migration reports."""

from __future__ import annotations

import difflib
import math
from typing import Any

from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.pricing import HOURS_PER_MONTH, Schedule, SpotAssumptions, check_pricing
from fleet_tui.core.ranking.constraints import as_schedule, literal, unit_for
from fleet_tui.core.ranking.costs import MonthlyRates, unit_factor
from fleet_tui.core.ranking.index import CatalogIndex, catalog_index, slice_accelerator
from fleet_tui.core.ranking.offers import Candidate, RankedOffer
from fleet_tui.core.ranking.placement import DEFAULT_MAX_INSTANCES, Placement, Placer
from fleet_tui.core.ranking.reasons import OfferBuilder

_FALLBACK_ORDER = ("on-demand", "reserved-1y", "reserved-3y", "spot")


def current_offer(placer: Placer, catalog, index: CatalogIndex, current, region, pricing, *,
                  rates: MonthlyRates, schedule: Schedule, unit: str, unit_kind: str,
                  spot: SpotAssumptions, planner=None) -> tuple[RankedOffer, list[str]]:
    """The setup ``current`` = (instance type, count) as a rank-0 offer, and notes on its price."""
    instance_type, count, rows = _current_rows(catalog, current, region)
    notes: list[str] = []
    p, price, row = _cheapest_price(rows, pricing, region, instance_type, notes)
    acc = index.accs.get(row.accelerator)
    if acc is None:
        raise FieldError("current", "{current} " + literal(
            f"{instance_type}: its accelerator {row.accelerator!r} has no spec in the catalog, "
            "so it cannot be sized"))
    if row.accelerator_count < 1:
        placement = placer.size(slice_accelerator(acc, row.accelerator_count),
                                index.spec_key(acc, row.accelerator_count), 1, instances=count,
                                detail=True)
    else:
        placement = placer.size(acc, index.spec_key(acc), max(int(round(row.accelerator_count)), 1),
                                instances=count, detail=True)
    served = None
    if planner is not None:  # a serving demand: as many of this instance type as the plan needs
        served, searched, why = _serve(placer, planner, index, acc, row)
        if served is not None:
            placement, count = searched, searched.instances
        else:
            notes.append(f"current setup {instance_type} cannot serve the demand: {why}")
    scale = served.scale if served is not None else 1
    month = price * count * scale * rates(p, row.cloud)
    cpu = _cost_per_unit(month, placement, unit_kind, schedule)
    if cpu is None and placement.fits and unit_kind != "month":
        notes.append(f"current setup {count}× {instance_type}: speed unknown "
                     f"({placement.speed_note or 'no estimate'}), so its cost per "
                     f"{unit.removeprefix('USD/')} and the savings cannot be computed")
    if planner is not None and served is None:
        cpu = None  # it cannot serve the demand: nothing to compare per month
    cand = Candidate(cpu if cpu is not None else month, month, -1, row, p, price, placement, acc,
                     scale=scale, plan=served.plan if served is not None else None)
    build = OfferBuilder(unit=unit, current=None, current_stack=acc.software_stack, spot=spot,
                         stateless=placer.workload.kind == "inference", schedule=schedule)
    offer = build(0, cand, is_current=True, cost_per_unit=cpu)
    if not placement.fits:
        notes.append(f"current setup {count}× {instance_type} cannot run this workload: "
                     f"{placement.why_not}")
    return offer, notes


def _current_rows(catalog, current, region) -> tuple[str, int, list]:
    """The instance type, its count and its catalog rows (in ``region`` when one is given), or a
    ``FieldError`` naming the bad part of the setup."""
    try:
        instance_type, count = current
    except (TypeError, ValueError):
        raise UserError("current setup must be (instance type, count)") from None
    if not isinstance(count, int) or count < 1:
        raise FieldError("current_count", "{current_count} must be a whole number >= 1, got "
                         + literal(repr(count)))
    try:
        rows = catalog.find_instance(instance_type)
    except UserError as exc:
        raise FieldError("current", "{current}: " + literal(exc)) from None
    if region:
        in_region = [r for r in rows if r.region.lower() == region.lower()]
        if not in_region:
            have = sorted({r.region for r in rows})
            near = difflib.get_close_matches(region, have, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise FieldError("current_region", "{current_region} " + literal(
                f"{region!r}: {instance_type} is not offered there{hint} "
                f"(offered in: {', '.join(have)})"))
        rows = in_region
    return instance_type, count, rows


def _cheapest_price(rows: list, pricing: str, region, instance_type: str, notes: list[str]) -> tuple:
    """(pricing option, USD/h, row): the cheapest row with a ``pricing`` price, else with the first
    other option that has one (noted); NaN when no row has any price."""
    for option in (pricing,) + tuple(o for o in _FALLBACK_ORDER if o != pricing):
        priced = [(r.price(option), r) for r in rows if r.price(option) is not None]
        if priced:
            price, row = min(priced, key=lambda t: (t[0], t[1].region))
            if option != pricing:
                notes.append(f"current setup {instance_type}: no {pricing} price in the catalog; "
                             f"priced {option} instead")
            if not region and len({r.region for r in rows}) > 1:
                notes.append(f"current setup priced in {row.region}, its cheapest region "
                             "(give --current-region to choose)")
            return option, price, row
    row = rows[0]
    notes.append(f"current setup {instance_type}: no usable price in the catalog"
                 + (f" (excluded: {row.excluded})" if getattr(row, "excluded", None) else ""))
    return pricing, math.nan, row


def _serve(placer: Placer, planner, index: CatalogIndex, acc, row) -> tuple[Any, Placement, str]:
    """The serving plan on as many of this instance type as it needs (None when it cannot serve),
    the placement the instances were searched on, and why it cannot serve."""
    fraction = row.accelerator_count if row.accelerator_count < 1 else None
    devices = max(int(round(row.accelerator_count)), 1)
    sized = slice_accelerator(acc, fraction) if fraction else acc
    searched = placer.size(sized, index.spec_key(acc, fraction), devices)  # instances searched
    ctx = searched.context  # a placement that fits always carries its sizing context
    served = planner.serve(ctx.acc, index.spec_key(acc, fraction), devices, searched) \
        if searched.fits and ctx is not None else None
    if served is not None and served.ok:
        return served, searched, ""
    return None, searched, served.why_not if served is not None else searched.why_not


def _cost_per_unit(month: float, placement, unit_kind: str, schedule: Schedule) -> float | None:
    """The monthly bill per unit of work (the bill itself for a monthly unit); None when the bill is
    not a number or the speed is unknown."""
    factor = unit_factor(placement.speed.unit_cost_per_usd_hour, schedule.hours_per_month) \
        if unit_kind != "month" else None
    if not math.isfinite(month):
        return None
    if unit_kind == "month":
        return month
    if factor is not None and placement.fits:
        return month * factor
    return None


def evaluate_setup(
    workload,
    catalog,
    setup: tuple[str, int],
    *,
    region: str | None = None,
    pricing: str = "on-demand",
    hours_per_month: float | Schedule | None = HOURS_PER_MONTH,
    training_tokens: float | None = None,
    spot: SpotAssumptions | None = None,
) -> tuple[RankedOffer, tuple[str, ...]]:
    """Size and price one setup (instance type, count) without ranking the catalog.

    Returns the setup as a rank-0 ``RankedOffer`` (``fits`` may be False) and notes about how it
    was priced (region chosen, pricing fallback).
    """
    check_pricing(pricing)
    schedule = as_schedule(hours_per_month)
    spot = spot or SpotAssumptions()
    unit_kind, unit = unit_for(workload, training_tokens)
    placer = Placer(workload, training_tokens=training_tokens, unit_kind=unit_kind,
                    max_instances=DEFAULT_MAX_INSTANCES)
    offer, notes = current_offer(
        placer, catalog, catalog_index(catalog), setup, region, pricing,
        rates=MonthlyRates(schedule, spot, stateless=workload.kind == "inference"),
        schedule=schedule, unit=unit, unit_kind=unit_kind, spot=spot,
    )
    return offer, tuple(notes)
