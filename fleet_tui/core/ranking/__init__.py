"""Rank every catalog offer that fits a workload by what a unit of its work costs.

An *offer* is one catalog row (instance type × region) under one pricing option (on-demand, spot,
reserved 1y/3y). Each offer runs the workload on **all the devices of its instance**; an instance
with 8 or more devices may also be taken several times (2, 4, 8 … up to ``max_instances``) when one
is not enough, the way large models are trained and served across nodes. Smaller instances are
never multiplied: spreading a model over many single-GPU boxes is not a sane deployment (nor are
TPU slices: the catalog lists every slice size). A fractional GPU (Azure's NVads A10 v5 slices) is
sized as that fraction of the device's memory, bandwidth and compute.

How a workload is placed on ``G`` devices: its own layout when it sets ``tp``/``pp``/``zero``, else
the cheapest layout that fits (:mod:`fleet_tui.core.sizing.layout`: data parallel and ZeRO stages,
tensor parallel inside an instance, pipeline stages across instances), its collectives charged on
the instance type's links (:mod:`fleet_tui.core.interconnects`, :mod:`fleet_tui.core.perf.collectives`).
The workload's ``gpus`` describes the current setup only; each offer is sized on its own device count.

What is never ranked: inference-only accelerators for training, fine-tuning, LoRA or QLoRA
(``catalogs/capabilities.toml``; counted in ``skipped["inference_only_rows"]``); marketplace boxes
(Vast, RunPod: unknown network between hosts) taken more than once, unless
``marketplace_multi_node``. Offers of one instance type and pricing option in several regions are
one row, its cheapest region, with ``regions`` and ``region_price_range`` (``expand_regions``: a
row per region). An offer that does not fit (the current setup's, say) has no speed.

The unit of work (what the ranking sorts by, cheapest first):

* inference, ``serving="interactive"``: **USD per month** of the always-available server at the
  schedule's hours (a chat endpoint is paid for whether it is busy or not);
* inference, ``serving="batch"``: **USD per 1M tokens** (output tokens when generating, input
  tokens for a forward pass), from the throughput model;
* training, fine-tuning, LoRA, QLoRA: **USD per training run** when ``training_tokens`` is given,
  else **USD per 1M training tokens**;
* generation with a serving ``demand`` (:class:`fleet_tui.core.perf.serving_plan.Demand`: requests/s
  or output tokens/s, optional ``ttft_ms``/``tpot_ms``): **USD per month at the demand**, the bill
  of the capacity plan that serves it within the targets — replicas of ``g`` devices of one
  instance (``g`` searched over the instance's device count), whole instances bought, priced like
  every offer; :mod:`.serving` calls :func:`fleet_tui.core.perf.serving_plan.replica_capacity` and
  ``plan_from_capacity`` (the plan ``size`` prints), memoised per device and replica size. Each
  offer carries its ``plan`` and ``usd_per_million_tokens``; ``instances``/``gpus``/``usd_per_*``
  are the whole plan's. Device groups whose replicas miss the targets even with one sequence in
  flight, or whose speed is unknown, are dropped and said why (``plan_dropped``, ``explain``).

Per offer: ``usd_per_hour`` is the effective cost of one used hour for the whole offer (all its
instances), with spot's interruption overhead and a reservation's unused hours folded in (see
:mod:`fleet_tui.core.pricing`); ``usd_per_month = usd_per_hour × hours_per_month``.

Savings against the current setup are measured *for the current setup's monthly amount of work*:
``savings_pct = 1 - cost_per_unit / current.cost_per_unit`` and
``savings_usd_per_month = current.usd_per_month × savings_pct`` (for the $/month unit that is
simply the difference of the monthly bills). ``speedup = tokens_per_s / current.tokens_per_s``.

**Unknown speed.** Speed comes from published spec figures (:mod:`fleet_tui.core.perf`); where one is
missing (no dense peak for a compute-bound phase, no memory bandwidth for decode) the offer has no
speed estimate and nothing is invented for it. Such offers still fit and are counted in
``fitting_offers``; they are marked ``speed_unknown`` with ``speed_unknown_reason`` (the missing
figure, e.g. "no published bf16 peak for A10G"). When the unit is work (USD per 1M tokens, per run)
they cannot be costed per unit: ``cost_per_unit`` is null and they come **after every ranked offer**,
cheapest per hour first (``speed_unknown_offers`` counts them; a ``top`` page shows them only when
fewer ranked offers exist). For always-on interactive serving the unit is $/month, which needs no
speed to price, but nobody can say whether such a server keeps up with the load: they keep their
$/month and follow every offer with a speed estimate, cheapest per month first. A latency target cannot be checked
without a speed: such rows are counted in ``skipped["latency_unknown_rows"]``. A current setup with
unknown speed gets no cost per unit and no savings; ``explain`` says why instead of comparing.

Nothing is ranked silently: catalog rows marked ``excluded`` are skipped and counted; rows with
``flags`` (suspicious prices) are ranked but carry the flag in ``flags``, ``risks`` and ``reason``
(a flag that names pricing options, e.g. "spot 0 in the source", is carried only by the offers of
those options; ``offer.instance.flags`` keeps them all).

Speed of the ranking: fit runs once per distinct (accelerator, devices per instance) pair (memory
once per placement), the speed estimate only where the unit needs it; every offer is then priced
with a few multiplications of pricing's formulas evaluated once at $1/h (:mod:`.costs`) into a
:class:`~.offers.Candidate` whose first item (a float) is the sort key. ``Recommendation.offers`` is
a read-only, tuple-like sequence that builds each :class:`RankedOffer` on first read
(:class:`~.offers.RankedOffers`), so a full ranking of the bundled catalog (~6,000 fitting offers)
takes a few ms and a 100,000-offer one well under 500 ms (``bench/bench_recommend.py``);
``to_dict()`` builds the offers it serializes.

Where things are: :mod:`.offers` (results and JSON), :mod:`.constraints` (inputs checked, the unit
of work), :mod:`.index` (the catalog grouped by device), :mod:`.placement` (sizing and speed per
device group), :mod:`.costs` (pricing's formulas at a unit price), :mod:`.rank` (the loop),
:mod:`.reasons` (risks, flags, one-line reasons), :mod:`.current` (one setup without ranking),
:mod:`.formatting` (money, device counts), :mod:`.explanation` (why the winner wins),
:mod:`.migration` (moving from one setup to another), :mod:`.serving` (ranking by a capacity plan).

JSON (``Recommendation.to_dict()``, the ``fleet-tui recommend --json`` contract)::

    {"workload": {...}, "unit": str, "pricing": str, "schedule": {"hours_per_month", "label"},
     "constraints": {...}, "current": OFFER | null, "offers": [OFFER, ...],
     "fitting_offers": int, "speed_unknown_offers": int, "considered_rows": int,
     "skipped": {reason: count}, "notes": [str]}

    OFFER = {"rank", "cloud", "instance_type", "region", "accelerator", "vendor", "software_stack",
             "accelerator_count", "instances", "gpus", "sharding", "pricing", "list_usd_per_hour",
             "usd_per_hour", "usd_per_month", "usd_per_gpu_hour", "cost_per_unit", "unit",
             "tokens_per_s", "latency_ms", "headroom_gib", "memory_used_pct", "fits",
             "savings_usd_per_month", "savings_pct", "speedup", "spot_overhead_pct",
             "reserved_estimated", "break_even_utilization", "risks", "flags", "reason",
             "is_current", "misfit", "speed_unknown", "speed_unknown_reason", "layout", "regions",
             "region_price_range", "reliability"}

With a demand, the JSON also has ``"demand": {rate_rps, output_tokens_per_s, ttft_ms, tpot_ms}``
and ``"plan_dropped": [{"accelerator", "reason"}]``, ``skipped`` gains ``slo_unmet_rows`` and
``plan_unknown_rows``, and each OFFER gains ``"usd_per_million_tokens"`` and ``"serving_plan"``
(:class:`~fleet_tui.core.perf.serving_plan.ServingPlan`'s keys). Without one these keys are absent.

``rank`` is 0 for the current setup. Money is USD; ``*_pct`` are 0-100. ``tokens_per_s``,
``latency_ms``, ``speedup`` and (for work units) ``cost_per_unit``/``savings_*`` are null when the
speed is unknown.
"""

from __future__ import annotations

from fleet_tui.core.perf.serving_plan import Demand, demand
from fleet_tui.core.ranking.current import evaluate_setup
from fleet_tui.core.ranking.explanation import explain
from fleet_tui.core.ranking.formatting import devices_label, money
from fleet_tui.core.ranking.index import slice_accelerator, vendor_key
from fleet_tui.core.ranking.migration import MigrationReport, migration_report, report_between
from fleet_tui.core.ranking.offers import (
    STACK_MIGRATION_NOTE,
    UNIT_MONTH,
    UNIT_PLAN,
    UNIT_RUN,
    RankedOffer,
    Recommendation,
    workload_summary,
)
from fleet_tui.core.ranking.placement import DEFAULT_MAX_INSTANCES, MULTI_INSTANCE_MIN_DEVICES
from fleet_tui.core.ranking.rank import recommend
from fleet_tui.core.ranking.reasons import LOW_HEADROOM_FRACTION

__all__ = [
    "DEFAULT_MAX_INSTANCES", "LOW_HEADROOM_FRACTION", "MULTI_INSTANCE_MIN_DEVICES",
    "STACK_MIGRATION_NOTE", "UNIT_MONTH", "UNIT_PLAN", "UNIT_RUN", "Demand", "demand", "RankedOffer", "Recommendation",
    "MigrationReport", "devices_label", "evaluate_setup", "explain", "migration_report", "money",
    "report_between", "recommend", "slice_accelerator", "vendor_key",
    "workload_summary",
]
