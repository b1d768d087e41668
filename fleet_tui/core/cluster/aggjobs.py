"""Jobs on a fleet read as server-side aggregates: the same head-node answer as device by device,
reading only the GPUs that Slurm's running jobs hold.

An aggregated fleet's snapshot carries roll-ups, no device, yet Slurm attributes GPUs by node and
GRES index. Slurm names the nodes its running GPU jobs hold, so one instant query restricted to
those nodes (``prometheus.allocation``: one series per device and part, grouped by the server)
gives each of their GPUs' utilization, SM activity, idle rule, minor number (``device``) and
``hpc_job`` label; these become :class:`jobs.DeviceUsage` records and go through the per-device
path's own attribution and report (``headnode.head_node_view``): Slurm's live allocation wins over
a stale label, conflicts are listed, pending demand and partitions come from Slurm beside the
idle GPUs held. Without Slurm, one job's report reads the GPUs its ``hpc_job`` label names.

What differs from the per-device path: a device's idleness is the fleet's idle rule now (the
aggregated fleet keeps no per-device window), its diagnosis is ``idle`` or ``unknown`` (no
windowed diagnosis), and its memory is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fleet_tui.core.cluster.jobs import DeviceUsage, short_node
from fleet_tui.core.cluster.slurm import SlurmJob, running_on
from fleet_tui.core.monitor.rollup import FleetAggregate, NodeAggregate
from fleet_tui.core.monitor.sources.prometheus.allocation import (
    DeviceReading,
    read_job_devices,
    read_node_devices,
    read_node_labels,
)
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient


class _PricedNodes(Protocol):
    """What a ``core.fleet.FleetView`` offers (a Protocol: no import of core.fleet)."""

    @property
    def device_usd_per_hour(self) -> float | None: ...

    @property
    def aggregate(self) -> FleetAggregate | None: ...

    def node(self, name: str) -> object: ...


@dataclass(frozen=True, slots=True)
class AllocationRead:
    """The GPUs read for the jobs, and what it cost to read them."""

    usages: tuple[DeviceUsage, ...]  # read device by device: to attribute (``jobs.job_view``)
    held: dict[str, tuple[str, tuple[DeviceUsage, ...]]]  # job -> (how, GPUs of its whole nodes)
    nodes: int  # nodes Slurm's running GPU jobs hold
    whole_nodes: int  # of them, taken from the fleet's per-node roll-ups
    device_nodes: int  # nodes read device by device (shared, partly held, labels to check)
    answer_bytes: int  # the largest answer (the node labels', or one per-device query's)


def allocated_nodes(slurm_jobs: Sequence[SlurmJob]) -> dict[str, list[SlurmJob]]:
    """Short node name -> Slurm's running jobs holding GPUs there."""
    out: dict[str, list[SlurmJob]] = {}
    for j in running_on(slurm_jobs):
        if j.gpus > 0:
            for n in j.nodes:
                out.setdefault(short_node(n), []).append(j)
    return out


def _indices(job: SlurmJob, node: str) -> tuple[int, ...]:
    """The GRES indices ``job`` holds on ``node`` (a short name; Slurm's key may be longer)."""
    found = job.gpu_indices.get(node)
    if found is not None:
        return found
    return next((v for k, v in job.gpu_indices.items() if short_node(k) == node), ())


def _device_price(view: _PricedNodes | None, node: str) -> float | None:
    """A device's $/h: its node's price split among the node's devices, as the per-device path
    prices it; the fleet's median GPU price for a node the view does not name."""
    if view is None:
        return None
    try:
        n = view.node(node)
    except KeyError:
        return view.device_usd_per_hour
    usd, count = getattr(n, "usd_per_hour", None), getattr(n, "device_count", 0)
    return usd / count if usd is not None and count else view.device_usd_per_hour


def usage_of(r: DeviceReading, usd_per_hour: float | None, observed_s: float) -> DeviceUsage:
    labels = tuple(sorted((k, v) for k, v in (("device", r.device), ("hpc_job", r.hpc_job)) if v))
    return DeviceUsage(node=r.node, index=r.gpu, labels=labels, util_pct=r.util_pct,
                       sm_active_pct=r.sm_active_pct, idle_fraction=1.0 if r.idle else 0.0,
                       observed_s=observed_s, usd_per_hour=usd_per_hour,
                       primary="idle" if r.idle else "unknown", key=f"{r.node}/{r.gpu}")


def whole_node_usages(node: NodeAggregate, indices: Sequence[int], label: str,
                      usd_per_hour: float | None,
                      observed_s: float) -> list[DeviceUsage]:
    """A node one job holds whole, from the node's roll-up: one record per GPU Slurm gave the job,
    each with the node's mean utilization and SM activity, the first ``idle_devices`` idle — the
    job's device count, means, idle GPUs and their dollars are those of its devices; which GPU
    was idle is not known here (``jobs report`` reads the job's nodes device by device)."""
    out = []
    for i, slot in enumerate(sorted(indices)):
        idle = i < node.idle_devices
        labels = (("device", f"nvidia{slot}"), *((("hpc_job", label),) if label else ()))
        out.append(DeviceUsage(node=node.node, index=slot, labels=labels,
                               util_pct=node.util_pct, sm_active_pct=node.sm_active_pct,
                               idle_fraction=1.0 if idle else 0.0, observed_s=observed_s,
                               usd_per_hour=usd_per_hour, primary="idle" if idle else "unknown",
                               key=f"{node.node}/{slot}"))
    return out


def read_job_usages(client: PrometheusClient, view: _PricedNodes | None,
                    slurm_jobs: Sequence[SlurmJob], *, observed_s: float, job: str | None = None,
                    deadline: Deadline | None = None) -> AllocationRead:
    """The device usages an aggregated fleet's jobs are attributed from.

    With Slurm's jobs: a node one running job holds whole (Slurm gave it as many GPUs as the
    node's roll-up counts, no exporter down there, and its GPUs carry no ``hpc_job`` label or all
    carry that job's) is taken from the fleet's per-node roll-up (``whole_node_usages``); every
    other node a job holds, and every node whose GPUs carry a label Slurm does not account for
    (a stale label), is read device by device (``allocation.read_node_devices``), and so are the
    nodes of ``job`` (the one a report is about). Without Slurm: the GPUs whose ``hpc_job`` is
    ``job`` (None: none read)."""
    if not slurm_jobs:
        if job is None:
            return AllocationRead((), {}, 0, 0, 0, 0)
        readings, size = read_job_devices(client, job, deadline=deadline)
        return AllocationRead(tuple(usage_of(r, _device_price(view, r.node), observed_s)
                                    for r in readings), {}, 0, 0, len({r.node for r in readings}),
                              size)
    agg = view.aggregate if view is not None else None
    roll_ups = {short_node(n.node): n for n in (agg.nodes if agg is not None else ())}
    held = allocated_nodes(slurm_jobs)
    labels, label_bytes = read_node_labels(client, deadline=deadline)
    label_of = {short_node(n): v for n, v in labels.items()}
    usages: list[DeviceUsage] = []
    whole_of: dict[str, tuple[str, list[DeviceUsage]]] = {}
    detail = sorted(n for n in label_of if n not in held)  # labels where Slurm runs no GPU job
    whole = 0
    for node, jobs in sorted(held.items()):
        na, sj = roll_ups.get(node), jobs[0]
        idx = _indices(sj, node)
        on_node = label_of.get(node, {})
        clean = not on_node or (len(on_node) == 1 and next(iter(on_node)) in sj.ids
                                and na is not None and next(iter(on_node.values())) == na.devices)
        if job is not None and any(job in j.ids for j in jobs):
            detail.append(node)  # the reported job's GPUs, each as itself
        elif (len(jobs) == 1 and na is not None and idx and len(idx) == na.devices
                and not na.stale_devices and clean):
            whole += 1
            label = next(iter(on_node), "")
            # how the per-device path names it: by its hpc_job label where it carries one
            mine = whole_of.setdefault(sj.job, ("hpc_job" if label else "slurm", []))
            mine[1].extend(whole_node_usages(na, idx, label, _device_price(view, na.node),
                                             observed_s))
        else:
            detail.append(node)
    readings, size = read_node_devices(client, detail, deadline=deadline)
    prices: dict[str, float | None] = {}
    for r in readings:
        if r.node not in prices:
            prices[r.node] = _device_price(view, r.node)
        usages.append(usage_of(r, prices[r.node], observed_s))
    return AllocationRead(tuple(usages), {j: (via, tuple(d)) for j, (via, d) in whole_of.items()},
                          len(held), whole, len(detail), max(label_bytes, size))
