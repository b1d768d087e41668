"""A fleet as the server rolled it up: per node, per job, the least-used devices, input counts.

The records a large fleet's refresh returns instead of one ``DeviceSnapshot`` per device
(``sources.prometheus.aggregate`` reads them; ``core.fleet.FleetView.from_aggregate`` turns them
into the view every front end renders). Kept below both, so a ``Snapshot`` can carry one.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet_tui.core.records import record

# A device without a diagnosis is idle under this NVML utilization (NVML reports whole %) and SM
# activity (where exported): the rule ``core.fleet`` and the server-side aggregates share.
IDLE_UTIL_MAX_PCT = 1.0


@record
class NodeAggregate:
    node: str
    devices: int
    util_pct: float | None  # mean NVML utilization
    sm_active_pct: float | None  # mean SM activity where exported
    idle_devices: int
    power_w: float | None = None  # total power drawn
    mem_used_bytes: int | None = None  # framebuffer used, all devices
    mem_total_bytes: int | None = None  # framebuffer used + free, all devices
    stale_devices: int = 0  # devices whose exporter is down (not in ``devices``)


@record
class JobAggregate:
    job: str
    devices: int
    util_pct: float | None
    idle_devices: int
    nodes: int = 0  # nodes the job's devices are on


@record
class WorstDevice:
    node: str
    index: int | None
    uuid: str
    util_pct: float | None


@record
class FleetAggregate:
    """The fleet as Prometheus rolled it up: nodes, jobs, the least-used devices, input counts."""

    timestamp: float
    nodes: tuple[NodeAggregate, ...]
    jobs: tuple[JobAggregate, ...]
    worst: tuple[WorstDevice, ...]
    counts: Mapping[str, int]  # mem_full, idle_powered, xid, power_capped, thermal
    answer_bytes: int
    threshold: int | None = None  # the device count above which a fleet is read this way
    down: tuple[tuple[str, str], ...] = ()  # (node, exporter instance) of exporters down now

    @property
    def device_count(self) -> int:
        """Every device: the reporting ones and those whose exporter is down."""
        return sum(n.devices + n.stale_devices for n in self.nodes)

    @property
    def stale_devices(self) -> int:
        return sum(n.stale_devices for n in self.nodes)

    @property
    def idle_devices(self) -> int:
        return sum(n.idle_devices for n in self.nodes)

    @property
    def utilization_pct(self) -> float | None:
        known = [(n.util_pct, n.devices) for n in self.nodes if n.util_pct is not None]
        total = sum(d for _, d in known)
        return sum(u * d for u, d in known) / total if total else None

    def node(self, name: str) -> NodeAggregate:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(f"no node {name!r} in the fleet")
