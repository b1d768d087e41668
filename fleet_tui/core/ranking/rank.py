"""The ranking loop: every catalog offer that fits, priced, filtered and ordered."""

from __future__ import annotations

import math
from collections.abc import Iterable

from fleet_tui.core.capabilities import can_train, unsupported
from fleet_tui.core.errors import FieldError
from fleet_tui.core.interconnects import Fabric, parse_network, with_network
from fleet_tui.core.pricing import (
    HOURS_PER_MONTH,
    PRICING_OPTIONS,
    Schedule,
    SpotAssumptions,
    check_pricing,
)
from fleet_tui.core.ranking.constraints import (
    accelerator_set,
    as_schedule,
    as_set,
    check_limits,
    unit_for,
)
from fleet_tui.core.ranking.costs import MonthlyRates, unit_factor
from fleet_tui.core.ranking.current import current_offer
from fleet_tui.core.ranking.index import catalog_index, slice_accelerator
from fleet_tui.core.ranking.offers import UNIT_PLAN, Candidate, RankedOffers, Recommendation
from fleet_tui.core.ranking.placement import DEFAULT_MAX_INSTANCES, Placer
from fleet_tui.core.ranking.reasons import OfferBuilder
from fleet_tui.core.ranking.serving import Planner
from fleet_tui.core.ranking.table import OfferTable


def unsupported_example(workload, index) -> str:
    """One reason a catalog device cannot run ``workload`` (for the note that counts them)."""
    for group in index.groups:
        why = unsupported(group.acc.id, group.acc.software_stack, workload.kind, workload.optimizer,
                          workload.precision)
        if why:
            return why
    return "no reason found"


SKIP_ORDER = (
    "excluded_rows", "filtered_rows", "no_accelerator_spec_rows", "odd_device_count_rows",
    "inference_only_rows", "unsupported_stack_rows",
    "not_fitting_rows", "too_slow_rows", "unpriced_offers", "over_budget_offers",
    "latency_unknown_rows",
)
# with a serving demand only (a plain ranking's JSON keeps its keys)
PLAN_SKIPS = ("slo_unmet_rows", "plan_unknown_rows")


def recommend(
    workload,
    catalog,
    *,
    current: tuple[str, int] | None = None,
    current_region: str | None = None,
    current_pricing: str | None = None,
    clouds: Iterable[str] | str | None = None,
    regions: Iterable[str] | str | None = None,
    vendors: Iterable[str] | str | None = None,
    stacks: Iterable[str] | str | None = None,
    accelerators: Iterable[str] | str | None = None,
    pricing: str = "on-demand",
    spot_allowed: bool = True,
    hours_per_month: float | Schedule | None = HOURS_PER_MONTH,
    latency_target_ms: float | None = None,
    budget_usd_per_month: float | None = None,
    top: int | None = None,
    training_tokens: float | None = None,
    spot: SpotAssumptions | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    expand_regions: bool = False,
    marketplace_multi_node: bool = False,
    demand=None,
    network: str | None = None,
) -> Recommendation:
    """Rank every catalog offer that fits ``workload``; see :mod:`fleet_tui.core.ranking`.

    One row per instance type and pricing option (its cheapest region, with how many regions offer
    it) unless ``expand_regions``; marketplace boxes stay single-node unless ``marketplace_multi_node``.
    With a ``demand`` (:class:`fleet_tui.core.perf.serving_plan.Demand`) offers are ranked by the
    monthly bill of the serving capacity plan (:mod:`.serving`); the batch is then the plan's.
    ``network`` (``3200G`` per node, ``400G/gpu``, a fabric name: :func:`~fleet_tui.core.interconnects.parse_network`)
    replaces every instance type's network between instances, as ``size`` charges it; each
    instance keeps its own link inside.
    """
    check_pricing(pricing, allow_any=True)
    check_limits(workload, pricing=pricing, spot_allowed=spot_allowed, top=top,
                 latency_target_ms=latency_target_ms, budget_usd_per_month=budget_usd_per_month,
                 training_tokens=training_tokens, max_instances=max_instances)
    if network is not None:
        parse_network(network)  # a bad value fails here, before any offer is sized
    named: dict[Fabric, Fabric] = {}  # an instance's links -> the same with the named network
    options = PRICING_OPTIONS if pricing == "any" else (pricing,)
    if not spot_allowed:
        options = tuple(p for p in options if p != "spot")
    schedule = as_schedule(hours_per_month)
    spot = spot or SpotAssumptions()

    index = catalog_index(catalog)
    cloud_set = as_set(clouds, "cloud", index.clouds, "cloud")
    region_set = as_set(regions, "region", index.regions, "region")
    vendor_set = as_set(vendors, "vendor", index.vendors, "vendor")
    stack_set = as_set(stacks, "software stack", index.stacks, "stack")
    accelerator_ids = accelerator_set(accelerators, catalog)

    unit_kind, unit = unit_for(workload, training_tokens)
    planner = None
    placed = workload
    if demand is not None:
        if not workload.is_generation:
            raise FieldError("rate", "a capacity plan ({rate}/{tokens_per_s}) needs generation: {prompt_len} "
                             "and {gen_len}")
        unit_kind, unit = "month", UNIT_PLAN
        placed = workload.derive(batch=1)  # memory per replica at one sequence; the plan picks concurrency
        planner = Planner(placed, demand)
    placer = Placer(placed, training_tokens=training_tokens, unit_kind=unit_kind,
                    max_instances=max_instances)
    hours = schedule.hours_per_month
    stateless = workload.kind == "inference"
    rates = MonthlyRates(schedule, spot, stateless=stateless)

    skip_order = SKIP_ORDER + (PLAN_SKIPS if planner is not None else ())
    skipped: dict[str, int] = dict.fromkeys(skip_order, 0)
    dropped: dict[str, tuple[str, str]] = {}  # accelerator -> (skip counter, why it cannot serve)
    skipped["excluded_rows"] = index.excluded
    skipped["no_accelerator_spec_rows"] = index.no_spec
    skipped["odd_device_count_rows"] = index.odd_count
    # Offers whose speed is unknown cannot be costed per unit of work: they are listed after every
    # ranked offer.
    ranked, unknown = OfferTable(options, rates), OfferTable(options, rates)
    unknown_notes: dict[str, str] = {}  # accelerator -> why its speed is unknown
    option_slots = tuple((PRICING_OPTIONS.index(p), j) for j, p in enumerate(options))
    cloud_rates: dict[str, tuple] = {}
    per_month = unit_kind == "month"
    budget = math.inf if budget_usd_per_month is None else budget_usd_per_month
    unpriced = over_budget = filtered = 0
    cheapest_month, cheapest = math.inf, None  # position in ``ranked`` of the lowest $/h
    training = workload.is_training
    ident_of: dict[tuple[str, str], int] = {}  # (cloud, instance type) -> id (regions fold into one)
    for group in index.groups:
        acc = group.acc
        rows = group.rows
        if training and not can_train(acc.id):  # inference-only devices (capabilities.toml)
            skipped["inference_only_rows"] += len(rows)
            continue
        if unsupported(acc.id, acc.software_stack, workload.kind, workload.optimizer, workload.precision):
            skipped["unsupported_stack_rows"] += len(rows)  # e.g. QLoRA without bitsandbytes (capabilities.toml)
            continue
        if (vendor_set is not None and group.vendor_key not in vendor_set) or (
                stack_set is not None and acc.software_stack.lower() not in stack_set) or (
                accelerator_ids is not None and acc.id not in accelerator_ids):
            filtered += len(rows)
            continue
        if cloud_set is not None or region_set is not None:
            kept = [r for r in rows if (cloud_set is None or r.cloud_key in cloud_set)
                    and (region_set is None or r.region_key in region_set)]
            filtered += len(rows) - len(kept)
            rows = kept
            if not rows:
                continue
        multi_node = marketplace_multi_node or not group.marketplace
        fabric = group.fabric
        if network is not None and fabric is not None:
            fabric = named.get(fabric) or named.setdefault(fabric, with_network(fabric, network))
        if group.fraction is None:
            placement = placer.size(acc, group.spec, group.devices, fabric=fabric, multi_node=multi_node)
        else:  # a GPU slice (e.g. 1/6 of an A10): that share of memory, bandwidth, compute
            placement = placer.size(slice_accelerator(acc, group.fraction), group.spec, 1,
                                    fabric=fabric, multi_node=False)
        if not placement.fits:
            skipped["not_fitting_rows"] += len(rows)
            continue
        if latency_target_ms is not None:
            if placement.latency_ms is None:
                skipped["latency_unknown_rows"] += len(rows)
                continue
            if placement.latency_ms > latency_target_ms:
                skipped["too_slow_rows"] += len(rows)
                continue
        n = placement.instances
        served = None
        if planner is not None:
            served = planner.serve(placement.context.acc if placement.context else acc, group.spec,
                                   group.devices, placement)
            if not served.ok:
                skipped[served.skip] += len(rows)
                dropped.setdefault(acc.id, (served.skip, served.why_not))
                continue
            n *= served.scale
            table, factor = ranked, None
        elif per_month:
            # $/month needs no speed to be priced, but an always-on server whose speed cannot be
            # estimated cannot be said to serve the load: it follows every offer that can.
            table = unknown if placement.tokens_per_s is None else ranked
            factor = None
        else:
            factor = unit_factor(placement.speed.unit_cost_per_usd_hour, hours)
            table = unknown if factor is None else ranked
        # noted only for offers that stay (within budget, priced): the note lists their devices
        speed_note = placement.speed_note if table is unknown else None
        keys, refs, ids = table.keys, table.refs, table.ids
        row_ref = table.add_group(rows, placement, acc, served)
        stride = len(options)
        for row in rows:
            cloud = row.instance.cloud
            ident = ident_of.setdefault((row.cloud_key, row.instance.instance_type), len(ident_of)) * stride
            per_option = cloud_rates.get(cloud)
            if per_option is None:
                per_option = cloud_rates[cloud] = tuple(
                    (i, j, rates(options[j], cloud)) for i, j in option_slots)
            for i, j, rate in per_option:
                price = row.prices[i]
                if price is None:
                    unpriced += 1
                    continue
                month = price * n * rate
                if month > budget:
                    over_budget += 1
                    continue
                if factor is not None and month < cheapest_month:
                    cheapest_month, cheapest = month, len(keys)
                # cheapest unit first (the month when the unit is $/month or the speed unknown)
                keys.append(month * factor if factor is not None else month)
                refs.append(row_ref + j)
                ids.append(ident + j)
                if speed_note is not None:
                    unknown_notes.setdefault(acc.id, speed_note)
            row_ref += stride
    skipped["filtered_rows"] = filtered
    skipped["unpriced_offers"] = unpriced
    skipped["over_budget_offers"] = over_budget

    fitting = len(ranked) + len(unknown)
    n_ranked = len(ranked)
    if expand_regions:
        chosen = ranked.order(top)
        regions_r: dict[int, int] = {}
        regions_u: dict[int, int] = {}
    else:
        chosen, regions_r = ranked.one_per_id(top)
    if len(unknown) and (top is None or len(chosen) < top):
        rest = None if top is None else top - len(chosen)
        if expand_regions:
            more = unknown.order(rest)
        else:
            more, regions_u = unknown.one_per_id(rest)
        chosen += [n_ranked + pos for pos in more]
    elif not expand_regions:
        regions_u = {}

    def candidate(seq: int) -> Candidate:  # seq: position in ``ranked``, then in ``unknown``
        if seq < n_ranked:
            return ranked.candidate(seq, seq, regions_r.get(ranked.ids[seq], 1))
        pos = seq - n_ranked
        return unknown.candidate(pos, seq, regions_u.get(unknown.ids[pos], 1))

    cur = None
    notes: list[str] = []
    if current is not None:
        cur, cur_notes = current_offer(
            placer, catalog, index, current, current_region, current_pricing or (
                pricing if pricing != "any" else "on-demand"),
            rates=rates, schedule=schedule, unit=unit, unit_kind=unit_kind, spot=spot,
            planner=planner,
        )
        notes.extend(cur_notes)

    build = OfferBuilder(unit=unit, current=cur, current_stack=cur.software_stack if cur else "CUDA",
                         spot=spot, stateless=stateless, schedule=schedule)
    offers = RankedOffers(chosen, lambda rank, seq: build(rank, candidate(seq)))
    cheapest_offer = None
    if per_month:  # ranked by $/month = effective $/h × hours: the cheapest per hour is the best
        cheapest_offer = offers[0] if chosen else None
    elif cheapest is not None:
        if chosen and cheapest == chosen[0]:
            cheapest_offer = offers[0]
        else:
            k0 = ranked.keys[cheapest]  # its rank: offers with a lower key, or equal and before
            rank = 1 + sum(1 for pos, k in enumerate(ranked.keys)
                           if k < k0 or (k == k0 and pos < cheapest))
            cheapest_offer = build(rank, candidate(cheapest))
    if planner is not None:
        notes.append(f"ranked by the serving capacity plan for {planner.demand.label()}: replicas of the devices "
                     "of one instance (or of the instances the model needs), whole instances bought; "
                     "the batch is the plan's concurrency")
        missed = [why for skip, why in dropped.values() if skip == "slo_unmet_rows"]
        if missed:
            notes.append(f"{skipped['slo_unmet_rows']} catalog rows cannot meet the latency targets: "
                         + "; ".join(missed[:2])
                         + (f" (and {len(missed) - 2} more devices)" if len(missed) > 2 else ""))
        if skipped["plan_unknown_rows"]:
            notes.append(f"{skipped['plan_unknown_rows']} catalog rows have no speed estimate, so no plan")
    notes += _notes(skipped, unknown_notes, unknown=len(unknown), ranked=len(ranked),
                    per_month=per_month, unit=unit, fitting=fitting)
    if not expand_regions and fitting:
        notes.append("one row per instance type and pricing option, in its cheapest region "
                     "(the regions that offer it are counted; ask for every region to list them all)")
    if skipped["inference_only_rows"]:
        notes.append(f"{skipped['inference_only_rows']} catalog rows of inference-only accelerators "
                     "(Inferentia, Qualcomm AI 100: capabilities.toml) are not ranked for training")
    if skipped["unsupported_stack_rows"]:
        why = unsupported_example(workload, index)
        notes.append(f"{skipped['unsupported_stack_rows']} catalog rows are not ranked: their software stack "
                     f"cannot run this workload ({why}; capabilities.toml)")
    if network is not None:
        notes.append(f"network between instances as given for every offer: {parse_network(network)[2]} "
                     "(each instance type keeps its own link inside)")
    if not marketplace_multi_node and any(g.marketplace for g in index.groups):
        notes.append("marketplace boxes (vast, runpod) are ranked one instance at a time: their network "
                     "between hosts is unknown (multi-node marketplace layouts only when asked for)")
    constraints = (
        ("clouds", tuple(sorted(cloud_set)) if cloud_set else None),
        ("regions", tuple(sorted(region_set)) if region_set else None),
        ("vendors", tuple(sorted(vendor_set)) if vendor_set else None),
        ("stacks", tuple(sorted(stack_set)) if stack_set else None),
        ("pricing", pricing),
        ("spot_allowed", spot_allowed),
        ("hours_per_month", hours),
        ("latency_target_ms", latency_target_ms),
        ("budget_usd_per_month", budget_usd_per_month),
        ("training_tokens", training_tokens),
        ("max_instances", max_instances),
        ("expand_regions", expand_regions),
        ("marketplace_multi_node", marketplace_multi_node),
        ("top", top),
    ) + ((("demand", demand.to_dict()),) if demand is not None else ()) + (
        (("accelerators", tuple(sorted(accelerator_ids))),) if accelerator_ids else ())
    return Recommendation(
        workload=workload, unit=unit, pricing=pricing, schedule=schedule, offers=offers,
        current=cur, fitting_offers=fitting, considered_rows=len(catalog.instances),
        skipped=tuple((k, skipped[k]) for k in skip_order), constraints=constraints,
        notes=tuple(notes), cheapest_per_hour=cheapest_offer, speed_unknown_offers=len(unknown),
        demand=demand, plan_dropped=tuple((a, skip, why) for a, (skip, why) in dropped.items()),
    )


def _notes(skipped: dict[str, int], unknown_notes: dict[str, str], *, unknown: int, ranked: int,
           per_month: bool, unit: str, fitting: int) -> list[str]:
    notes = []
    if skipped["excluded_rows"]:
        notes.append(f"{skipped['excluded_rows']} catalog rows excluded by validation "
                     "(placeholder/zero prices and similar) were not ranked")
    if unknown_notes:
        ids = list(unknown_notes)
        devices = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        why = (unknown_notes[ids[0]] if len(ids) == 1 else
               "their catalog entries lack the published peak or memory bandwidth it needs")
        if unknown and per_month:
            notes.append(f"{unknown} fitting offers on {devices} have no speed estimate ({why}): "
                         f"whether they keep up with the load cannot be checked, so they are listed "
                         + (f"after the {ranked} offers with one, cheapest per month first"
                            if ranked else "cheapest per month first"))
        elif unknown:
            notes.append(f"{unknown} fitting offers on {devices} have no speed estimate ({why}): "
                         f"they cannot be costed per {unit.removeprefix('USD/')} and are listed "
                         f"after the {ranked} ranked offers, cheapest per hour first")
    if not fitting:
        notes.append("no offer fits under the given constraints")
    return notes
