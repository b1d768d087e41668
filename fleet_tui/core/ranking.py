"""Rank every catalog offer that fits a workload by what a unit of its work costs.

An *offer* is one catalog row (instance type × region) under one pricing option (on-demand, spot,
reserved 1y/3y). Each offer runs the workload on **all the devices of its instance**; an instance
with 8 or more devices may also be taken several times (2, 4, 8 … up to ``max_instances``) when one
is not enough, the way large models are trained and served across nodes. Smaller instances are
never multiplied: spreading a model over many single-GPU boxes is not a sane deployment (nor are
TPU slices: the catalog lists every slice size). A fractional GPU (Azure's NVads A10 v5 slices) is
sized as that fraction of the device's memory, bandwidth and compute.

How a workload is placed on ``G`` devices: the workload's own sharding first; when that does not
fit and ``G > 1``, tensor parallelism for inference or FSDP/ZeRO-3 for training. The workload's
``gpus`` describes the current setup only; each offer is sized on its own device count.

The unit of work (what the ranking sorts by, cheapest first):

* inference, ``serving="interactive"``: **USD per month** of the always-available server at the
  schedule's hours (a chat endpoint is paid for whether it is busy or not);
* inference, ``serving="batch"``: **USD per 1M tokens** (output tokens when generating, input
  tokens for a forward pass), from the throughput model;
* training, fine-tuning, LoRA, QLoRA: **USD per training run** when ``training_tokens`` is given,
  else **USD per 1M training tokens**.

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
$/month and follow every offer with a speed estimate, cheapest per month first. A ``--latency-target-ms`` cannot be checked
without a speed: such rows are counted in ``skipped["latency_unknown_rows"]``. A current setup with
unknown speed gets no cost per unit and no savings; ``explain`` says why instead of comparing.

Nothing is ranked silently: catalog rows marked ``excluded`` are skipped and counted; rows with
``flags`` (suspicious prices) are ranked but carry the flag in ``flags``, ``risks`` and ``reason``
(a flag that names pricing options, e.g. "spot 0 in the source", is carried only by the offers of
those options; ``offer.instance.flags`` keeps them all).

Speed of the ranking: fit runs once per distinct (accelerator, devices per instance) pair (memory
once per placement), the speed estimate only where the unit needs it; every offer is then priced
with a few multiplications into a plain tuple whose first item (a float) is the sort key; they are
sorted (the garbage collector paused meanwhile). ``Recommendation.offers`` is a read-only,
tuple-like sequence that builds each :class:`RankedOffer` on first read, so a full ranking of the
bundled catalog (~6,000 fitting offers) takes a few ms and a 100,000-offer one well under 500 ms
(``bench/bench_recommend.py``); ``to_dict()`` builds the offers it serializes.

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
             "is_current", "misfit", "speed_unknown", "speed_unknown_reason"}

``rank`` is 0 for the current setup. Money is USD; ``*_pct`` are 0-100. ``tokens_per_s``,
``latency_ms``, ``speedup`` and (for work units) ``cost_per_unit``/``savings_*`` are null when the
speed is unknown.
"""

from __future__ import annotations

import difflib
import gc
import heapq
import math
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.pricing import (
    HOURS_PER_MONTH,
    PRICING_OPTIONS,
    RESERVED_OPTIONS,
    Schedule,
    SpotAssumptions,
    check_pricing,
    spot_cost_multiplier,
    spot_rate_source,
)

GIB = 1024**3
# Instance's public price fields (what Instance.price() reads), by pricing option
_PRICE_ATTR = {
    "on-demand": "on_demand_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "reserved-1y": "reserved_1y_usd_per_hour",
    "reserved-3y": "reserved_3y_usd_per_hour",
}
UNIT_MONTH = "USD/month"
UNIT_RUN = "USD/run"
MULTI_INSTANCE_MIN_DEVICES = 8  # only HPC-class boxes (NVLink + EFA/InfiniBand) are multiplied
DEFAULT_MAX_INSTANCES = 16
LOW_HEADROOM_FRACTION = 0.05  # under 5% of device memory free is a risk worth naming
# Leaving the CUDA ecosystem means porting kernels, compilers and serving engines.
STACK_MIGRATION_NOTE = {
    "Neuron": "AWS Neuron SDK (compile with neuronx; not every op/model is supported)",
    "SynapseAI": "Intel Gaudi SynapseAI (HPU graph mode; custom CUDA kernels must be ported)",
    "ROCm": "AMD ROCm (HIP; most PyTorch works, custom CUDA kernels and some engines need ports)",
    "XLA": "XLA/TPU (JAX or PyTorch/XLA; static shapes)",
    "CUDA": "NVIDIA CUDA",
    "other": "a vendor-specific stack",
}


# ------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
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
    fit: Any = field(default=None, compare=False)  # the sizing FitResult (not in JSON)
    throughput: Any = field(default=None, compare=False)  # the perf Throughput (not in JSON)

    @property
    def label(self) -> str:
        n = f"{self.instances}× " if self.instances > 1 else ""
        return f"{n}{self.instance_type} ({self.cloud} {self.region}, {self.pricing})"

    @property
    def devices(self) -> str:
        return devices_label(self.accelerator_count, self.accelerator, self.instances)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _OFFER_KEYS}
        out["risks"] = list(self.risks)
        out["flags"] = list(self.flags)
        return {k: (_clean(v) if isinstance(v, float) else v) for k, v in out.items()}


_OFFER_KEYS = (
    "rank", "cloud", "instance_type", "region", "accelerator", "vendor", "software_stack",
    "accelerator_count", "instances", "gpus", "sharding", "pricing", "list_usd_per_hour",
    "usd_per_hour", "usd_per_month", "usd_per_gpu_hour", "cost_per_unit", "unit", "tokens_per_s",
    "latency_ms", "headroom_gib", "memory_used_pct", "fits", "savings_usd_per_month",
    "savings_pct", "speedup", "spot_overhead_pct", "reserved_estimated",
    "break_even_utilization", "risks", "flags", "reason", "is_current", "misfit",
    "speed_unknown", "speed_unknown_reason",
)


def _clean(x: float) -> float | None:
    if not math.isfinite(x):
        return None
    return round(x, 6)


class _LazyOffers(Sequence):
    """The ranked offers, turned into :class:`RankedOffer` objects only when read.

    Ranking orders plain tuples; building a RankedOffer (reason text, risks, savings) costs far more
    than ranking it, and callers read a page at a time. Behaves like a tuple (index, slice, len,
    iteration, equality with a tuple); pickles and deep-copies as a tuple. Reading from several
    threads at once is safe: an offer built twice is built identically.
    """

    __slots__ = ("_cands", "_make", "_made")

    def __init__(self, cands: list, make) -> None:
        self._cands = cands
        self._make = make
        self._made: dict[int, RankedOffer] = {}

    def __len__(self) -> int:
        return len(self._cands)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._build(range(*i.indices(len(self._cands))))
        n = len(self._cands)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("offer index out of range")
        offer = self._made.get(i)
        if offer is None:
            offer = self._made[i] = self._make(i + 1, self._cands[i])
        return offer

    def __iter__(self):
        for i in range(len(self._cands)):
            yield self[i]

    def _build(self, indices: range) -> tuple[RankedOffer, ...]:
        """Many offers at once (slices, ``to_dict``), the garbage collector paused meanwhile."""
        was = gc.isenabled()
        gc.disable()
        try:
            return tuple(self[j] for j in indices)
        finally:
            if was:
                gc.enable()

    def all(self) -> tuple[RankedOffer, ...]:
        return self._build(range(len(self._cands)))

    def __eq__(self, other) -> bool:
        if isinstance(other, (_LazyOffers, tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (tuple, (self.all(),))

    def __repr__(self) -> str:
        return f"<{len(self)} ranked offers>"


@dataclass(frozen=True, slots=True)
class Recommendation:
    workload: Any
    unit: str
    pricing: str
    schedule: Schedule
    offers: Sequence[RankedOffer]  # a tuple-like sequence, made lazily (see _LazyOffers)
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
            "offers": [o.to_dict() for o in (self.offers.all() if isinstance(self.offers, _LazyOffers)
                                             else self.offers)],
            "fitting_offers": self.fitting_offers,
            "speed_unknown_offers": self.speed_unknown_offers,
            "considered_rows": self.considered_rows,
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        }


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


# ------------------------------------------------------------------------------------------------
# Sizing, once per (accelerator, devices) group


class _Sized:
    """Placement of the workload on one (accelerator, devices) group and what it achieves there.

    Fit is decided eagerly (ranking needs it); the full ``FitResult`` and the speed estimate are
    computed on first read: ranking by $/month reads neither, and only the offers shown need the
    ``FitResult``. Read-only from outside; a value computed twice by two threads is the same.
    """

    __slots__ = ("fits", "instances", "gpus", "sharding", "headroom_gib", "memory_used_pct",
                 "capacity_bytes", "why_not", "_ctx", "_fit", "_speed")

    def __init__(self, fits: bool, instances: int, gpus: int, sharding: str, *,
                 headroom_gib: float | None, memory_used_pct: float | None,
                 capacity_bytes: int | None, why_not: str = "", ctx: tuple | None = None,
                 fit: Any = None) -> None:
        self.fits = fits
        self.instances = instances
        self.gpus = gpus
        self.sharding = sharding
        self.headroom_gib = headroom_gib
        self.memory_used_pct = memory_used_pct
        self.capacity_bytes = capacity_bytes
        self.why_not = why_not
        # (sizing module, perf module, workload variant, accelerator, unit kind, training tokens);
        # None for a misfit sized without detail (no fit object, no speed)
        self._ctx = ctx
        self._fit = fit
        self._speed: tuple | None = None

    @property
    def fit(self):
        if self._fit is None and self._ctx is not None:
            sizing, _perf, w, acc, _unit, _tokens = self._ctx
            self._fit = sizing.check_fit(w, acc, self.gpus)
        return self._fit

    def _speed_values(self) -> tuple:
        """(throughput, tokens/s, latency ms, run seconds, work units per hour, speed note)."""
        if self._speed is not None:
            return self._speed
        if self._ctx is None:
            self._speed = (None, None, None, None, None, "")
            return self._speed
        _sizing, perf, w, acc, unit_kind, training_tokens = self._ctx
        tp = perf.estimate_throughput(w, acc, self.gpus)
        tps = tp.tokens_per_s
        if tps is not None and not (tps > 0 and math.isfinite(tps)):
            tps = None
        note = "" if tps is not None else (tp.unknown or "no speed estimate")
        latency_ms = None
        if w.kind == "inference":
            per_token = tp.time_per_output_token_s or tp.step_s
            latency_ms = per_token * 1000.0 if per_token else None
        run_seconds = units_per_hour = None
        if unit_kind == "tokens" and tps:
            units_per_hour = tps * 3600.0 / 1e6
        elif unit_kind == "run" and training_tokens and tps:
            # as perf.training_run: tokens / training tokens per second
            run_seconds = training_tokens / tps
            units_per_hour = 3600.0 / run_seconds
        self._speed = (tp, tps, latency_ms, run_seconds, units_per_hour, note)
        return self._speed

    throughput = property(lambda self: self._speed_values()[0])
    tokens_per_s = property(lambda self: self._speed_values()[1])
    latency_ms = property(lambda self: self._speed_values()[2])
    run_seconds = property(lambda self: self._speed_values()[3])
    units_per_hour = property(lambda self: self._speed_values()[4])  # None for $/month or unknown
    speed_note = property(lambda self: self._speed_values()[5])  # why the speed is unknown


def _sharding_order(workload) -> tuple[str, ...]:
    alt = "tensor" if workload.kind == "inference" else "fsdp"
    return (workload.sharding,) if workload.sharding == alt else (workload.sharding, alt)


def _describe_misfit(fit, acc, gpus: int) -> str:
    if getattr(fit, "precision_supported", True) is False:
        return f"{acc.id} cannot run this precision"
    cap = getattr(fit, "capacity_bytes", None)
    head = getattr(fit, "headroom_bytes", None)
    if cap and head is not None:
        need = (cap - head) / GIB
        return f"needs {need:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB (×{gpus})"
    return f"does not fit {gpus}× {acc.id}"


def slice_accelerator(acc, fraction: float):
    """A fractional GPU (Azure NVads A10 v5 partitions): ``fraction`` of its memory and speed."""
    hit = _SLICES.get((id(acc), fraction))
    if hit is not None and hit[0] is acc:
        return hit[1]
    bw = acc.memory_bandwidth_gbs
    sliced = acc.model_copy(update={
        "id": f"{acc.id}[{fraction:g}]",
        "memory_gib": acc.memory_gib * fraction,
        "memory_bandwidth_gbs": bw * fraction if bw else bw,
        "peak_tflops": {k: v * fraction for k, v in acc.peak_tflops.items()},
    })
    _SLICES[(id(acc), fraction)] = (acc, sliced)
    return sliced


_SIZED_CACHE: OrderedDict[tuple, dict] = OrderedDict()  # per workload: sizing of device groups
_SIZED_CACHE_WORKLOADS = 32
_SIZED_LOCK = threading.Lock()


class _Engine:
    """Sizing and speed for one workload, memoised per (accelerator, devices, instances).

    The memo outlives one ranking (bounded to the last few workloads), so re-ranking after a
    constraint or pricing change does no sizing at all.
    """

    def __init__(self, workload, *, training_tokens: float | None, unit_kind: str,
                 max_instances: int):
        from fleet_tui.core import perf, sizing  # imported here to keep `import ranking` light

        self._sizing = sizing
        self._perf = perf
        self.workload = workload
        self.training_tokens = training_tokens
        self.unit_kind = unit_kind  # "month", "tokens", "run"
        self.max_instances = max_instances
        key = (workload, training_tokens, unit_kind, max_instances)
        with _SIZED_LOCK:
            memo = _SIZED_CACHE.get(key)
            if memo is None:
                memo = _SIZED_CACHE[key] = {}
                while len(_SIZED_CACHE) > _SIZED_CACHE_WORKLOADS:
                    _SIZED_CACHE.popitem(last=False)
            else:
                _SIZED_CACHE.move_to_end(key)
        self._memo = memo
        self._variants: dict[tuple[int, str], Any] = {}
        self._need: dict[tuple[int, str], int] = {}  # per-GPU bytes by placement
        self._prec: dict[int, bool] = {}  # precision allowed, by accelerator object id
        self._weights_bytes: float | None = None  # stored weights of the whole model
        from fleet_tui.core import calibration as cal

        self._fixed_bytes = cal.DRIVER_RESERVE_BYTES + cal.CUDA_CONTEXT_BYTES

    def _variant(self, gpus: int, sharding: str):
        key = (gpus, sharding)
        w = self._variants.get(key)
        if w is None:
            w = self.workload.model_copy(update={"gpus": gpus, "sharding": sharding})
            self._variants[key] = w
        return w

    def _quick_fit(self, w, acc, gpus: int, *, exact: bool = True) -> tuple[bool, int, int, bool]:
        """(fits, headroom_bytes, capacity_bytes, precision_ok) exactly as ``check_fit`` decides,
        without the search for suggestions that ``check_fit`` runs on a misfit.

        Memory per GPU depends on the placement only, not on the device: it is looked up once per
        (gpus, sharding) here instead of hashing the workload model for every accelerator."""
        sz = self._sizing
        mkey = (gpus, w.sharding)
        need = self._need.get(mkey)
        cap = sz.capacity_bytes(acc)
        if need is None:
            if not exact:
                # a placement whose stored weights alone (plus the driver reserve and context,
                # which every estimate includes) overflow the device cannot fit: skip the full
                # estimate (most misfits of a big model on small devices end here)
                floor = self._floor(w, gpus)
                if floor > cap:
                    return False, cap - floor, cap, True
            need = self._need[mkey] = sz.estimate_memory(w, gpus).total_bytes
        prec_ok = self._prec.get(id(acc))
        if prec_ok is None:
            prec_ok = self._prec[id(acc)] = sz.precision_support(w.precision, acc)[0]
        return (need <= cap and prec_ok), cap - need, cap, prec_ok

    def _floor(self, w, gpus: int) -> float:
        """A lower bound of ``estimate_memory(w, gpus)``: weights per GPU + fixed overheads."""
        sz = self._sizing
        if self._weights_bytes is None:
            from fleet_tui.core.modelspec import param_counts

            self._weights_bytes = sz.weight_bytes(w, param_counts(w.arch))
        _dp, tp, shard = sz.parallel_split(w, gpus)
        return self._weights_bytes / (tp * shard) + self._fixed_bytes - 64  # (per-part rounding)

    def size(self, acc, devices: int, instances: int | None = None, *,
             detail: bool = False) -> _Sized:
        """Smallest placement that fits; ``instances`` fixed (current setup) or searched.

        ``detail`` also sizes a placement that does not fit (speed, fit suggestions), as the
        current setup's report needs.
        """
        key = (id(acc), devices, instances, detail)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is acc:
            return hit[1]
        if instances is not None:
            counts = (instances,)
        elif devices >= MULTI_INSTANCE_MIN_DEVICES and acc.software_stack != "XLA":
            # (TPU slices come in every size as catalog rows; no need to multiply them)
            counts = tuple(n for n in (1, 2, 4, 8, 16, 32, 64) if n <= self.max_instances) or (1,)
        else:
            counts = (1,)
        first = chosen = None
        for n in counts:
            gpus = devices * n
            for sharding in (_sharding_order(self.workload) if gpus > 1 else (self.workload.sharding,)):
                w = self._variant(gpus, sharding)
                q = self._quick_fit(w, acc, gpus, exact=detail)
                # when nothing fits, report the attempt that came closest
                if first is None or (q[3] and not first[4][3]) or (
                        q[3] == first[4][3] and q[1] > first[4][1]):
                    first = (w, gpus, n, sharding, q)
                if q[0]:
                    chosen = (w, gpus, n, sharding, q)
                    break
            if chosen:
                break
        w, gpus, n, sharding, (ok, head, cap, prec_ok) = chosen or first
        if chosen is None and not detail:
            why = (f"{acc.id} cannot run {w.precision}" if not prec_ok else
                   f"needs {(cap - head) / GIB:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB")
            result = _Sized(False, n, gpus, sharding, headroom_gib=head / GIB,
                            memory_used_pct=100.0 * (cap - head) / cap if cap else None,
                            capacity_bytes=cap, why_not=why)
        else:
            result = self._finish(w, acc, gpus, n, sharding, fits=chosen is not None, quick=(head, cap))
        self._memo[key] = (acc, result)
        return result

    def _finish(self, w, acc, gpus, n, sharding, *, fits: bool, quick: tuple[int, int]) -> _Sized:
        head, cap = quick  # exactly what check_fit reports (same memory estimate and capacity)
        ctx = (self._sizing, self._perf, w, acc, self.unit_kind, self.training_tokens)
        sized = _Sized(fits, n, gpus, sharding, headroom_gib=head / GIB,
                       memory_used_pct=100.0 * (cap - head) / cap if cap else None,
                       capacity_bytes=cap, ctx=ctx)
        if not fits:  # the current setup's report: say why, from the full fit check
            sized.why_not = _describe_misfit(sized.fit, acc, gpus)
        return sized


# ------------------------------------------------------------------------------------------------
# Input checking


def _as_set(values, what: str, allowed: Iterable[str], flag: str) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    items = [v.strip() for raw in values for v in str(raw).split(",") if v.strip()]
    if not items:
        return None
    known = {a.lower(): a for a in allowed if a}
    out = set()
    for item in items:
        if item.lower() not in known:
            near = difflib.get_close_matches(item.lower(), list(known), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(known[n] for n in near)}?" if near else ""
            listing = ", ".join(sorted(known.values())) if len(known) <= 40 else f"{len(known)} known"
            raise UserError(f"{flag} {item!r}: unknown {what}{hint} (allowed: {listing})")
        out.add(item.lower())
    return frozenset(out)


def _accelerator_index(catalog) -> dict[str, Any]:
    accs = catalog.accelerators
    values = accs.values() if isinstance(accs, dict) else accs
    index: dict[str, Any] = {}
    for a in values:
        index[a.id] = a
    for a in values:  # aliases never shadow an id
        for alias in getattr(a, "aliases", ()) or ():
            index.setdefault(alias, a)
    return index


def _unit_for(workload, training_tokens) -> tuple[str, str]:
    """(unit_kind, unit name)."""
    if workload.kind == "inference":
        if workload.serving == "interactive":
            return "month", UNIT_MONTH
        return "tokens", ("USD/1M output tokens" if workload.gen_len else "USD/1M input tokens")
    if training_tokens:
        return "run", UNIT_RUN
    return "tokens", "USD/1M training tokens"


def _schedule(hours_per_month) -> Schedule:
    if isinstance(hours_per_month, Schedule):
        return hours_per_month
    if hours_per_month is None:
        return Schedule.always_on()
    return Schedule(hours_per_month)


class _Multipliers:
    """Effective-price factor per (pricing, cloud): see ``pricing.cost_multiplier``."""

    def __init__(self, schedule: Schedule, spot: SpotAssumptions, *, stateless: bool):
        self.reserved = HOURS_PER_MONTH / schedule.hours_per_month
        self.spot = spot
        self.stateless = stateless
        self._cache: dict[tuple[str, str], float] = {}

    def __call__(self, p: str, cloud: str) -> float:
        m = self._cache.get((p, cloud))
        if m is None:
            if p == "spot":
                m = spot_cost_multiplier(self.spot.overhead_fraction(cloud, stateless=self.stateless))
            elif p in RESERVED_OPTIONS:
                m = self.reserved
            else:
                m = 1.0
            self._cache[(p, cloud)] = m
        return m


@dataclass(frozen=True, slots=True)
class _Group:
    acc: Any
    devices: int  # per instance (1 for a slice)
    fraction: float | None  # a GPU slice's share of one device, else None
    vendor_key: str
    rows: tuple  # (instance, cloud lower, region lower, prices in PRICING_OPTIONS order)


@dataclass(frozen=True, slots=True)
class _Index:
    instances: list  # the catalog's list this index was built from (identity checked)
    size: int
    accs: dict
    groups: tuple[_Group, ...]
    excluded: int
    no_spec: int
    odd_count: int
    clouds: frozenset[str]
    regions: frozenset[str]
    vendors: frozenset[str]
    stacks: frozenset[str]


_INDEX_CACHE: dict[int, _Index] = {}


def vendor_key(vendor: str) -> str:
    """``NVIDIA (AWS-specific SKU)`` -> ``nvidia``: the company, for --vendor filters."""
    return vendor.split("(")[0].strip().lower()


def _catalog_index(catalog) -> _Index:
    """Catalog rows grouped by (accelerator, devices), prices pulled out; built once per catalog."""
    instances = catalog.instances
    hit = _INDEX_CACHE.get(id(catalog))
    if hit is not None and hit.instances is instances and hit.size == len(instances):
        return hit
    accs = _accelerator_index(catalog)
    groups: dict[tuple[str, float], list] = {}
    excluded = no_spec = odd = 0
    for inst in instances:
        if inst.excluded:
            excluded += 1
            continue
        acc = accs.get(inst.accelerator)
        if acc is None:
            no_spec += 1
            continue
        count = inst.accelerator_count
        if count >= 1 and count != int(count):  # 1.5 devices: not a real configuration
            odd += 1
            continue
        # Instance.price() semantics: None when not offered or that option is excluded
        prices = tuple(None if p in inst.excluded_pricing else getattr(inst, _PRICE_ATTR[p])
                       for p in PRICING_OPTIONS)
        groups.setdefault((acc.id, count), []).append(
            (inst, inst.cloud.lower(), inst.region.lower(), prices))
    built = tuple(
        _Group(acc=accs[acc_id], devices=int(count) if count >= 1 else 1,
               fraction=None if count >= 1 else count, vendor_key=vendor_key(accs[acc_id].vendor),
               rows=tuple(rows))
        for (acc_id, count), rows in groups.items()
    )
    values = {a.id: a for a in accs.values()}.values()
    index = _Index(
        instances=instances, size=len(instances), accs=accs, groups=built, excluded=excluded,
        no_spec=no_spec, odd_count=odd,
        clouds=frozenset(i.cloud for i in instances), regions=frozenset(i.region for i in instances),
        vendors=frozenset(a.vendor.split("(")[0].strip() for a in values),
        stacks=frozenset(a.software_stack for a in values),
    )
    if len(_INDEX_CACHE) > 8:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[id(catalog)] = index
    return index


_SLICES: dict[tuple[int, float], tuple[Any, Any]] = {}
#: Offers sort by their first item alone (a float: Python's sort compares floats natively, several
#: times faster than tuples); the sort is stable and offers are collected in catalog order, so equal
#: costs keep catalog order.
_SORT_KEY = operator.itemgetter(0)


# ------------------------------------------------------------------------------------------------
# Ranking


_SKIP_ORDER = (
    "excluded_rows", "filtered_rows", "no_accelerator_spec_rows", "odd_device_count_rows",
    "not_fitting_rows", "too_slow_rows", "unpriced_offers", "over_budget_offers",
    "latency_unknown_rows",
)


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
    pricing: str = "on-demand",
    spot_allowed: bool = True,
    hours_per_month: float | Schedule | None = HOURS_PER_MONTH,
    latency_target_ms: float | None = None,
    budget_usd_per_month: float | None = None,
    top: int | None = None,
    training_tokens: float | None = None,
    spot: SpotAssumptions | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
) -> Recommendation:
    """Rank every catalog offer that fits ``workload``; see the module docstring for the rules."""
    check_pricing(pricing, allow_any=True)
    if pricing == "spot" and not spot_allowed:
        raise UserError("--pricing spot contradicts spot_allowed=False (--no-spot)")
    options = PRICING_OPTIONS if pricing == "any" else (pricing,)
    if not spot_allowed:
        options = tuple(p for p in options if p != "spot")
    schedule = _schedule(hours_per_month)
    spot = spot or SpotAssumptions()
    if top is not None and (not isinstance(top, int) or top < 1):
        raise UserError(f"--top must be a whole number >= 1, got {top!r}")
    if latency_target_ms is not None:
        if not (isinstance(latency_target_ms, (int, float)) and latency_target_ms > 0
                and math.isfinite(latency_target_ms)):
            raise UserError(f"--latency-target-ms must be a number > 0, got {latency_target_ms!r}")
        if workload.kind != "inference":
            raise UserError("--latency-target-ms applies to inference workloads only")
    if budget_usd_per_month is not None and not (
        isinstance(budget_usd_per_month, (int, float)) and budget_usd_per_month > 0
        and math.isfinite(budget_usd_per_month)
    ):
        raise UserError(f"--budget must be a number of USD per month > 0, got {budget_usd_per_month!r}")
    if training_tokens is not None:
        if workload.kind == "inference":
            raise UserError("--training-tokens applies to training workloads only")
        if not (training_tokens > 0 and math.isfinite(training_tokens)):
            raise UserError(f"--training-tokens must be > 0, got {training_tokens!r}")
    if not isinstance(max_instances, int) or max_instances < 1:
        raise UserError(f"max instances must be a whole number >= 1, got {max_instances!r}")

    index = _catalog_index(catalog)
    instances = catalog.instances
    accs = index.accs
    cloud_set = _as_set(clouds, "cloud", index.clouds, "--cloud")
    region_set = _as_set(regions, "region", index.regions, "--region")
    vendor_set = _as_set(vendors, "vendor", index.vendors, "--vendor")
    stack_set = _as_set(stacks, "software stack", index.stacks, "--stack")

    unit_kind, unit = _unit_for(workload, training_tokens)
    engine = _Engine(workload, training_tokens=training_tokens, unit_kind=unit_kind,
                     max_instances=max_instances)
    hours = schedule.hours_per_month
    stateless = workload.kind == "inference"
    mult = _Multipliers(schedule, spot, stateless=stateless)

    skipped = dict.fromkeys(_SKIP_ORDER, 0)
    skipped["excluded_rows"] = index.excluded
    skipped["no_accelerator_spec_rows"] = index.no_spec
    skipped["odd_device_count_rows"] = index.odd_count
    # Candidates are plain tuples, ranked by their first items; RankedOffer objects are only made
    # for the offers somebody reads (see _LazyOffers). Offers whose speed is unknown cannot be
    # costed per unit of work: they go to ``unknown`` and are listed after every ranked offer.
    cands: list[tuple] = []
    unknown: list[tuple] = []
    unknown_notes: dict[str, str] = {}  # accelerator -> why its speed is unknown
    option_slots = tuple((p, PRICING_OPTIONS.index(p)) for p in options)
    cloud_prices: dict[str, tuple] = {}
    per_month = unit_kind == "month"
    budget = math.inf if budget_usd_per_month is None else budget_usd_per_month
    unpriced = over_budget = filtered = 0
    cheapest_eff, cheapest_cand = math.inf, None
    # The loop allocates one small tuple per offer: with the garbage collector on, 100k of them
    # trigger repeated collections that walk every live object (the catalog's models included),
    # which costs more than the ranking itself. Nothing here creates reference cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        seq = 0
        for group in index.groups:
            acc = group.acc
            rows = group.rows
            if (vendor_set is not None and group.vendor_key not in vendor_set) or (
                    stack_set is not None and acc.software_stack.lower() not in stack_set):
                filtered += len(rows)
                continue
            if cloud_set is not None or region_set is not None:
                kept = [r for r in rows if (cloud_set is None or r[1] in cloud_set)
                        and (region_set is None or r[2] in region_set)]
                filtered += len(rows) - len(kept)
                rows = kept
                if not rows:
                    continue
            if group.fraction is None:
                sized = engine.size(acc, group.devices)
            else:  # a GPU slice (e.g. 1/6 of an A10): that share of memory, bandwidth, compute
                sized = engine.size(slice_accelerator(acc, group.fraction), 1)
            if not sized.fits:
                skipped["not_fitting_rows"] += len(rows)
                continue
            if latency_target_ms is not None:
                if sized.latency_ms is None:
                    skipped["latency_unknown_rows"] += len(rows)
                    continue
                if sized.latency_ms > latency_target_ms:
                    skipped["too_slow_rows"] += len(rows)
                    continue
            n = sized.instances
            if per_month:
                # $/month needs no speed to be priced, but an always-on server whose speed cannot
                # be estimated cannot be said to serve the load: it follows every offer that can.
                out = unknown if sized.tokens_per_s is None else cands
                per_unit, neg_tps, track_cheapest = 0.0, 0.0, False
            else:
                uph = sized.units_per_hour
                if uph is None:
                    out, per_unit = unknown, 0.0
                else:
                    out, per_unit = cands, 1.0 / uph
                neg_tps = -(sized.tokens_per_s or 0.0)
                track_cheapest = uph is not None
            # noted only for offers that stay (within budget, priced): the note lists their devices
            speed_note = sized.speed_note if out is unknown else None
            for inst, _cloud_key, _region_key, prices in rows:
                cloud = inst.cloud
                per_cloud = cloud_prices.get(cloud)
                if per_cloud is None:
                    per_cloud = cloud_prices[cloud] = tuple(
                        (p, i, mult(p, cloud) * hours) for p, i in option_slots)
                for p, i, m_hours in per_cloud:
                    price = prices[i]
                    if price is None:
                        unpriced += 1
                        continue
                    month = price * n * m_hours
                    if month > budget:
                        over_budget += 1
                        continue
                    # sort key first: cheapest unit (or month when the unit is $/month or the
                    # speed is unknown); equal keys keep catalog order (seq)
                    cand = (month * per_unit / hours if per_unit else month, month, neg_tps, seq,
                            inst, p, price, sized, acc)
                    out.append(cand)
                    if speed_note is not None:
                        unknown_notes.setdefault(acc.id, speed_note)
                    if track_cheapest and month < cheapest_eff:
                        cheapest_eff, cheapest_cand = month, cand
                    seq += 1
        skipped["filtered_rows"] = filtered
        skipped["unpriced_offers"] = unpriced
        skipped["over_budget_offers"] = over_budget

        fitting = len(cands) + len(unknown)
        if top is None or top * 8 >= len(cands):
            cands.sort(key=_SORT_KEY)
            chosen = cands if top is None else cands[:top]
        else:
            chosen = heapq.nsmallest(top, cands, key=_SORT_KEY)
        if unknown and (top is None or len(chosen) < top):
            unknown.sort(key=_SORT_KEY)
            chosen = chosen + (unknown if top is None else unknown[:top - len(chosen)])
    finally:
        if gc_was_enabled:
            gc.enable()

    cur = None
    notes: list[str] = []
    if current is not None:
        cur, cur_notes = _current_offer(
            engine, catalog, accs, current, current_region, current_pricing or (
                pricing if pricing != "any" else "on-demand"),
            mult=mult, schedule=schedule, unit=unit, unit_kind=unit_kind, spot=spot,
        )
        notes.extend(cur_notes)
    cur_stack = cur.software_stack if cur else "CUDA"

    make = _OfferMaker(unit=unit, current=cur, current_stack=cur_stack, spot=spot,
                       stateless=stateless, schedule=schedule, hours=hours, per_month=per_month)
    offers = _LazyOffers(chosen, make)
    cheapest = None
    if per_month:  # ranked by $/month = effective $/h × hours: the cheapest per hour is the best
        cheapest = offers[0] if chosen else None
    elif cheapest_cand is not None:
        if chosen and cheapest_cand is chosen[0]:
            cheapest = offers[0]
        else:
            k0, s0 = cheapest_cand[0], cheapest_cand[3]
            cheapest = make(1 + sum(1 for c in cands if c[0] < k0 or (c[0] == k0 and c[3] < s0)),
                            cheapest_cand)
    if skipped["excluded_rows"]:
        notes.append(f"{skipped['excluded_rows']} catalog rows excluded by validation "
                     "(placeholder/zero prices and similar) were not ranked")
    if unknown_notes:
        ids = list(unknown_notes)
        devices = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        why = (unknown_notes[ids[0]] if len(ids) == 1 else
               "their catalog entries lack the published peak or memory bandwidth it needs")
        if unknown and per_month:
            notes.append(f"{len(unknown)} fitting offers on {devices} have no speed estimate ({why}): "
                         f"whether they keep up with the load cannot be checked, so they are listed "
                         + (f"after the {len(cands)} offers with one, cheapest per month first"
                            if cands else "cheapest per month first"))
        elif unknown:
            notes.append(f"{len(unknown)} fitting offers on {devices} have no speed estimate ({why}): "
                         f"they cannot be costed per {unit.removeprefix('USD/')} and are listed "
                         f"after the {len(cands)} ranked offers, cheapest per hour first")
    if not fitting:
        notes.append("no offer fits under the given constraints")

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
        ("top", top),
    )
    return Recommendation(
        workload=workload, unit=unit, pricing=pricing, schedule=schedule, offers=offers,
        current=cur, fitting_offers=fitting, considered_rows=len(instances),
        skipped=tuple((k, skipped[k]) for k in _SKIP_ORDER), constraints=constraints,
        notes=tuple(notes), cheapest_per_hour=cheapest, speed_unknown_offers=len(unknown),
    )


def _risks(inst, acc, sized: _Sized, p: str, *, current_stack: str, spot_overhead: float,
           spot: SpotAssumptions) -> tuple[str, ...]:
    risks = []
    if p == "spot":
        rate = spot.rate_for(inst.cloud)
        risks.append(
            f"spot: ~{rate * HOURS_PER_MONTH:.2g} interruptions/month "
            f"({spot_rate_source(inst.cloud)}), {spot_overhead:.1%} of time lost to restarts"
        )
    if p in RESERVED_OPTIONS:
        term = "1-year" if p == "reserved-1y" else "3-year"
        risks.append(f"{term} commitment: billed every hour of the term")
        if getattr(inst, "reserved_estimated", False):
            risks.append("reserved price estimated from a typical discount, not published")
    if acc.software_stack != current_stack:
        risks.append(f"software stack migration {current_stack} → "
                     f"{STACK_MIGRATION_NOTE.get(acc.software_stack, acc.software_stack)}")
    if sized.instances > 1:
        risks.append(f"multi-node: {sized.instances} instances, depends on the inter-node network")
    head = sized.headroom_gib
    cap = sized.capacity_bytes
    if head is not None and cap and head * GIB < LOW_HEADROOM_FRACTION * cap:
        risks.append(f"tight memory: {head:.1f} GiB free per device")
    for flag in _applicable_flags(inst.flags, p):
        risks.append(f"catalog flag: {flag}")
    return tuple(risks)


_FLAG_TERMS = {"on-demand": "on-demand", "spot": "spot", "reserved-1y": "reserved",
               "reserved-3y": "reserved"}


def _applicable_flags(flags, pricing: str) -> tuple[str, ...]:
    """The row's flags that concern this pricing option.

    A flag naming pricing options ("zero-price: spot 0 in the source (dropped)", "price-outlier:
    on-demand 1.54x the median") concerns only those; a flag naming none (a memory unit fix, a
    filled-in accelerator) concerns every offer of the row. The full list stays on the Instance.
    """
    if not flags:
        return ()
    term = _FLAG_TERMS[pricing]
    out = []
    for flag in flags:
        low = flag.lower()
        named = [t for t in ("on-demand", "spot", "reserved") if t in low]
        if not named or term in named:
            out.append(flag)
    return tuple(out)


_UNSET: Any = object()


class _OfferMaker:
    """Builds :class:`RankedOffer` objects; text shared by many offers is built once."""

    def __init__(self, *, unit: str, current, current_stack: str, spot: SpotAssumptions,
                 stateless: bool, schedule: Schedule, hours: float | None = None,
                 per_month: bool | None = None):
        self.unit = unit
        self.hours = schedule.hours_per_month if hours is None else hours
        self.per_month = unit == UNIT_MONTH if per_month is None else per_month
        self.per = unit.removeprefix("USD/")
        self.current = current
        self.current_stack = current_stack
        self.spot = spot
        self.stateless = stateless
        self.schedule = schedule
        self._risks: dict[tuple, tuple[str, ...]] = {}
        self._text: dict[tuple, tuple[str, str]] = {}
        self._overhead: dict[str, float] = {}

    def __call__(self, rank: int, c: tuple, *, is_current: bool = False,
                 cost_per_unit: Any = _UNSET) -> RankedOffer:
        key, month, _neg_tps, _seq, inst, p, price, sized, acc = c
        eff = month / self.hours if self.hours else math.nan
        speed_unknown = bool(sized.speed_note) or (sized.fits and sized.tokens_per_s is None)
        costed = self.per_month or sized.units_per_hour is not None
        cpu = key if costed else None
        if cost_per_unit is not _UNSET:
            cpu = cost_per_unit
        cloud = inst.cloud
        overhead = 0.0
        if p == "spot":
            overhead = self._overhead.get(cloud)
            if overhead is None:
                overhead = self._overhead[cloud] = self.spot.overhead_fraction(
                    cloud, stateless=self.stateless)
        break_even = None
        estimated = False
        if p in RESERVED_OPTIONS:
            od = inst.price("on-demand")
            if od:
                break_even = price / od
            estimated = bool(getattr(inst, "reserved_estimated", False))
        savings_usd = savings_pct = speedup = None
        current = self.current
        if current is not None and not is_current:
            if current.cost_per_unit and cpu is not None and current.fits:
                frac = 1.0 - cpu / current.cost_per_unit
                savings_pct = 100.0 * frac
                savings_usd = current.usd_per_month * frac
            if current.tokens_per_s and sized.tokens_per_s:
                speedup = sized.tokens_per_s / current.tokens_per_s
        flags = _applicable_flags(inst.flags, p)
        rkey = (id(sized), p, cloud, flags, estimated, acc.id)
        risks = self._risks.get(rkey)
        if risks is None:
            risks = self._risks[rkey] = _risks(
                inst, acc, sized, p, current_stack=self.current_stack, spot_overhead=overhead,
                spot=self.spot)
        fits = sized.fits
        if is_current:
            reason = "current setup" + ("" if fits else f": does not fit ({sized.why_not})")
        else:
            tkey = (id(sized), acc.id, inst.accelerator_count, p, flags)
            text = self._text.get(tkey)
            if text is None:
                text = self._text[tkey] = _reason_text(acc, inst, sized, p, flags)
            parts = [text[0], f"{money(cpu)} per {self.per}" if costed else
                     f"speed unknown ({sized.speed_note}), so not ranked by cost per {self.per}"]
            if text[1]:
                parts.append(text[1])
            if savings_pct is not None:
                parts.append(f"{savings_pct:.0f}% cheaper than current" if savings_pct >= 0
                             else f"{-savings_pct:.0f}% dearer than current")
            if break_even:
                side = "above" if self.schedule.utilization >= break_even else "below"
                parts.append(f"use {side} the {break_even:.0%} break-even")
            if text[2]:
                parts.append(text[2])
            reason = parts[0] + ": " + ", ".join(parts[1:])
        return RankedOffer(
            rank=rank, instance=inst, cloud=cloud, instance_type=inst.instance_type,
            region=inst.region, accelerator=acc.id, vendor=acc.vendor,
            software_stack=acc.software_stack, accelerator_count=inst.accelerator_count,
            instances=sized.instances, gpus=sized.gpus, sharding=sized.sharding, pricing=p,
            list_usd_per_hour=price, usd_per_hour=eff, usd_per_month=month,
            usd_per_gpu_hour=eff / (inst.accelerator_count * sized.instances), cost_per_unit=cpu,
            unit=self.unit, tokens_per_s=sized.tokens_per_s, latency_ms=sized.latency_ms,
            headroom_gib=sized.headroom_gib, memory_used_pct=sized.memory_used_pct,
            fits=fits, savings_usd_per_month=savings_usd, savings_pct=savings_pct,
            speedup=speedup, spot_overhead_pct=100.0 * overhead, reserved_estimated=estimated,
            break_even_utilization=break_even, risks=risks, flags=flags, reason=reason,
            is_current=is_current, misfit=sized.why_not, speed_unknown=speed_unknown,
            speed_unknown_reason=(sized.speed_note or "no speed estimate") if speed_unknown else "",
            fit=sized.fit,
            throughput=sized.throughput,
        )


def _reason_text(acc, inst, sized: _Sized, p: str, flags) -> tuple[str, str, str]:
    """(devices, speed and memory, trailing notes) of an offer's one-line reason."""
    mid = []
    if sized.tokens_per_s:
        mid.append(f"{sized.tokens_per_s:,.0f} tok/s")
    if sized.headroom_gib is not None:
        mid.append(f"{sized.headroom_gib:.1f} GiB free/device")
    tail = []
    if p == "spot":
        tail.append("spot")
    if acc.software_stack != "CUDA":
        tail.append(f"{acc.software_stack} stack")
    if flags:
        tail.append("catalog flag: " + "; ".join(flags))  # price or data notes from the import
    return (devices_label(inst.accelerator_count, acc.id, sized.instances), ", ".join(mid),
            ", ".join(tail))


def money(x: float | None) -> str:
    """Dollars as the tables and explanations print them: cents below $1,000, whole dollars
    above, four decimals below $1 (a per-token or per-sample cost)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    sign, x = ("-" if x < 0 else ""), abs(x)
    if x >= 1000:
        return f"{sign}${x:,.0f}"
    if x >= 1:
        return f"{sign}${x:,.2f}"
    return f"{sign}${x:.4f}"


def devices_label(count: float, accelerator: str, instances: int = 1) -> str:
    """``8× H100``, ``2×8× H100`` (two instances), ``0.167× A10`` (a GPU slice)."""
    n = f"{count:g}" if count != int(count) else f"{int(count)}"
    return (f"{instances}×" if instances > 1 else "") + f"{n}× {accelerator}"


def _current_offer(engine: _Engine, catalog, accs, current, region, pricing, *, mult, schedule,
                   unit, unit_kind, spot) -> tuple[RankedOffer, list[str]]:
    try:
        instance_type, count = current
    except (TypeError, ValueError):
        raise UserError("current setup must be (instance type, count)") from None
    if not isinstance(count, int) or count < 1:
        raise UserError(f"--current-count must be a whole number >= 1, got {count!r}")
    try:
        rows = catalog.find_instance(instance_type)
    except UserError as exc:
        raise UserError(f"--current: {exc}") from None
    if region:
        in_region = [r for r in rows if r.region.lower() == region.lower()]
        if not in_region:
            have = sorted({r.region for r in rows})
            near = difflib.get_close_matches(region, have, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise UserError(f"--current-region {region!r}: {instance_type} is not offered there"
                            f"{hint} (offered in: {', '.join(have)})")
        rows = in_region
    notes: list[str] = []
    order = (pricing,) + tuple(p for p in ("on-demand", "reserved-1y", "reserved-3y", "spot")
                               if p != pricing)
    best = None
    for p in order:
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
    acc = accs.get(row.accelerator)
    if acc is None:
        raise UserError(f"--current {instance_type}: its accelerator {row.accelerator!r} has no "
                        "spec in the catalog, so it cannot be sized")
    devices = max(int(round(row.accelerator_count)), 1)
    if row.accelerator_count < 1:
        sized = engine.size(slice_accelerator(acc, row.accelerator_count), 1, instances=count,
                            detail=True)
    else:
        sized = engine.size(acc, devices, instances=count, detail=True)
    eff = price * count * mult(p, row.cloud)
    month = eff * schedule.hours_per_month
    if unit_kind == "month":
        cpu = month
    elif sized.units_per_hour and sized.fits:
        cpu = eff / sized.units_per_hour
    else:
        cpu = None
    if not math.isfinite(eff):
        cpu = None
    if cpu is None and sized.fits and unit_kind != "month":
        notes.append(f"current setup {count}× {instance_type}: speed unknown ({sized.speed_note or 'no estimate'}), "
                     f"so its cost per {unit.removeprefix('USD/')} and the savings cannot be computed")
    c = (cpu if cpu is not None else month, month, 0.0, -1, row, p, price, sized, acc)
    make = _OfferMaker(unit=unit, current=None, current_stack=acc.software_stack, spot=spot,
                       stateless=engine.workload.kind == "inference", schedule=schedule,
                       hours=schedule.hours_per_month, per_month=unit_kind == "month")
    offer = make(0, c, is_current=True, cost_per_unit=cpu)
    if not sized.fits:
        notes.append(f"current setup {count}× {instance_type} cannot run this workload: "
                     f"{sized.why_not}")
    return offer, notes


# ------------------------------------------------------------------------------------------------
# One setup, sized and priced without ranking (the current setup; migration reports)


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
    schedule = _schedule(hours_per_month)
    spot = spot or SpotAssumptions()
    unit_kind, unit = _unit_for(workload, training_tokens)
    engine = _Engine(workload, training_tokens=training_tokens, unit_kind=unit_kind,
                     max_instances=DEFAULT_MAX_INSTANCES)
    stateless = workload.kind == "inference"
    offer, notes = _current_offer(
        engine, catalog, _accelerator_index(catalog), setup, region, pricing,
        mult=_Multipliers(schedule, spot, stateless=stateless), schedule=schedule, unit=unit,
        unit_kind=unit_kind, spot=spot,
    )
    return offer, tuple(notes)
