"""Fleets past 4,096 GPUs: the roll-ups computed by Prometheus, not by the client.

Reading every series of 32,768 GPUs (~25 per GPU) is ~800,000 series a refresh: more JSON than one
answer may hold (``client.MAX_RESPONSE_BYTES``) and seconds of client CPU. Above
``AGGREGATE_ABOVE_DEVICES`` the fleet is read as one instant query whose parts are PromQL
aggregations, each tagged with a ``fleet_tui_agg`` label (``label_replace``) so one answer carries
them all:

- per node (``Hostname``): device count, mean NVML utilization, mean SM activity, idle devices;
- per job (``hpc_job``, the label jobs are attributed by): device count, mean utilization, idle;
- the ``WORST_DEVICES`` least-used devices (``bottomk`` of utilization) with their identity;
- fleet-wide counts of the diagnosis inputs: devices at ≥ 95 % framebuffer, devices drawing power
  while idle, devices with an XID error set.

*Idle* is ``core.fleet``'s rule for a device without a diagnosis: NVML utilization under
``IDLE_UTIL_MAX_PCT`` and SM activity (where exported) under the same share. One node's devices in
full come from ``build_node_query`` (the per-refresh query with a node-name matcher), for a
drill-down. Cost at 4,096 nodes × 8 GPUs: bench/bench_fleet.py ``--aggregate`` (docs/head-node.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from fleet_tui.core.fleet import IDLE_UTIL_MAX_PCT
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient
from fleet_tui.core.monitor.sources.prometheus.metrics import (
    DCGM_ID_LABELS,
    DYNAMIC_NAMES,
    PROBE_LABEL,
)
from fleet_tui.core.monitor.sources.prometheus.parse import parse_envelope, parse_value
from fleet_tui.core.records import record

# Above this many devices a refresh asks for aggregates: at 4,096 GPUs the per-device read costs
# ~200 ms CPU (bench/bench_fleet.py --nodes 512), so the per-device view stays up to there.
AGGREGATE_ABOVE_DEVICES = 4096
WORST_DEVICES = 50  # least-used devices shown in full; a page of the offenders table
AGG_LABEL = "fleet_tui_agg"
NODE_LABELS = ("Hostname", "hostname", "instance")  # where a node's name is, in ``node_of``'s order
NODE_KEY = "fleet_tui_node"  # the node as the aggregate names it (``_per_device``)
JOB_LABEL = "hpc_job"
MEM_FULL_FRAC = 0.95  # framebuffer share that counts as "memory full" (a capacity-pressure input)
IDLE_POWER_W = 100.0  # power drawn by an idle device that counts as "not parked"

_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_SM = "DCGM_FI_PROF_SM_ACTIVE"  # a 0..1 ratio
_ID = ", ".join(DCGM_ID_LABELS)


def _tag(expr: str, name: str) -> str:
    return f'label_replace({expr}, "{AGG_LABEL}", "{name}", "", "")'


def _per_device(metric: str, *extra: str) -> str:
    """``metric`` once per device, with its node in ``NODE_KEY`` as ``parse.node_of`` reads it:
    Hostname, else hostname, else the scrape instance."""
    expr = f"max by ({', '.join((*DCGM_ID_LABELS, *extra))}) ({metric})"
    for source in reversed(NODE_LABELS):  # later ones win where present
        expr = f'label_replace({expr}, "{NODE_KEY}", "$1", "{source}", "(.+)")'
    return expr


def idle_expr() -> str:
    """Every idle device (utilization < the idle share, and SM activity under it where exported)."""
    return (f"({_per_device(_UTIL)} < {IDLE_UTIL_MAX_PCT:g}) unless on ({_ID}) "
            f"({_per_device(_SM)} >= {IDLE_UTIL_MAX_PCT / 100:g})")


def build_aggregate_query(worst: int = WORST_DEVICES) -> str:
    """One instant query whose answer is the fleet's roll-ups, each part tagged ``fleet_tui_agg``."""
    util, sm, idle = _per_device(_UTIL), _per_device(_SM), idle_expr()
    util_job = _per_device(_UTIL, JOB_LABEL)
    used, free = _per_device("DCGM_FI_DEV_FB_USED"), _per_device("DCGM_FI_DEV_FB_FREE")
    parts = [
        _tag(f"count by ({NODE_KEY}) ({util})", "node_devices"),
        _tag(f"avg by ({NODE_KEY}) ({util})", "node_util"),
        _tag(f"avg by ({NODE_KEY}) ({sm})", "node_sm"),
        _tag(f"count by ({NODE_KEY}) ({idle})", "node_idle"),
        _tag(f"count by ({JOB_LABEL}) ({util_job})", "job_devices"),
        _tag(f"avg by ({JOB_LABEL}) ({util_job})", "job_util"),
        _tag(f"count by ({JOB_LABEL}) (({idle}) * on ({_ID}) group_left ({JOB_LABEL}) "
             f"(0 * {util_job}))", "job_idle"),
        _tag(f"bottomk({int(worst)}, {util})", "worst"),
        _tag(f"count({used} / on ({_ID}) ({used} + on ({_ID}) {free}) >= {MEM_FULL_FRAC:g})",
             "count_mem_full"),
        _tag(f"count(({idle}) and on ({_ID}) ({_per_device('DCGM_FI_DEV_POWER_USAGE')} "
             f"> {IDLE_POWER_W:g}))", "count_idle_powered"),
        _tag(f"count({_per_device('DCGM_FI_DEV_XID_ERRORS')} > 0)", "count_xid"),
    ]
    return " or ".join(parts)


def build_node_query(node: str) -> str:
    """One node's moving DCGM metrics and sample times, as the per-device refresh reads them; the
    node is matched in each label ``parse.node_of`` may name it by (Hostname, hostname, instance),
    so a caller keeps the devices whose ``node`` is ``node``."""
    if not node or any(c in node for c in '"\\\n'):
        raise ValueError(f"node name {node!r}: expected a host name without quotes or backslashes")
    names = "|".join(n for n in DYNAMIC_NAMES if n.startswith("DCGM_"))
    parts = []
    for label in NODE_LABELS:
        parts.append(f'max by (__name__, {_ID}) ({{__name__=~"{names}", {label}="{node}"}})')
        probe = f'max by ({_ID}) (timestamp({_UTIL}{{{label}="{node}"}}))'
        parts.append(f'label_replace({probe}, "{PROBE_LABEL}", "nvidia", "", "")')
    return " or ".join(parts)


@record
class NodeAggregate:
    node: str
    devices: int
    util_pct: float | None  # mean NVML utilization
    sm_active_pct: float | None  # mean SM activity where exported
    idle_devices: int


@record
class JobAggregate:
    job: str
    devices: int
    util_pct: float | None
    idle_devices: int


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
    counts: Mapping[str, int]  # mem_full, idle_powered, xid
    answer_bytes: int

    @property
    def device_count(self) -> int:
        return sum(n.devices for n in self.nodes)

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


def aggregate_from_answer(body: bytes, timestamp: float) -> FleetAggregate:
    """The roll-ups in one answer of ``build_aggregate_query``."""
    per_node: dict[str, dict[str, float | None]] = {}
    per_job: dict[str, dict[str, float | None]] = {}
    worst: list[WorstDevice] = []
    counts: dict[str, int] = {}
    for item in parse_envelope(body):
        labels: Mapping[str, str] = item.get("metric") or {}
        value = item.get("value") or (None, None)
        v = parse_value(value[1] if len(value) > 1 else None)
        part = labels.get(AGG_LABEL, "")
        if part.startswith("node_"):
            per_node.setdefault(labels.get(NODE_KEY, ""), {})[part[5:]] = v
        elif part.startswith("job_"):
            per_job.setdefault(labels.get(JOB_LABEL, ""), {})[part[4:]] = v
        elif part == "worst":
            gpu = labels.get("gpu", "")
            worst.append(WorstDevice(node=labels.get(NODE_KEY, ""),
                                     index=int(gpu) if gpu.isdigit() else None,
                                     uuid=labels.get("UUID") or labels.get("uuid", ""),
                                     util_pct=v))
        elif part.startswith("count_"):
            counts[part[6:]] = int(v or 0)
    nodes = tuple(NodeAggregate(node=name, devices=int(a.get("devices") or 0),
                                util_pct=a.get("util"), sm_active_pct=_pct(a.get("sm")),
                                idle_devices=int(a.get("idle") or 0))
                  for name, a in sorted(per_node.items()))
    jobs = tuple(JobAggregate(job=name, devices=int(a.get("devices") or 0), util_pct=a.get("util"),
                              idle_devices=int(a.get("idle") or 0))
                 for name, a in sorted(per_job.items()) if name)
    worst.sort(key=lambda w: (w.util_pct if w.util_pct is not None else -1.0, w.node, w.index or 0))
    for name in ("mem_full", "idle_powered", "xid"):
        counts.setdefault(name, 0)  # ``count()`` of nothing is an empty answer, not 0
    return FleetAggregate(timestamp=timestamp, nodes=nodes, jobs=jobs, worst=tuple(worst),
                          counts=counts, answer_bytes=len(body))


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100.0 * ratio


def read_fleet_aggregate(client: PrometheusClient, *, worst: int = WORST_DEVICES,
                         deadline: Deadline | None = None, at: float | None = None,
                         ) -> FleetAggregate:
    """One refresh of a large fleet: one aggregate query, answered by the server (evaluated at
    ``at``, unix seconds, when given: the same instant as another query's)."""
    params = {"query": build_aggregate_query(worst), "timeout": client.promql_timeout}
    if at is not None:
        params["time"] = f"{at:.3f}"
    body = client.get("/api/v1/query", params, post=True, deadline=deadline)
    return aggregate_from_answer(body, time.time() if at is None else at)

