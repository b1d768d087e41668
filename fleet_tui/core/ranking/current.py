"""One setup sized and priced without ranking: the current setup, and migration reports."""

from __future__ import annotations

import difflib
import math

from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.pricing import HOURS_PER_MONTH, Schedule, SpotAssumptions, check_pricing
from fleet_tui.core.ranking.constraints import as_schedule, literal, unit_for
from fleet_tui.core.ranking.costs import MonthlyRates, unit_factor
from fleet_tui.core.ranking.index import CatalogIndex, catalog_index, slice_accelerator
from fleet_tui.core.ranking.offers import Candidate, RankedOffer
from fleet_tui.core.ranking.placement import DEFAULT_MAX_INSTANCES, Placer
from fleet_tui.core.ranking.reasons import OfferBuilder

_FALLBACK_ORDER = ("on-demand", "reserved-1y", "reserved-3y", "spot")


def current_offer(placer: Placer, catalog, index: CatalogIndex, current, region, pricing, *,
                  rates: MonthlyRates, schedule: Schedule, unit: str, unit_kind: str,
                  spot: SpotAssumptions, planner=None) -> tuple[RankedOffer, list[str]]:
    """The setup ``current`` = (instance type, count) as a rank-0 offer, and notes on its price."""
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
    notes: list[str] = []
    best = None
    for p in (pricing,) + tuple(p for p in _FALLBACK_ORDER if p != pricing):
        priced = [(r.price(p), r) for r in rows if r.price(p) is not None]
        if priced:
            price, row = min(priced, key=lambda t: (t[0], t[1].region))
            best = (p, price, row)
            break
    if best is None:
        row = rows[0]
        p, price = pricing, math.nan
        notes.append(f"current setup {instance_type}: no usable price in the catalog"
                     + (f" (excluded: {row.excluded})" if getattr(row, "excluded", None) else ""))
    else:
        p, price, row = best
        if p != pricing:
            notes.append(f"current setup {instance_type}: no {pricing} price in the catalog; "
                         f"priced {p} instead")
        if not region and len({r.region for r in rows}) > 1:
            notes.append(f"current setup priced in {row.region}, its cheapest region "
                         "(give --current-region to choose)")
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
        fraction = row.accelerator_count if row.accelerator_count < 1 else None
        devices = max(int(round(row.accelerator_count)), 1)
        sized = slice_accelerator(acc, fraction) if fraction else acc
        searched = placer.size(sized, index.spec_key(acc, fraction), devices)  # instances searched
        ctx = searched.context  # a placement that fits always carries its sizing context
        served = planner.serve(ctx.acc, index.spec_key(acc, fraction), devices, searched) \
            if searched.fits and ctx is not None else None
        if served is not None and served.ok:
            placement, count = searched, searched.instances
        else:
            why = served.why_not if served is not None else searched.why_not
            notes.append(f"current setup {instance_type} cannot serve the demand: {why}")
            served = None
    scale = served.scale if served is not None else 1
    month = price * count * scale * rates(p, row.cloud)
    factor = unit_factor(placement.speed.unit_cost_per_usd_hour, schedule.hours_per_month) \
        if unit_kind != "month" else None
    if not math.isfinite(month):
        cpu = None
    elif unit_kind == "month":
        cpu = month
    elif factor is not None and placement.fits:
        cpu = month * factor
    else:
        cpu = None
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
