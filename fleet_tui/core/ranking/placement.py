"""Where the workload goes on one offer's devices, and what it achieves there.

How a workload is placed on ``G`` devices: the workload's own sharding first; when that does not
fit and ``G > 1``, tensor parallelism for inference or FSDP/ZeRO-3 for training. An instance with
8 or more devices may also be taken several times (2, 4, 8 … up to ``max_instances``).

A :class:`Placer` sizes one workload; its placements are kept per workload in
:mod:`fleet_tui.core.caches` (``ranking.placements``, the last 32 workloads), so re-ranking after a
constraint or pricing change does no sizing at all.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Hashable, NamedTuple

from fleet_tui.core import caches, perf, sizing
from fleet_tui.core.pricing import cost_per_million_tokens, training_run_cost

GIB = 1024**3
MULTI_INSTANCE_MIN_DEVICES = 8  # only HPC-class boxes (NVLink + EFA/InfiniBand) are multiplied
DEFAULT_MAX_INSTANCES = 16


class Speed(NamedTuple):
    throughput: Any  # the perf Throughput, None when not estimated
    tokens_per_s: float | None
    latency_ms: float | None  # per generated token (or per forward pass), inference only
    run_seconds: float | None  # the whole training run, when its tokens are given
    # USD per unit of work (1M tokens, one run) at $1/h: pricing's formula at a unit price, so an
    # offer's cost per unit is its effective $/h times this. None for $/month or unknown speed.
    unit_cost_per_usd_hour: float | None
    note: str  # why the speed is unknown ("" when known)


NO_SPEED = Speed(None, None, None, None, None, "")


class SizingContext(NamedTuple):
    workload: Any  # the workload variant placed (its gpus and sharding set)
    acc: Any
    unit_kind: str  # "month", "tokens", "run"
    training_tokens: float | None


class Placement:
    """The smallest placement that fits on one (device, devices) group, or the closest attempt.

    Fit is decided when the placement is made (ranking needs it); the full ``FitResult`` and the
    speed estimate are computed on first read: ranking by $/month reads neither, and only the
    offers shown need the ``FitResult``.
    """

    def __init__(self, fits: bool, instances: int, gpus: int, sharding: str, *,
                 headroom_gib: float | None, memory_used_pct: float | None,
                 capacity_bytes: int | None, why_not: str = "",
                 context: SizingContext | None = None) -> None:
        self.fits = fits
        self.instances = instances
        self.gpus = gpus
        self.sharding = sharding
        self.headroom_gib = headroom_gib
        self.memory_used_pct = memory_used_pct
        self.capacity_bytes = capacity_bytes
        self.why_not = why_not
        self.context = context  # None for a misfit sized without detail (no fit, no speed)

    @functools.cached_property
    def fit(self):
        c = self.context
        return None if c is None else sizing.check_fit(c.workload, c.acc, self.gpus)

    @functools.cached_property
    def speed(self) -> Speed:
        c = self.context
        if c is None:
            return NO_SPEED
        w = c.workload
        tp = perf.estimate_throughput(w, c.acc, self.gpus)
        tps = tp.tokens_per_s
        if tps is not None and not (tps > 0 and math.isfinite(tps)):
            tps = None
        note = "" if tps is not None else (tp.unknown or "no speed estimate")
        latency_ms = None
        if w.kind == "inference":
            per_token = tp.time_per_output_token_s or tp.step_s
            latency_ms = per_token * 1000.0 if per_token else None
        run_seconds = unit_cost = None
        if c.unit_kind == "tokens" and tps:
            unit_cost = cost_per_million_tokens(1.0, tps)
        elif c.unit_kind == "run" and c.training_tokens and tps:
            run_seconds = c.training_tokens / tps  # as perf.training_run
            unit_cost = training_run_cost(1.0, run_seconds)
        return Speed(tp, tps, latency_ms, run_seconds, unit_cost, note)

    @property
    def throughput(self):
        return self.speed.throughput

    @property
    def tokens_per_s(self) -> float | None:
        return self.speed.tokens_per_s

    @property
    def latency_ms(self) -> float | None:
        return self.speed.latency_ms

    @property
    def speed_note(self) -> str:
        return self.speed.note


class QuickFit(NamedTuple):
    """What ``check_fit`` decides, without the search for suggestions it runs on a misfit."""

    fits: bool
    headroom_bytes: int
    capacity_bytes: int
    precision_ok: bool


class Attempt(NamedTuple):
    """One placement tried: the workload variant on ``gpus`` devices of ``instances`` instances."""

    workload: Any
    gpus: int
    instances: int
    sharding: str
    fit: QuickFit


def sharding_order(workload) -> tuple[str, ...]:
    alt = "tensor" if workload.kind == "inference" else "fsdp"
    return (workload.sharding,) if workload.sharding == alt else (workload.sharding, alt)


def describe_misfit(fit, acc, gpus: int) -> str:
    if getattr(fit, "precision_supported", True) is False:
        return f"{acc.id} cannot run this precision"
    cap = getattr(fit, "capacity_bytes", None)
    head = getattr(fit, "headroom_bytes", None)
    if cap and head is not None:
        need = (cap - head) / GIB
        return f"needs {need:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB (×{gpus})"
    return f"does not fit {gpus}× {acc.id}"


class Placer:
    """Sizing and speed for one workload, memoised per (device spec, devices, instances)."""

    def __init__(self, workload, *, training_tokens: float | None, unit_kind: str,
                 max_instances: int):
        self.workload = workload
        self.training_tokens = training_tokens
        self.unit_kind = unit_kind  # "month", "tokens", "run"
        self.max_instances = max_instances
        key = (workload, training_tokens, unit_kind, max_instances)
        # the placements of this workload, by (spec, devices, instances, detail)
        self._placements: dict[tuple, Placement] = caches.memo("ranking.placements", 32) \
            .get_or_compute(key, dict)
        self._variants: dict[tuple[int, str], Any] = {}
        self._need: dict[tuple[int, str], int] = {}  # per-GPU bytes by placement
        self._precision_ok: dict[Hashable, bool] = {}  # by device spec

    def _variant(self, gpus: int, sharding: str):
        key = (gpus, sharding)
        w = self._variants.get(key)
        if w is None:
            w = self._variants[key] = self.workload.model_copy(update={"gpus": gpus, "sharding": sharding})
        return w

    def _quick_fit(self, w, acc, spec: Hashable, gpus: int) -> QuickFit:
        """Exactly what ``check_fit`` decides. Memory per GPU depends on the placement only, not
        on the device: it is looked up once per (gpus, sharding)."""
        mkey = (gpus, w.sharding)
        need = self._need.get(mkey)
        if need is None:
            need = self._need[mkey] = sizing.estimate_memory(w, gpus).total_bytes
        cap = sizing.capacity_bytes(acc)
        ok = self._precision_ok.get(spec)
        if ok is None:
            ok = self._precision_ok[spec] = sizing.precision_support(w.precision, acc)[0]
        return QuickFit(need <= cap and ok, cap - need, cap, ok)

    def size(self, acc, spec: Hashable, devices: int, instances: int | None = None, *,
             detail: bool = False) -> Placement:
        """Smallest placement that fits; ``instances`` fixed (current setup) or searched.

        ``spec`` is the device's value key (:meth:`CatalogIndex.spec_key`). ``detail`` also sizes
        a placement that does not fit (speed, fit suggestions), as the current setup's report needs.
        """
        key = (spec, devices, instances, detail)
        hit = self._placements.get(key)
        if hit is not None:
            return hit
        if instances is not None:
            counts: tuple[int, ...] = (instances,)
        elif devices >= MULTI_INSTANCE_MIN_DEVICES and acc.software_stack != "XLA":
            # (TPU slices come in every size as catalog rows; no need to multiply them)
            counts = tuple(n for n in (1, 2, 4, 8, 16, 32, 64) if n <= self.max_instances) or (1,)
        else:
            counts = (1,)
        closest = chosen = None
        for n in counts:
            gpus = devices * n
            for sharding in (sharding_order(self.workload) if gpus > 1 else (self.workload.sharding,)):
                w = self._variant(gpus, sharding)
                attempt = Attempt(w, gpus, n, sharding, self._quick_fit(w, acc, spec, gpus))
                q = attempt.fit
                # when nothing fits, report the attempt that came closest
                if closest is None or (q.precision_ok and not closest.fit.precision_ok) or (
                        q.precision_ok == closest.fit.precision_ok
                        and q.headroom_bytes > closest.fit.headroom_bytes):
                    closest = attempt
                if q.fits:
                    chosen = attempt
                    break
            if chosen:
                break
        w, gpus, n, sharding, q = chosen or closest
        head, cap = q.headroom_bytes, q.capacity_bytes
        used_pct = 100.0 * (cap - head) / cap if cap else None
        if chosen is None and not detail:
            why = (f"{acc.id} cannot run {w.precision}" if not q.precision_ok else
                   f"needs {(cap - head) / GIB:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB")
            result = Placement(False, n, gpus, sharding, headroom_gib=head / GIB,
                               memory_used_pct=used_pct, capacity_bytes=cap, why_not=why)
        else:
            result = Placement(chosen is not None, n, gpus, sharding, headroom_gib=head / GIB,
                               memory_used_pct=used_pct, capacity_bytes=cap,
                               context=SizingContext(w, acc, self.unit_kind, self.training_tokens))
            if chosen is None:  # the current setup's report: say why, from the full fit check
                result.why_not = describe_misfit(result.fit, acc, gpus)
        self._placements[key] = result
        return result
