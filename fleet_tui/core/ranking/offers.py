"""What a ranking returns: :class:`RankedOffer`, :class:`Recommendation` and their JSON."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from typing import Any, NamedTuple, overload

from fleet_tui.core.pricing import Schedule
from fleet_tui.core.ranking.formatting import devices_label
from fleet_tui.core.records import record

UNIT_MONTH = "USD/month"
UNIT_RUN = "USD/run"
UNIT_PLAN = "USD/month at the demand"  # with a serving demand: the capacity plan's monthly bill
# Leaving the CUDA ecosystem means porting kernels, compilers and serving engines.
STACK_MIGRATION_NOTE = {
    "Neuron": "AWS Neuron SDK (compile with neuronx; not every op/model is supported)",
    "SynapseAI": "Intel Gaudi SynapseAI (HPU graph mode; custom CUDA kernels must be ported)",
    "ROCm": "AMD ROCm (HIP; most PyTorch works, custom CUDA kernels and some engines need ports)",
    "XLA": "XLA/TPU (JAX or PyTorch/XLA; static shapes)",
    "CUDA": "NVIDIA CUDA",
    "other": "a vendor-specific stack",
}


@record
class RankedOffer:
    """One offer, priced and sized for the workload. ``rank`` 0 is the current setup."""

    rank: int
    instance: Any  # the catalog Instance (not in JSON; its identifying fields are)
    cloud: str
    instance_type: str
    region: str
    accelerator: str
    vendor: str
    software_stack: str
    accelerator_count: float  # devices per instance
    instances: int  # how many instances the offer takes
    gpus: int  # devices in total
    sharding: str
    pricing: str
    list_usd_per_hour: float  # catalog price of one instance
    usd_per_hour: float  # effective cost of one used hour, all instances
    usd_per_month: float
    usd_per_gpu_hour: float
    cost_per_unit: float | None
    unit: str
    tokens_per_s: float | None
    latency_ms: float | None
    headroom_gib: float | None
    memory_used_pct: float | None
    fits: bool
    savings_usd_per_month: float | None = None
    savings_pct: float | None = None
    speedup: float | None = None
    spot_overhead_pct: float = 0.0
    reserved_estimated: bool = False
    break_even_utilization: float | None = None
    risks: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    reason: str = ""
    is_current: bool = False
    misfit: str = ""  # why it does not fit ("" when it fits)
    speed_unknown: bool = False  # no speed estimate: a spec figure it needs is not published
    speed_unknown_reason: str = ""  # e.g. "no published bf16 peak for A10G"
    layout: str = ""  # parallel layout on its devices, e.g. "TP8 × PP2 × DP4, ZeRO-1" ("" on one device)
    regions: int = 1  # regions offering it (one row: the cheapest region; --regions lists all)
    region_price_range: tuple = ()  # (lowest, highest) list USD/h over those regions
    reliability: str = ""  # a marketplace's reliability tier ("" for a cloud's own fleet)
    # with a serving demand (ranking by the capacity plan): the plan, money of the whole offer
    plan: Any = None  # the perf.serving_plan ServingPlan (JSON: "serving_plan", only when planned)
    usd_per_million_tokens: float | None = None  # at the demanded output token rate
    fit: Any = field(default=None, compare=False)  # the sizing FitResult (not in JSON)
    throughput: Any = field(default=None, compare=False)  # the perf Throughput (not in JSON)

    @property
    def label(self) -> str:
        n = f"{self.instances}× " if self.instances > 1 else ""
        return f"{n}{self.instance_type} ({self.cloud} {self.region}, {self.pricing})"

    @property
    def regions_label(self) -> str:
        """``17 regions, $55.04–75.96/h`` ("" for a single region)."""
        if self.regions <= 1:
            return ""
        lo, hi = self.region_price_range or (self.list_usd_per_hour, self.list_usd_per_hour)
        return f"{self.regions} regions, ${lo:,.2f}–{hi:,.2f}/h"

    @property
    def devices(self) -> str:
        return devices_label(self.accelerator_count, self.accelerator, self.instances)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in OFFER_KEYS}
        out["risks"] = list(self.risks)
        out["flags"] = list(self.flags)
        out["region_price_range"] = list(self.region_price_range)
        if self.plan is not None:  # only with a demand: the JSON of a plain ranking is unchanged
            out["usd_per_million_tokens"] = self.usd_per_million_tokens
            out["serving_plan"] = {k: (json_number(v) if isinstance(v, float) else v)
                                   for k, v in self.plan.to_dict().items()}
        return {k: (json_number(v) if isinstance(v, float) else v) for k, v in out.items()}


OFFER_KEYS = (
    "rank", "cloud", "instance_type", "region", "accelerator", "vendor", "software_stack",
    "accelerator_count", "instances", "gpus", "sharding", "pricing", "list_usd_per_hour",
    "usd_per_hour", "usd_per_month", "usd_per_gpu_hour", "cost_per_unit", "unit", "tokens_per_s",
    "latency_ms", "headroom_gib", "memory_used_pct", "fits", "savings_usd_per_month",
    "savings_pct", "speedup", "spot_overhead_pct", "reserved_estimated",
    "break_even_utilization", "risks", "flags", "reason", "is_current", "misfit",
    "speed_unknown", "speed_unknown_reason", "layout", "regions", "region_price_range", "reliability",
)


def json_number(x: float) -> float | None:
    """A float as the JSON reports write it: six decimals, null for NaN or infinity."""
    if not math.isfinite(x):
        return None
    return round(x, 6)


class Candidate(NamedTuple):
    """An offer as ranking sorts it, before it becomes a :class:`RankedOffer`."""

    key: float  # the sort key: cost per unit (or $/month when the unit is $/month or unknown)
    month: float  # USD per month of the whole offer (all its instances)
    seq: int  # catalog order, breaks ties
    instance: Any  # the catalog Instance
    pricing: str
    price: float  # list USD per hour of one instance
    placement: Any  # the ranking Placement of its device group
    acc: Any  # its Accelerator (the whole device, also for a GPU slice)
    regions: int = 1  # regions offering this instance type at this pricing (folded into one row)
    price_range: tuple = ()  # (lowest, highest) list USD/h of one instance over those regions
    scale: int = 1  # with a demand: the placement bought this many times (its replicas)
    plan: Any = None  # with a demand: the ServingPlan of its device group


class RankedOffers(Sequence["RankedOffer"]):
    """The ranked offers, each turned into a :class:`RankedOffer` when first read.

    Kept lazy because a bench shows it is needed (``bench/bench_recommend.py``, bundled catalog):
    ranking the ~6,700 fitting offers of the chat workload takes 3.1 ms, building every
    RankedOffer ("+ all objects") 113 ms; the CLI and the app read a page of 10-50.
    ``make(rank, candidate)`` builds one offer. Behaves like a tuple (index, slice, len, iteration,
    equality with a tuple) and pickles as one; an offer built twice by two threads is the same.
    """

    __slots__ = ("_candidates", "_make", "_made")

    def __init__(self, candidates: Sequence, make: Callable[[int, Any], "RankedOffer"]) -> None:
        self._candidates = candidates
        self._make = make
        self._made: dict[int, RankedOffer] = {}

    def __len__(self) -> int:
        return len(self._candidates)

    @overload
    def __getitem__(self, i: int) -> RankedOffer: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[RankedOffer, ...]: ...

    def __getitem__(self, i: int | slice) -> RankedOffer | tuple[RankedOffer, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self._candidates))))
        n = len(self._candidates)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("offer index out of range")
        offer = self._made.get(i)
        if offer is None:
            offer = self._made[i] = self._make(i + 1, self._candidates[i])
        return offer

    def __iter__(self) -> Iterator[RankedOffer]:
        for i in range(len(self._candidates)):
            yield self[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, (RankedOffers, tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"<{len(self)} ranked offers>"


@record
class Recommendation:
    workload: Any
    unit: str
    pricing: str
    schedule: Schedule
    offers: Sequence[RankedOffer]  # a tuple-like sequence, made lazily (see RankedOffers)
    current: RankedOffer | None
    fitting_offers: int  # offers that fit and meet every constraint (before ``top``)
    considered_rows: int  # catalog rows looked at
    skipped: tuple[tuple[str, int], ...]  # (reason, count), reasons in a fixed order
    constraints: tuple[tuple[str, Any], ...]
    notes: tuple[str, ...] = ()
    # fitting offer with the lowest $/h among those with a speed estimate (for explain)
    cheapest_per_hour: RankedOffer | None = None
    # fitting offers without a speed estimate (listed after the ranked ones when the unit is work)
    speed_unknown_offers: int = 0
    demand: Any = None  # the perf.serving_plan Demand ranked by (None: no capacity plan)
    # (accelerator, skip counter, why it cannot serve the demand), one per device dropped
    plan_dropped: tuple[tuple[str, str, str], ...] = ()

    @property
    def best(self) -> RankedOffer | None:
        return self.offers[0] if self.offers else None

    @property
    def skipped_counts(self) -> dict[str, int]:
        return dict(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": workload_summary(self.workload),
            "unit": self.unit,
            "pricing": self.pricing,
            "schedule": {"hours_per_month": self.schedule.hours_per_month,
                         "label": self.schedule.label},
            "constraints": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.constraints},
            "current": self.current.to_dict() if self.current else None,
            "offers": [o.to_dict() for o in self.offers],
            "fitting_offers": self.fitting_offers,
            "speed_unknown_offers": self.speed_unknown_offers,
            "considered_rows": self.considered_rows,
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        } | ({"demand": self.demand.to_dict(),
              "plan_dropped": [{"accelerator": a, "skipped_as": k, "reason": r}
                               for a, k, r in self.plan_dropped]}
             if self.demand is not None else {})


def workload_summary(w: Any) -> dict[str, Any]:
    model = getattr(w, "model", None)
    return {
        "kind": w.kind,
        "model": getattr(model, "id", None),
        "params": getattr(w, "params", None),
        "precision": w.precision,
        "batch": w.batch,
        "seq_len": w.seq_len,
        "prompt_len": w.prompt_len,
        "gen_len": w.gen_len,
        "serving": w.serving if w.kind == "inference" else None,
        "gpus": w.gpus,
        "sharding": w.sharding,
    }

