"""Ranking by a serving capacity plan: what it costs per month to serve a demand within its SLOs.

Given a :class:`~fleet_tui.core.perf.serving_plan.Demand` (requests/s or output tokens/s, optional
``ttft_ms``/``tpot_ms``), each device group of the catalog is planned with the one plan formula of
:mod:`fleet_tui.core.perf.serving_plan` (:func:`replica_capacity`, then :func:`replicas_for` and
:func:`plan_from_capacity`):

* a replica is ``g`` devices of one instance, tensor parallel inside it; ``g`` is tried over the
  powers of two that divide the instance's device count (and the count itself), so an 8×H100 box
  can hold eight 1-GPU replicas of an 8B model or one TP8 replica of a 405B one. A model that needs
  several instances (the ranking's placement) is one replica spanning them;
* replicas = ceil(rate / what one replica sustains within the targets) (Little's law), and whole
  instances are bought: ``instances = ceil(replicas / replicas per instance)``;
* the ``g`` that needs the fewest instances wins (fewer devices per replica on a tie: more
  replicas, the same bill). The offer's month is then ``instances × list price × the pricing
  option's monthly rate`` (:mod:`.costs`, the same formula as every offer), and its $ per 1M output
  tokens is pricing's ``cost_per_million_tokens`` at the demanded token rate.

A group where no ``g`` meets the targets even with one sequence in flight is dropped, and why is
kept for ``--explain``; so is one whose speed is unknown (no plan without a speed).

The operating point of a replica does not depend on the demand's rate, only on its targets: it is
memoised per (workload, targets, device spec, devices per replica) in :mod:`fleet_tui.core.caches`,
so re-ranking after a rate, pricing or filter change computes no speed at all.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

from fleet_tui.core import caches
from fleet_tui.core.perf.serving_plan import (
    Demand,
    ReplicaCapacity,
    ServingPlan,
    plan_from_capacity,
    replica_capacity,
    replicas_for,
)
from fleet_tui.core.perf.sim_plan import (
    RANKING_MAX_REQUESTS,
    RANKING_REQUESTS,
    plan_capacity,
)

_CAPACITY = caches.memo("ranking.replica_capacity", 4096)
# a device group's answer, per (workload, demand, spec, devices, placement size): a repeated ranking
# looks each group up once instead of its ~5 replica sizes (bench_recommend.py "plan" repeat:
# 16 ms -> see the README figure)
_SERVED = caches.memo("ranking.served", 8192)
_SIMULATED = caches.memo("ranking.simulated_plan", 4096)


class ServedGroup(NamedTuple):
    """How one device group serves the demand (``why_not`` set when it cannot)."""

    scale: int  # the placement is bought this many times (independent replicas)
    plan: ServingPlan | None
    why_not: str = ""
    skip: str = ""  # the ranking's skip counter when it cannot: "slo_unmet_rows", "plan_unknown_rows"...

    @property
    def ok(self) -> bool:
        return not self.why_not


def replica_sizes(devices: int) -> tuple[int, ...]:
    """Devices per replica tried on an instance of ``devices``: powers of two dividing it, and itself."""
    sizes = {devices}
    g = 1
    while g < devices:
        if devices % g == 0:
            sizes.add(g)
        g *= 2
    return tuple(sorted(sizes))


class Planner:
    """Plans one workload's demand on device groups; see the module docstring."""

    def __init__(self, workload, demand: Demand):
        self.workload = workload
        self.demand = demand
        self.prompt = workload.prompt_len
        self.gen = workload.gen_len
        self.rate = demand.rate_for(self.gen)

    def capacity(self, acc, spec: Any, g: int) -> ReplicaCapacity:
        d = self.demand
        key = (self.workload, d.ttft_ms, d.tpot_ms, spec, g)

        def compute() -> ReplicaCapacity:
            w = self.workload.derive(gpus=g, sharding="tensor" if g > 1 else "data", tp=None, pp=None,
                                     zero=None, micro_batch=None)
            return replica_capacity(w, acc, g, self.prompt, self.gen, ttft_ms=d.ttft_ms, tpot_ms=d.tpot_ms)

        return _CAPACITY.get_or_compute(key, compute)

    def serve(self, acc, spec: Any, devices: int, placement) -> ServedGroup:
        """The cheapest way to serve the demand on instances of ``devices`` × ``acc`` (the
        ranking's ``placement`` on them: its instance count when the model needs several)."""
        key = (self.workload, self.demand, spec, devices, placement.instances, placement.gpus)
        return _SERVED.get_or_compute(key, lambda: self._serve(acc, spec, devices, placement))

    def _serve(self, acc, spec: Any, devices: int, placement) -> ServedGroup:
        if placement.instances > 1:  # one replica spans the instances the model needs
            options = [(placement.gpus, 1, placement.instances)]
        else:
            options = [(g, devices // g, 1) for g in replica_sizes(devices)]
        best = None  # (instances, g, capacity, replicas)
        missed = unknown = None
        for g, per_instance, spans in options:
            cap = self.capacity(acc, spec, g)
            if cap.replica_rps is None:
                unknown = unknown or cap.unknown
                continue
            if not cap.meets_slo:
                if missed is None or (cap.tpot_s or 0) < (missed.tpot_s or 0):
                    missed = cap
                continue
            replicas = replicas_for(cap, self.rate)
            instances = math.ceil((replicas or 1) / per_instance) * spans
            if best is None or instances < best[0]:
                best = (instances, g, cap, replicas)
            if instances == spans:
                break  # the fewest instances possible: larger replicas cannot cost less
        if best is None:
            if missed is not None:
                return ServedGroup(0, None, self._missed_text(acc, missed), "slo_unmet_rows")
            if unknown and "no whole sequence" not in unknown:
                return ServedGroup(0, None, f"speed unknown on {acc.id} ({unknown})", "plan_unknown_rows")
            return ServedGroup(0, None, f"the KV cache of {acc.id} holds no whole sequence",
                               "not_fitting_rows")
        instances, g, cap, replicas = best
        if self.demand.simulate:
            # the analytic pass chose the replica size; the scheduler simulation counts its replicas
            plan = self.simulated(acc, spec, g)
            if plan.replicas is not None:
                per_instance = next(p for gg, p, _ in options if gg == g)
                spans = max(1, placement.instances)
                instances = math.ceil(plan.replicas / per_instance) * spans
                return ServedGroup(max(1, instances // placement.instances), plan)
        plan = dataclasses.replace(plan_from_capacity(self.workload, cap, self.prompt, self.gen, self.rate),
                                   has_targets=self.demand.has_targets)
        return ServedGroup(max(1, instances // placement.instances), plan)

    def simulated(self, acc, spec: Any, g: int) -> ServingPlan:
        """The simulated plan on replicas of ``g`` devices of ``acc`` (memoised per device spec)."""
        d = self.demand
        key = (self.workload, d, spec, g)

        def compute() -> ServingPlan:
            w = self.workload.derive(gpus=g, sharding="tensor" if g > 1 else "data", tp=None, pp=None,
                                     zero=None, micro_batch=None)
            return plan_capacity(w, acc, g, self.prompt, self.gen, rate_rps=self.rate, ttft_ms=d.ttft_ms,
                                 tpot_ms=d.tpot_ms, percentile=d.slo_percentile, mix=d.length_mix,
                                 requests=RANKING_REQUESTS, max_requests=RANKING_MAX_REQUESTS)

        return _SIMULATED.get_or_compute(key, compute)

    def _missed_text(self, acc, cap: ReplicaCapacity) -> str:
        d = self.demand
        got = []
        if d.ttft_ms is not None:
            got.append(f"first token {(cap.ttft_s or 0.0) * 1e3:,.0f} ms (target {d.ttft_ms:g})")
        if d.tpot_ms is not None:
            got.append(f"{(cap.tpot_s or 0.0) * 1e3:,.1f} ms per token (target {d.tpot_ms:g})")
        return (f"{acc.id} cannot meet the targets at any replica count: one sequence alone on "
                f"{cap.gpus} device(s) gets " + ", ".join(got))
