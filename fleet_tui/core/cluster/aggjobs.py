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
from fleet_tui.core.monitor.sources.prometheus.allocation import (
    DeviceReading,
    read_job_devices,
    read_node_devices,
)
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient


class _PricedNodes(Protocol):
    """What a ``core.fleet.FleetView`` offers for pricing (a Protocol: no import of core.fleet)."""

    @property
    def device_usd_per_hour(self) -> float | None: ...

    def node(self, name: str) -> object: ...


@dataclass(frozen=True, slots=True)
class AllocationRead:
    """The GPUs read for the jobs, and what it cost to read them."""

    usages: tuple[DeviceUsage, ...]
    nodes: int  # nodes asked for (Slurm's running GPU jobs')
    answer_bytes: int


def allocated_nodes(slurm_jobs: Sequence[SlurmJob]) -> list[str]:
    """The nodes Slurm's running jobs hold GPUs on (short names)."""
    return sorted({short_node(n) for j in running_on(slurm_jobs) if j.gpus > 0 for n in j.nodes})


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
                       primary="idle" if r.idle else "unknown",
                       key=f"{r.node}/{r.gpu}")


def read_job_usages(client: PrometheusClient, view: _PricedNodes | None,
                    slurm_jobs: Sequence[SlurmJob], *, observed_s: float, job: str | None = None,
                    deadline: Deadline | None = None) -> AllocationRead:
    """The device usages an aggregated fleet's jobs are attributed from: with Slurm's jobs, the
    GPUs of the nodes its running GPU jobs hold (and job-labelled GPUs elsewhere); without, the
    GPUs whose ``hpc_job`` is ``job`` (None: none read)."""
    if slurm_jobs:
        nodes = allocated_nodes(slurm_jobs)
        readings, size = read_node_devices(client, nodes, deadline=deadline)
    elif job is not None:
        nodes, (readings, size) = [], read_job_devices(client, job, deadline=deadline)
    else:
        return AllocationRead((), 0, 0)
    prices: dict[str, float | None] = {}
    usages = []
    for r in readings:
        if r.node not in prices:
            prices[r.node] = _device_price(view, r.node)
        usages.append(usage_of(r, prices[r.node], observed_s))
    return AllocationRead(tuple(usages), len(nodes), size)
