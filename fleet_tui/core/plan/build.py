""":func:`plan_workload`: one workload on one target, answered once for every front end.

Order of the answer (each step one core function, called here and nowhere else by a front end):

1. **layout** — the workload's own when it sets one, else the first layout that fits the devices,
   cheapest communication first (:func:`fleet_tui.core.sizing.layout.choose_layout`, as the ranking);
2. **verdict and memory** — :func:`fleet_tui.core.sizing.check_fit` on the memory model (Hugging
   Face runs and training) or, for a serving engine, what it reserves
   (:func:`fleet_tui.core.sizing.kv_pool.engine_fit`): it starts or not, then runs N at a time;
3. **fixes** — the fit search's changes, then larger catalog devices, each effect once;
4. **speed** — only for what fits, on the links of the instance it is priced on; a serving engine's
   at the sequences it runs at once; without a target, on :data:`REFERENCE_ACCELERATOR`;
5. **capacity plan, burst, training run** — when asked for;
6. **cost** — the cheapest offer that deploys the layout (:mod:`.deploy`: a TP group in one instance).

The catalog as target (:func:`plan_best`) ranks every offer (:func:`fleet_tui.core.ranking.recommend`)
and plans the top one's devices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fleet_tui.core.catalog.models import Catalog
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.footprint import layout_is_set, parallel_layout
from fleet_tui.core.perf import estimate_throughput
from fleet_tui.core.plan.deploy import deployed_cost
from fleet_tui.core.plan.report import PlanReport, Verdict
from fleet_tui.core.pricing import cost_per_million_tokens
from fleet_tui.core.sizing import check_fit, estimate_memory, kv_capacity, precision_support
from fleet_tui.core.sizing.device_support import workload_unsupported
from fleet_tui.core.sizing.fit import DEFAULT_NODE_DEVICES, bigger_devices, distinct_by_effect
from fleet_tui.core.sizing.kv_pool import engine_fit, running_workload, serves_with_engine
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

if TYPE_CHECKING:  # the links table is read only for several devices (_links, _fabric), the
    # serving simulation only for a capacity plan
    from fleet_tui.core.interconnects import Fabric
    from fleet_tui.core.perf.serving_plan import Demand

#: Accelerator the speed is shown for when no target device is given.
REFERENCE_ACCELERATOR = "H100"


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What to plan: the workload, the target device (None: no fit, speed on the reference device),
    whether its layout is the user's (then it is kept, else searched), and the optional questions."""

    workload: Workload
    accelerator: str | None = None
    layout_given: bool = False
    demand: Demand | None = None
    training_tokens: int | None = None
    burst: int | None = None
    hours_per_month: float = 730.0
    pricing: str = "on-demand"
    network: str | None = None  # the network between nodes as the user names it (perf.fabric.job_fabric)


def plan_workload(req: PlanRequest, catalog: Catalog) -> PlanReport:
    """The :class:`PlanReport` of ``req`` (see the module docstring)."""
    w = req.workload
    acc = catalog.accelerator(req.accelerator) if req.accelerator else None
    notes: list[str] = []
    if req.training_tokens is not None and not w.is_training:
        raise FieldError("tokens", "{tokens} (a training run's length) applies to training workloads")
    if req.burst is not None and not w.is_generation:
        raise FieldError("burst", "{burst} (requests sent at once) needs generation: give {prompt_len} "
                         "and {gen_len} (inference)")
    if acc is not None:
        why = workload_unsupported(w, acc)
        if why is not None:  # the capability table: e.g. QLoRA (bitsandbytes) on a TPU
            field = ("workload" if w.kind == "qlora" or not w.is_training or "inference only" in why
                     else "optimizer" if w.optimizer in ("adamw8bit", "paged_adamw8bit") else "precision")
            raise FieldError(field, "{" + field + "} " + why.replace("{", "{{").replace("}", "}}"))
        ok, msg = precision_support(w.precision, acc, w)
        if not ok:
            raise FieldError("precision",
                             "{precision} " + f"{w.precision}: " + msg.replace("{", "{{").replace("}", "}}"))
        if msg:  # how it runs it (weight-only fp8 on Ampere) or that its support is undocumented
            notes.append(msg)
    n = w.gpus
    if acc is not None and not req.layout_given and not layout_is_set(w) and n > 1:
        # the ranking's rule: the first layout that fits, cheapest communication first
        from fleet_tui.core.sizing.layout import choose_layout  # several devices only

        ch = choose_layout(w, acc, n, min(n, DEFAULT_NODE_DEVICES))
        w = ch.workload if ch.fits else w
    mem = estimate_memory(w, n)
    fit = check_fit(w, acc, n) if acc is not None else None
    eng = engine_fit(w, acc, n) if (acc is not None and serves_with_engine(w)) else None
    verdict = _verdict(fit, eng)
    fixes: tuple = ()
    if fit is not None and not fit.fits and acc is not None:  # (a fit is checked on a device)
        accs = list(catalog.accelerators.values())
        fixes = tuple(distinct_by_effect(list(fit.suggestions) + bigger_devices(w, n, acc, accs)))
    cost = None
    if acc is not None and verdict.ok:
        cost = deployed_cost(catalog, acc.id, w, n, pricing=req.pricing, hours_per_month=req.hours_per_month)
    speed = speed_acc = links = None
    fits = verdict.ok is not False
    if fits:
        speed_acc = acc or _reference(catalog)
        if speed_acc is not None:
            links = _links(cost, acc, n, req.network) if acc is not None else None
            speed = estimate_throughput(running_workload(w, speed_acc, n), speed_acc, n,
                                        links.fabric if links is not None else None)
            if acc is None:
                notes.append(f"no {{gpu}} given: speed shown for {speed_acc.id}")
    if cost is not None and speed is not None and speed.tokens_per_s and speed.tokens_per_s > 0:
        cost = replace(cost, usd_per_million_tokens=cost_per_million_tokens(cost.usd_per_hour, speed.tokens_per_s))
    run = None
    if req.training_tokens is not None and speed_acc is not None and fits:
        from fleet_tui.core.perf.run import training_run

        run = training_run(w, speed_acc, n, req.training_tokens, links.fabric if links is not None else None)
    if req.demand is not None and not w.is_generation:
        raise FieldError("rate", "a capacity plan ({rate}/{tokens_per_s}) needs generation: {prompt_len} "
                         "and {gen_len}")
    plan = price_source = None
    if req.demand is not None and speed_acc is not None:
        plan, price_source = _serving_plan(w, catalog, speed_acc, req, req.demand)
    burst, burst_replicas = None, 1
    if req.burst is not None and speed_acc is not None and fits:
        burst, burst_replicas = _burst(w, speed_acc, req.burst)
    if cost is not None and plan is not None and plan.devices:
        # with a demand, the cost per 1M tokens is at the planned load on these devices, not one batch's
        cost = replace(cost, usd_per_million_tokens=cost_per_million_tokens(
            cost.usd_per_hour, plan.output_tokens_per_s * n / plan.devices))
    kv = kv_capacity(w, acc, n) if (acc is not None and not w.is_training) else None
    assumptions = list(mem.assumptions) + (list(speed.assumptions) if speed is not None else [])
    return PlanReport(
        workload=w, accelerator=acc.id if acc is not None else None, gpus=n,
        layout=parallel_layout(w, n).label() if n > 1 else None, verdict=verdict, memory=mem, engine=eng,
        kv_capacity=kv, fixes=fixes, speed=speed, speed_accelerator=speed_acc.id if speed_acc else None,
        training_run=run, serving_plan=plan, plan_price_source=price_source, burst=burst,
        burst_replicas=burst_replicas, burst_requests=req.burst if burst_replicas and fits else None, cost=cost,
        assumptions=tuple(dict.fromkeys(assumptions)),
        notes=tuple(notes), links=links.words if links is not None and n > 1 else None)


def plan_best(req: PlanRequest, catalog: Catalog) -> PlanReport | None:
    """The catalog as target: rank every offer (the ranking's own fit and placement) and plan the
    top offer's devices; None when no offer fits."""
    from fleet_tui.core.ranking import recommend

    rec = recommend(req.workload, catalog, top=1, hours_per_month=req.hours_per_month, demand=req.demand,
                    training_tokens=req.training_tokens)
    return plan_offer(rec.offers[0], req, catalog) if rec.offers else None


def plan_offer(offer, req: PlanRequest, catalog: Catalog) -> PlanReport:
    """One ranked offer (a :class:`~fleet_tui.core.ranking.RankedOffer`) planned as ``size`` plans
    its devices: the ranking's placement (its layout) kept, the same report as every front end."""
    fit = offer.fit
    if fit is not None and fit.workload is not None and fit.gpus == offer.gpus:
        placed, given = fit.workload, True
    else:  # a capacity-plan offer (replicas of a smaller group): the devices, layout searched
        placed, given = req.workload.derive(gpus=offer.gpus, tp=None, pp=None, zero=None, micro_batch=None), False
    report = plan_workload(PlanRequest(placed, offer.accelerator, layout_given=given, demand=req.demand,
                                       training_tokens=req.training_tokens, burst=req.burst,
                                       hours_per_month=req.hours_per_month, pricing=req.pricing,
                                       network=req.network), catalog)
    return replace(report, offer=offer.label)


def _links(cost, acc: Accelerator, gpus: int, network: str | None):
    """The links the speed is charged on and where they come from (``perf.fabric.job_fabric``):
    the network the user names, else the priced instance's (as :func:`_fabric`), else the device's
    reference system; None on one device."""
    if gpus <= 1:
        return None
    from fleet_tui.core.perf.fabric import FabricChoice, job_fabric

    choice = job_fabric(acc, gpus, cost, network)
    if network or cost is None:
        return choice
    return FabricChoice(_fabric(cost, acc, gpus) or choice.fabric, cost, choice.words)


def _fabric(cost, acc: Accelerator, gpus: int) -> Fabric | None:
    """The links of the instance the setup is priced on, as the ranking charges them: inside one
    instance the network between instances plays no part (None without an instance)."""
    if cost is None or gpus <= 1:
        return None
    from fleet_tui.core.interconnects import fabric_for

    i = cost.instance
    fab = fabric_for(acc.id, int(i.accelerator_count), i.cloud, i.instance_type, acc.software_stack)
    if cost.instances == 1:
        fab = dataclasses.replace(fab, inter_link="", inter_gbps=1.0, inter_known=False)
    return fab


def _reference(catalog: Catalog) -> Accelerator | None:
    try:
        return catalog.accelerator(REFERENCE_ACCELERATOR)
    except UserError:
        return next(iter(catalog.accelerators.values()), None)


def _verdict(fit, eng) -> Verdict:
    if fit is None:
        return Verdict("unchecked", "")
    common = dict(capacity_bytes=fit.capacity_bytes, headroom_bytes=fit.headroom_bytes,
                  precision_supported=fit.precision_supported, precision_note=fit.precision_note)
    if eng is None:
        return Verdict("fits" if fit.fits else "does_not_fit", fit.message, **common)
    if not fit.fits or not eng.starts:
        error = eng.error or "the weights, the profile run and one sequence exceed its budget"
        return Verdict("does_not_start", fit.message, engine_error=error, **common)
    queue = f", {eng.queued:,} queued" if eng.queued else ""
    message = (f"{eng.engine} starts: {fit.message}; runs {eng.running:,} of {eng.running + eng.queued:,} "
               f"sequences at a time (limit: {eng.limit}){queue}")
    return Verdict("starts", message, running=eng.running, queued=eng.queued, running_limit=eng.limit, **common)


def _serving_plan(w: Workload, catalog: Catalog, acc: Accelerator, req: PlanRequest, demand: Demand):
    """The capacity plan (``perf.sim_plan.serving_plan_for``: the scheduler simulation), priced per
    device-hour as deployed."""
    from fleet_tui.core.perf.sim_plan import serving_plan_for

    gpus = w.replica_gpus
    setup = deployed_cost(catalog, acc.id, w.derive(gpus=gpus) if gpus != w.gpus else w, gpus,
                          pricing=req.pricing, hours_per_month=req.hours_per_month)
    price = setup.usd_per_hour / gpus if setup is not None else None
    plan = serving_plan_for(w, acc, gpus, demand, usd_per_device_hour=price)
    source = (f"cheapest {req.pricing} offer for {gpus}× {acc.id}: {setup.instance.instance_type} "
              f"({setup.instance.cloud} {setup.instance.region}), per device-hour" if setup is not None else None)
    return plan, source


def _burst(w: Workload, acc: Accelerator, n: int):
    """``n`` requests at once (``perf.sim_plan.burst_report``: the scheduler simulation), split
    evenly over the replicas."""
    from fleet_tui.core.perf.sim_plan import burst_report

    b = burst_report(w, acc, n)
    return b, b.replicas


__all__ = ["REFERENCE_ACCELERATOR", "PlanRequest", "plan_best", "plan_offer", "plan_workload"]
