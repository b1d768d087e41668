"""Where the workload goes on one offer's devices, and what it achieves there.

How a workload is placed on ``G`` devices: its own layout when it sets one, else the cheapest
layout that fits (:mod:`fleet_tui.core.sizing.layout`: data parallel and ZeRO stages, tensor
parallel inside an instance, pipeline stages across instances). An instance with 8 or more devices
may also be taken several times (2, 4, 8 … up to ``max_instances``) — unless it is a marketplace
box, whose network between hosts is unknown (see :mod:`fleet_tui.core.interconnects`).

A :class:`Placer` sizes one workload; its placements are kept per workload in
:mod:`fleet_tui.core.caches` (``ranking.placements``, the last 32 workloads), so re-ranking after a
constraint or pricing change does no sizing at all.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Hashable, NamedTuple

from fleet_tui.core import caches, perf, sizing
from fleet_tui.core.footprint import weight_bytes
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.pricing import cost_per_million_tokens, training_run_cost
from fleet_tui.core.sizing import layout as sizing_layout

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
    workload: Any  # the workload variant placed (its gpus and layout set)
    acc: Any
    unit_kind: str  # "month", "tokens", "run"
    training_tokens: float | None
    fabric: Any = None  # the interconnects.Fabric its collectives cross (None: the device's default)


class Placement:
    """The smallest placement that fits on one (device, devices) group, or the closest attempt.

    Fit is decided when the placement is made (ranking needs it); the full ``FitResult`` and the
    speed estimate are computed on first read: ranking by $/month reads neither, and only the
    offers shown need the ``FitResult``. A placement that does not fit has no speed.
    """

    def __init__(self, fits: bool, instances: int, gpus: int, sharding: str, *,
                 headroom_gib: float | None, memory_used_pct: float | None,
                 capacity_bytes: int | None, why_not: str = "",
                 context: SizingContext | None = None, layout: str = "") -> None:
        self.fits = fits
        self.instances = instances
        self.gpus = gpus
        self.sharding = sharding
        self.layout = layout  # e.g. "TP8 × PP2 × DP4, ZeRO-1"
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
        if c is None or not self.fits:  # nothing that does not fit gets a speed
            return NO_SPEED
        w = c.workload
        # at the sequences a serving engine runs at once (the rest queue), as the plan does
        tp = perf.estimate_throughput(sizing.running_workload(w, c.acc, self.gpus), c.acc, self.gpus, c.fabric)
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


def describe_misfit(fit, acc, gpus: int) -> str:
    if getattr(fit, "precision_supported", True) is False:
        w = getattr(fit, "workload", None)
        why = sizing.precision_support(w.precision, acc, w)[1] if w is not None else ""
        return why or f"{acc.id} cannot run this precision"
    cap = getattr(fit, "capacity_bytes", None)
    head = getattr(fit, "headroom_bytes", None)
    if cap and head is not None:
        need = (cap - head) / GIB
        return f"needs {need:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB (×{gpus})"
    return f"does not fit {gpus}× {acc.id}"


class Placer:
    """Sizing and speed for one workload, memoised per (device spec, devices, instances, fabric).

    On ``G`` devices the workload's own layout is kept when it sets one (``tp``/``pp``/``zero``);
    otherwise :func:`fleet_tui.core.sizing.layout.choose_layout` takes the cheapest layout that fits
    (tensor parallel never wider than one instance). Before any search, a lower bound — the
    weights alone spread over all ``G`` devices — rules out groups that no layout can fit.
    """

    def __init__(self, workload, *, training_tokens: float | None, unit_kind: str,
                 max_instances: int):
        self.workload = workload
        self.training_tokens = training_tokens
        self.unit_kind = unit_kind  # "month", "tokens", "run"
        self.max_instances = max_instances
        key = (workload, training_tokens, unit_kind, max_instances)
        # the placements of this workload, by (spec, devices, instances, detail, fabric, multi-node)
        self._placements: dict[tuple, Placement] = caches.memo("ranking.placements", 32) \
            .get_or_compute(key, dict)
        # weights alone, whole model: no layout of G devices fits when this / G exceeds a device
        self._weights = weight_bytes(workload, param_counts(workload.arch))

    def size(self, acc, spec: Hashable, devices: int, instances: int | None = None, *,
             detail: bool = False, fabric=None, multi_node: bool = True) -> Placement:
        """Smallest placement that fits; ``instances`` fixed (current setup) or searched.

        ``spec`` is the device's value key (:meth:`CatalogIndex.spec_key`); ``fabric`` the links of
        the offer's instance type; ``multi_node`` False keeps the offer to one instance
        (marketplace boxes). ``detail`` also sizes a placement that does not fit (its fit
        suggestions), as the current setup's report needs.
        """
        key = (spec, devices, instances, detail, fabric, multi_node)
        hit = self._placements.get(key)
        if hit is not None:
            return hit
        if instances is not None:
            counts: tuple[int, ...] = (instances,)
        elif multi_node and devices >= MULTI_INSTANCE_MIN_DEVICES and acc.software_stack != "XLA":
            # (TPU slices come in every size as catalog rows; no need to multiply them)
            counts = tuple(n for n in (1, 2, 4, 8, 16, 32, 64) if n <= self.max_instances) or (1,)
        else:
            counts = (1,)
        cap = sizing.capacity_bytes(acc)
        supported, unsupported_why = sizing.precision_support(self.workload.precision, acc, self.workload)
        if not detail and not supported:
            result = Placement(False, counts[0], devices * counts[0], self.workload.sharding,
                               headroom_gib=None, memory_used_pct=None, capacity_bytes=cap,
                               why_not=unsupported_why or f"{acc.id} cannot run {self.workload.precision}")
            self._placements[key] = result
            return result
        closest = chosen = None
        for n in counts:
            gpus = devices * n
            if self._weights / gpus > cap and not detail:
                if n != counts[-1]:
                    continue  # not even the weights fit spread over every device: no layout can
                need = self._weights / gpus
                result = Placement(False, n, gpus, self.workload.sharding, headroom_gib=(cap - need) / GIB,
                                   memory_used_pct=100.0 * need / cap if cap else None, capacity_bytes=cap,
                                   why_not=f"the weights alone need {need / GIB:.1f} GiB per device on "
                                           f"{gpus}× {acc.id} ({cap / GIB:.1f} GiB each)")
                self._placements[key] = result
                return result
            choice = sizing_layout.choose_layout(self.workload, acc, gpus, node_devices=devices,
                                                 exact_closest=detail)
            if closest is None or choice.total_bytes < closest[1].total_bytes:
                closest = (n, choice)
            if choice.fits:
                chosen = (n, choice)
                break
        picked = chosen or closest
        if picked is None:  # cannot happen: counts is never empty and its last count is laid out
            raise AssertionError(f"no layout tried for {devices}x {acc.id}")
        n, ch = picked
        w, gpus = ch.workload, ch.gpus
        head = cap - ch.total_bytes
        used_pct = 100.0 * ch.total_bytes / cap if cap else None
        label = ch.label if gpus > 1 else ""
        ok_precision = sizing.precision_support(w.precision, acc, w)[0]
        if chosen is None and not detail:
            why = (f"{acc.id} cannot run {w.precision}" if not ok_precision else
                   f"needs {ch.total_bytes / GIB:.1f} GiB per device, {acc.id} has {cap / GIB:.1f} GiB")
            result = Placement(False, n, gpus, w.sharding, headroom_gib=head / GIB,
                               memory_used_pct=used_pct, capacity_bytes=cap, why_not=why, layout=label)
        else:
            links = fabric
            if fabric is not None and (gpus <= 1 or n == 1):
                # inside one instance the network between instances plays no part: rows of
                # instance types that differ only there share one speed estimate
                links = None if gpus <= 1 else dataclasses.replace(
                    fabric, inter_link="", inter_gbps=1.0, inter_known=False)
            result = Placement(chosen is not None, n, gpus, w.sharding, headroom_gib=head / GIB,
                               memory_used_pct=used_pct, capacity_bytes=cap, layout=label,
                               context=SizingContext(w, acc, self.unit_kind, self.training_tokens, links))
            if chosen is None:  # the current setup's report: say why, from the full fit check
                result.why_not = describe_misfit(result.fit, acc, gpus)
        self._placements[key] = result
        return result
