"""The ranking loop: every catalog offer that fits, priced, filtered and ordered."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

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
from fleet_tui.core.records import record


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


@record
class RankRequest:
    """What a ranking is asked for, besides the workload and the catalog: the current setup to
    compare with, which offers count (clouds, regions, vendors, stacks, accelerators, pricing, a
    budget, a latency target, at most ``max_instances``), how they are costed (schedule, spot
    assumptions, training tokens, a serving ``demand``, a ``network`` between instances) and how
    many are listed (``top``, one row per instance type unless ``expand_regions``)."""

    current: tuple[str, int] | None = None
    current_region: str | None = None
    current_pricing: str | None = None
    clouds: Iterable[str] | str | None = None
    regions: Iterable[str] | str | None = None
    vendors: Iterable[str] | str | None = None
    stacks: Iterable[str] | str | None = None
    accelerators: Iterable[str] | str | None = None
    pricing: str = "on-demand"
    spot_allowed: bool = True
    hours_per_month: float | Schedule | None = HOURS_PER_MONTH
    latency_target_ms: float | None = None
    budget_usd_per_month: float | None = None
    top: int | None = None
    training_tokens: float | None = None
    spot: SpotAssumptions | None = None
    max_instances: int = DEFAULT_MAX_INSTANCES
    expand_regions: bool = False
    marketplace_multi_node: bool = False
    demand: Any = None  # a perf.serving_plan.Demand
    network: str | None = None


def recommend(workload, catalog, **options: Any) -> Recommendation:
    """Rank every catalog offer that fits ``workload``; see :mod:`fleet_tui.core.ranking`.
    ``options`` are the fields of :class:`RankRequest`.

    One row per instance type and pricing option (its cheapest region, with how many regions offer
    it) unless ``expand_regions``; marketplace boxes stay single-node unless ``marketplace_multi_node``.
    With a ``demand`` (:class:`fleet_tui.core.perf.serving_plan.Demand`) offers are ranked by the
    monthly bill of the serving capacity plan (:mod:`.serving`); the batch is then the plan's.
    ``network`` (``3200G`` per node, ``400G/gpu``, a fabric name: :func:`~fleet_tui.core.interconnects.parse_network`)
    replaces every instance type's network between instances, as ``size`` charges it; each
    instance keeps its own link inside.
    """
    return rank(workload, catalog, RankRequest(**options))


def rank(workload, catalog, req: RankRequest) -> Recommendation:
    """:func:`recommend` for a built request: check it, price every fitting offer, pick the top ones."""
    run = _Run(workload, catalog, req)
    for group in run.index.groups:
        run.add_group(group)
    run.skipped["filtered_rows"] = run.filtered
    run.skipped["unpriced_offers"] = run.unpriced
    run.skipped["over_budget_offers"] = run.over_budget
    return run.recommendation()


class _Run:
    """One ranking: the request checked and resolved, then the offers priced into two tables
    (ranked, and speed unknown) with the counts of what was skipped and why."""

    def __init__(self, workload, catalog, req: RankRequest) -> None:
        pricing, demand, network = req.pricing, req.demand, req.network
        check_pricing(pricing, allow_any=True)
        check_limits(workload, pricing=pricing, spot_allowed=req.spot_allowed, top=req.top,
                     latency_target_ms=req.latency_target_ms, budget_usd_per_month=req.budget_usd_per_month,
                     training_tokens=req.training_tokens, max_instances=req.max_instances)
        if network is not None:
            parse_network(network)  # a bad value fails here, before any offer is sized
        self.workload, self.catalog, self.req = workload, catalog, req
        self.named: dict[Fabric, Fabric] = {}  # an instance's links -> the same with the named network
        options = PRICING_OPTIONS if pricing == "any" else (pricing,)
        if not req.spot_allowed:
            options = tuple(p for p in options if p != "spot")
        self.options = options
        self.schedule = as_schedule(req.hours_per_month)
        self.spot = req.spot or SpotAssumptions()

        index = self.index = catalog_index(catalog)
        self.cloud_set = as_set(req.clouds, "cloud", index.clouds, "cloud")
        self.region_set = as_set(req.regions, "region", index.regions, "region")
        self.vendor_set = as_set(req.vendors, "vendor", index.vendors, "vendor")
        self.stack_set = as_set(req.stacks, "software stack", index.stacks, "stack")
        self.accelerator_ids = accelerator_set(req.accelerators, catalog)

        unit_kind, unit = unit_for(workload, req.training_tokens)
        planner = None
        placed = workload
        if demand is not None:
            if not workload.is_generation:
                raise FieldError("rate", "a capacity plan ({rate}/{tokens_per_s}) needs generation: {prompt_len} "
                                 "and {gen_len}")
            unit_kind, unit = "month", UNIT_PLAN
            placed = workload.derive(batch=1)  # memory per replica at one sequence; the plan picks concurrency
            planner = Planner(placed, demand)
        self.unit_kind, self.unit, self.planner = unit_kind, unit, planner
        self.placer = Placer(placed, training_tokens=req.training_tokens, unit_kind=unit_kind,
                             max_instances=req.max_instances)
        self.hours = self.schedule.hours_per_month
        self.stateless = workload.kind == "inference"
        self.rates = MonthlyRates(self.schedule, self.spot, stateless=self.stateless)

        self.skip_order = SKIP_ORDER + (PLAN_SKIPS if planner is not None else ())
        skipped: dict[str, int] = dict.fromkeys(self.skip_order, 0)
        self.skipped = skipped
        self.dropped: dict[str, tuple[str, str]] = {}  # accelerator -> (skip counter, why it cannot serve)
        skipped["excluded_rows"] = index.excluded
        skipped["no_accelerator_spec_rows"] = index.no_spec
        skipped["odd_device_count_rows"] = index.odd_count
        # Offers whose speed is unknown cannot be costed per unit of work: they are listed after every
        # ranked offer.
        self.ranked, self.unknown = OfferTable(options, self.rates), OfferTable(options, self.rates)
        self.unknown_notes: dict[str, str] = {}  # accelerator -> why its speed is unknown
        self.option_slots = tuple((PRICING_OPTIONS.index(p), j) for j, p in enumerate(options))
        self.cloud_rates: dict[str, tuple] = {}
        self.per_month = unit_kind == "month"
        self.budget = math.inf if req.budget_usd_per_month is None else req.budget_usd_per_month
        self.unpriced = self.over_budget = self.filtered = 0
        self.cheapest_month, self.cheapest = math.inf, None  # position in ``ranked`` of the lowest $/h
        self.training = workload.is_training
        self.ident_of: dict[tuple[str, str], int] = {}  # (cloud, instance type) -> id (regions fold into one)

    # -- checks and filters, placement, pricing: one accelerator group at a time -----------------

    def add_group(self, group) -> None:
        """Price the rows of one group (an accelerator and device count) if it passes the filters and fits."""
        rows = self._kept_rows(group)
        if rows is None:
            return
        placed = self._placement(group, rows)
        if placed is None:
            return
        placement, n, served, table, factor = placed
        self._price_rows(group, rows, placement, n, served, table, factor)

    def _kept_rows(self, group) -> list | None:
        """The group's rows left by the capability checks and the filters (each drop counted); None when
        none is left."""
        acc = group.acc
        rows = group.rows
        skipped, workload = self.skipped, self.workload
        if self.training and not can_train(acc.id):  # inference-only devices (capabilities.toml)
            skipped["inference_only_rows"] += len(rows)
            return None
        if unsupported(acc.id, acc.software_stack, workload.kind, workload.optimizer, workload.precision):
            skipped["unsupported_stack_rows"] += len(rows)  # e.g. QLoRA without bitsandbytes (capabilities.toml)
            return None
        vendor_set, stack_set, accelerator_ids = self.vendor_set, self.stack_set, self.accelerator_ids
        if (vendor_set is not None and group.vendor_key not in vendor_set) or (
                stack_set is not None and acc.software_stack.lower() not in stack_set) or (
                accelerator_ids is not None and acc.id not in accelerator_ids):
            self.filtered += len(rows)
            return None
        cloud_set, region_set = self.cloud_set, self.region_set
        if cloud_set is not None or region_set is not None:
            kept = [r for r in rows if (cloud_set is None or r.cloud_key in cloud_set)
                    and (region_set is None or r.region_key in region_set)]
            self.filtered += len(rows) - len(kept)
            rows = kept
            if not rows:
                return None
        return rows

    def _placement(self, group, rows: list):
        """(placement, instances, serving plan, table, unit factor) of a group that fits, meets the
        latency target and (with a demand) can serve it; None, counted, otherwise."""
        acc, req, skipped = group.acc, self.req, self.skipped
        multi_node = req.marketplace_multi_node or not group.marketplace
        fabric = group.fabric
        if req.network is not None and fabric is not None:
            fabric = self.named.get(fabric) or self.named.setdefault(fabric, with_network(fabric, req.network))
        if group.fraction is None:
            placement = self.placer.size(acc, group.spec, group.devices, fabric=fabric, multi_node=multi_node)
        else:  # a GPU slice (e.g. 1/6 of an A10): that share of memory, bandwidth, compute
            placement = self.placer.size(slice_accelerator(acc, group.fraction), group.spec, 1,
                                         fabric=fabric, multi_node=False)
        if not placement.fits:
            skipped["not_fitting_rows"] += len(rows)
            return None
        latency_target_ms = req.latency_target_ms
        if latency_target_ms is not None:
            if placement.latency_ms is None:
                skipped["latency_unknown_rows"] += len(rows)
                return None
            if placement.latency_ms > latency_target_ms:
                skipped["too_slow_rows"] += len(rows)
                return None
        n = placement.instances
        served = None
        if self.planner is not None:
            served = self.planner.serve(placement.context.acc if placement.context else acc, group.spec,
                                        group.devices, placement)
            if not served.ok:
                skipped[served.skip] += len(rows)
                self.dropped.setdefault(acc.id, (served.skip, served.why_not))
                return None
            n *= served.scale
            table, factor = self.ranked, None
        elif self.per_month:
            # $/month needs no speed to be priced, but an always-on server whose speed cannot be
            # estimated cannot be said to serve the load: it follows every offer that can.
            table = self.unknown if placement.tokens_per_s is None else self.ranked
            factor = None
        else:
            factor = unit_factor(placement.speed.unit_cost_per_usd_hour, self.hours)
            table = self.unknown if factor is None else self.ranked
        return placement, n, served, table, factor

    def _price_rows(self, group, rows: list, placement, n, served, table: OfferTable, factor) -> None:
        """Every row's price under every pricing option, within the budget, into ``table``."""
        acc, options, rates, budget = group.acc, self.options, self.rates, self.budget
        cloud_rates, option_slots, ident_of = self.cloud_rates, self.option_slots, self.ident_of
        unknown_notes = self.unknown_notes
        # noted only for offers that stay (within budget, priced): the note lists their devices
        speed_note = placement.speed_note if table is self.unknown else None
        keys, refs, ids = table.keys, table.refs, table.ids
        row_ref = table.add_group(rows, placement, acc, served)
        stride = len(options)
        unpriced = over_budget = 0
        cheapest_month, cheapest = self.cheapest_month, self.cheapest
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
        self.unpriced += unpriced
        self.over_budget += over_budget
        self.cheapest_month, self.cheapest = cheapest_month, cheapest

    # -- the top offers, the current setup, notes ------------------------------------------------

    def recommendation(self) -> Recommendation:
        """The top offers (ranked first, then those of unknown speed), the current setup, the
        cheapest offer per hour and the notes."""
        req, ranked, unknown, top = self.req, self.ranked, self.unknown, self.req.top
        fitting = len(ranked) + len(unknown)
        n_ranked = len(ranked)
        if req.expand_regions:
            chosen = ranked.order(top)
            regions_r: dict[int, int] = {}
            regions_u: dict[int, int] = {}
        else:
            chosen, regions_r = ranked.one_per_id(top)
        if len(unknown) and (top is None or len(chosen) < top):
            rest = None if top is None else top - len(chosen)
            if req.expand_regions:
                more = unknown.order(rest)
            else:
                more, regions_u = unknown.one_per_id(rest)
            chosen += [n_ranked + pos for pos in more]
        elif not req.expand_regions:
            regions_u = {}

        def candidate(seq: int) -> Candidate:  # seq: position in ``ranked``, then in ``unknown``
            if seq < n_ranked:
                return ranked.candidate(seq, seq, regions_r.get(ranked.ids[seq], 1))
            pos = seq - n_ranked
            return unknown.candidate(pos, seq, regions_u.get(unknown.ids[pos], 1))

        cur = None
        notes: list[str] = []
        if req.current is not None:
            cur, cur_notes = current_offer(
                self.placer, self.catalog, self.index, req.current, req.current_region, req.current_pricing or (
                    req.pricing if req.pricing != "any" else "on-demand"),
                rates=self.rates, schedule=self.schedule, unit=self.unit, unit_kind=self.unit_kind,
                spot=self.spot, planner=self.planner,
            )
            notes.extend(cur_notes)

        build = OfferBuilder(unit=self.unit, current=cur, current_stack=cur.software_stack if cur else "CUDA",
                             spot=self.spot, stateless=self.stateless, schedule=self.schedule)
        offers = RankedOffers(chosen, lambda rank, seq: build(rank, candidate(seq)))
        cheapest_offer = None
        cheapest = self.cheapest
        if self.per_month:  # ranked by $/month = effective $/h × hours: the cheapest per hour is the best
            cheapest_offer = offers[0] if chosen else None
        elif cheapest is not None:
            if chosen and cheapest == chosen[0]:
                cheapest_offer = offers[0]
            else:
                k0 = ranked.keys[cheapest]  # its rank: offers with a lower key, or equal and before
                rank = 1 + sum(1 for pos, k in enumerate(ranked.keys)
                               if k < k0 or (k == k0 and pos < cheapest))
                cheapest_offer = build(rank, candidate(cheapest))
        notes += self._notes(fitting)
        demand, skipped = req.demand, self.skipped
        return Recommendation(
            workload=self.workload, unit=self.unit, pricing=req.pricing, schedule=self.schedule, offers=offers,
            current=cur, fitting_offers=fitting, considered_rows=len(self.catalog.instances),
            skipped=tuple((k, skipped[k]) for k in self.skip_order), constraints=self._constraints(),
            notes=tuple(notes), cheapest_per_hour=cheapest_offer, speed_unknown_offers=len(unknown),
            demand=demand, plan_dropped=tuple((a, skip, why) for a, (skip, why) in self.dropped.items()),
        )

    def _notes(self, fitting: int) -> list[str]:
        """The plan's notes, what was skipped and why, and how the offers were read."""
        req, skipped, planner, notes = self.req, self.skipped, self.planner, []
        if planner is not None:
            notes.append(f"ranked by the serving capacity plan for {planner.demand.label()}: replicas of the devices "
                         "of one instance (or of the instances the model needs), whole instances bought; "
                         "the batch is the plan's concurrency")
            missed = [why for skip, why in self.dropped.values() if skip == "slo_unmet_rows"]
            if missed:
                notes.append(f"{skipped['slo_unmet_rows']} catalog rows cannot meet the latency targets: "
                             + "; ".join(missed[:2])
                             + (f" (and {len(missed) - 2} more devices)" if len(missed) > 2 else ""))
            if skipped["plan_unknown_rows"]:
                notes.append(f"{skipped['plan_unknown_rows']} catalog rows have no speed estimate, so no plan")
        notes += _notes(skipped, self.unknown_notes, unknown=len(self.unknown), ranked=len(self.ranked),
                        per_month=self.per_month, unit=self.unit, fitting=fitting)
        if not req.expand_regions and fitting:
            notes.append("one row per instance type and pricing option, in its cheapest region "
                         "(the regions that offer it are counted; ask for every region to list them all)")
        if skipped["inference_only_rows"]:
            notes.append(f"{skipped['inference_only_rows']} catalog rows of inference-only accelerators "
                         "(Inferentia, Qualcomm AI 100: capabilities.toml) are not ranked for training")
        if skipped["unsupported_stack_rows"]:
            why = unsupported_example(self.workload, self.index)
            notes.append(f"{skipped['unsupported_stack_rows']} catalog rows are not ranked: their software stack "
                         f"cannot run this workload ({why}; capabilities.toml)")
        if req.network is not None:
            notes.append(f"network between instances as given for every offer: {parse_network(req.network)[2]} "
                         "(each instance type keeps its own link inside)")
        if not req.marketplace_multi_node and any(g.marketplace for g in self.index.groups):
            notes.append("marketplace boxes (vast, runpod) are ranked one instance at a time: their network "
                         "between hosts is unknown (multi-node marketplace layouts only when asked for)")
        return notes

    def _constraints(self) -> tuple:
        """The request as it was applied (the JSON's ``constraints``)."""
        req = self.req
        cloud_set, region_set, vendor_set, stack_set = self.cloud_set, self.region_set, self.vendor_set, self.stack_set
        return (
            ("clouds", tuple(sorted(cloud_set)) if cloud_set else None),
            ("regions", tuple(sorted(region_set)) if region_set else None),
            ("vendors", tuple(sorted(vendor_set)) if vendor_set else None),
            ("stacks", tuple(sorted(stack_set)) if stack_set else None),
            ("pricing", req.pricing),
            ("spot_allowed", req.spot_allowed),
            ("hours_per_month", self.hours),
            ("latency_target_ms", req.latency_target_ms),
            ("budget_usd_per_month", req.budget_usd_per_month),
            ("training_tokens", req.training_tokens),
            ("max_instances", req.max_instances),
            ("expand_regions", req.expand_regions),
            ("marketplace_multi_node", req.marketplace_multi_node),
            ("top", req.top),
        ) + ((("demand", req.demand.to_dict()),) if req.demand is not None else ()) + (
            (("accelerators", tuple(sorted(self.accelerator_ids))),) if self.accelerator_ids else ())


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
