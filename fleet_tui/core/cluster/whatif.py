"""Queue what-ifs on top of the simulator: the same jobs on more nodes, and part of the work moved
to spot instances (the interruption model of ``core.pricing``: each useful spot hour costs
``1 / (1 - overhead)`` paid hours, with ``overhead = interruptions/h × (checkpoint/2 + restart)``).
Interruptions strike instances: a job on ``n = ceil(gpus / gpus_per_node)`` nodes is stopped when
any of them is, so its rate is ``n ×`` the per-instance-hour rate, and its overhead ``n ×`` too.
``simulate_all`` is the ``queue simulate --json`` document."""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleet_tui.core.cluster.queue import (
    QueueJob,
    check_backfill_depth,
    check_cluster,
    check_policies,
    simulate,
)
from fleet_tui.core.errors import FieldError
from fleet_tui.core.pricing import SpotAssumptions, spot_cost_multiplier
from fleet_tui.core.records import record


def _r(x: float, digits: int = 2) -> float:
    return round(x, digits)


@record
class SpotMove:
    """Jobs moved off the cluster to spot instances: they do not queue here, and on spot each
    useful hour costs ``multiplier`` paid hours (pricing's interruption model)."""

    cloud: str
    jobs_moved: int
    gpu_hours_moved: float
    interruptions_per_hour: float
    overhead_fraction: float
    multiplier: float  # paid hours per useful hour, over the moved work
    expected_interruptions: float
    extra_gpu_hours: float  # paid but lost to interruptions
    remaining: tuple[QueueJob, ...]

    def to_dict(self) -> dict:
        return {"cloud": self.cloud, "jobs_moved": self.jobs_moved,
                "gpu_hours_moved": _r(self.gpu_hours_moved, 3),
                "interruptions_per_hour": _r(self.interruptions_per_hour, 5),
                "overhead_pct": _r(100.0 * self.overhead_fraction),
                "paid_hours_per_useful_hour": _r(self.multiplier, 4),
                "expected_interruptions": _r(self.expected_interruptions, 6),
                "extra_gpu_hours": _r(self.extra_gpu_hours, 6)}


def move_to_spot(jobs: Sequence[QueueJob], fraction: float, *, cloud: str = "aws",
                 gpus_per_node: int = 1) -> SpotMove:
    """Move the shortest jobs (by requested time: they lose least to an interruption) until
    ``fraction`` of the GPU-hours run on spot; the rest stay in the queue. Each job's nodes
    (``gpus_per_node``) set its interruption rate per instance-hour."""
    if not 0.0 <= fraction <= 1.0 or math.isnan(fraction):
        raise FieldError("spot_fraction", f"{{spot_fraction}} must be between 0 and 1, got {fraction:g}")
    spot = SpotAssumptions()
    overhead = spot.overhead_fraction(cloud)  # of one instance
    rate = spot.rate_for(cloud)
    per_node = max(1, gpus_per_node)
    total = sum(j.gpus * j.run_s for j in jobs)
    moved: set[int] = set()
    acc = 0.0
    for i in sorted(range(len(jobs)), key=lambda i: (jobs[i].requested_s, i)):
        if acc >= fraction * total - 1e-9 or fraction == 0.0:
            break
        moved.add(i)
        acc += jobs[i].gpus * jobs[i].run_s
    paid_h = interruptions = 0.0
    for i in moved:
        n = math.ceil(jobs[i].gpus / per_node)
        mult = spot_cost_multiplier(overhead * n)  # n instances: n times the interruptions
        wall_h = jobs[i].run_s * mult / 3600.0
        paid_h += jobs[i].gpus * wall_h
        interruptions += rate * n * wall_h  # per instance-hour, over the job's instances
    useful_h = acc / 3600.0
    return SpotMove(cloud=cloud, jobs_moved=len(moved), gpu_hours_moved=useful_h,
                    interruptions_per_hour=rate, overhead_fraction=overhead,
                    multiplier=paid_h / useful_h if useful_h else spot_cost_multiplier(overhead),
                    expected_interruptions=interruptions, extra_gpu_hours=paid_h - useful_h,
                    remaining=tuple(j for i, j in enumerate(jobs) if i not in moved))


def simulate_all(jobs: Sequence[QueueJob], nodes: int, gpus_per_node: int,
                 policies: Sequence[str], *, add_nodes: int = 0, spot_fraction: float = 0.0,
                 cloud: str = "aws", backfill_depth: int | None = None) -> dict:
    """Every policy side by side (the ``queue simulate --json`` document), plus the what-ifs that
    were asked for: ``add_nodes`` more nodes, and ``spot_fraction`` of the GPU-hours on spot."""
    total = check_cluster(nodes, gpus_per_node)
    policies = check_policies(policies)
    if add_nodes < 0:
        raise FieldError("add_nodes", f"{{add_nodes}} must be zero or more, got {add_nodes}")
    check_backfill_depth(backfill_depth)

    def run(work: Sequence[QueueJob], gpus: int, p: str):
        return simulate(work, gpus, p, backfill_depth=backfill_depth)

    out: dict = {"nodes": nodes, "gpus_per_node": gpus_per_node, "gpus": total, "jobs": len(jobs),
                 "backfill_depth": backfill_depth,
                 "policies": {p: run(jobs, total, p).to_dict() for p in policies}}
    what_if: dict = {}
    if add_nodes:
        more = check_cluster(nodes + add_nodes, gpus_per_node)
        what_if["add_nodes"] = {"nodes": nodes + add_nodes, "policies": {
            p: run(jobs, more, p).summary() for p in policies}}
    if spot_fraction:
        move = move_to_spot(jobs, spot_fraction, cloud=cloud, gpus_per_node=gpus_per_node)
        what_if["spot"] = {**move.to_dict(), "policies": {
            p: run(move.remaining, total, p).summary() for p in policies}}
    if what_if:
        out["what_if"] = what_if
    return out
