"""Fleet roll-ups: many nodes' devices as one view — per node, fleet-wide, and worst offenders first.

``FleetView.from_snapshot(snapshot, diagnoses, instance_prices)`` turns one fleet ``Snapshot`` (any
source; ``prometheus:URL`` is the usual one) plus the per-device diagnoses of
``core.monitor.analysis`` into immutable, UI-free data: a nodes × devices grid, per-node roll-ups
(mean utilization, memory, power, worst diagnosis, idle devices, idle $/h), fleet utilization and
idle cost, every device ranked worst first, and ``node(name)`` for a drill-down. The diagnoses
come from the one ``MonitorEngine`` (with ``windowing.FleetWindowPolicy`` for a fleet):
``FleetViews`` turns each engine tick into a view, so ``fleet``, ``monitor``, ``export`` and the
app's fleet pane show the same view from the same code.

Definitions (stated once here so every surface agrees):
- *idle*: the device's primary diagnosis is ``idle`` (no kernels ran in the window); without a
  diagnosis, NVML utilization and SM activity both under 1%.
- *efficiency* (0-100): the share of the GPU doing work — SM activity (DCGM ``PROF_SM_ACTIVE`` /
  GPM) where exported, else NVML utilization (which overstates: it counts any kernel as busy).
- *device price*: the node's $/h divided by the node's device count (instance prices are per
  instance; ``instance_prices`` maps node -> $/h, key ``"*"`` for every node not named).
- *idle cost*: the price of idle devices; *waste*: price × (1 - efficiency), which ranks offenders.
- *stale*: a device whose readings stopped (``state != "ok"`` from the source, e.g. its exporter
  died); it is shown with the age of its last reading and ranks with the alarms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import field, fields
from operator import attrgetter
from typing import Any, Protocol

from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.rollup import (
    IDLE_UTIL_MAX_PCT,
    FleetAggregate,
    JobAggregate,
    NodeAggregate,
    WorstDevice,
)
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.windowing import FleetWindowPolicy
from fleet_tui.core.records import record

SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1, "ok": 0}
STALE_KIND = "stale"  # fleet-level state: the source has no fresh reading for this device

Prices = Mapping[str, float] | float | None


class SchedulerJob(Protocol):
    """What an aggregated fleet's jobs take from a scheduler's job (``cluster.slurm.SlurmJob``)."""

    @property
    def ids(self) -> tuple[str, ...]: ...
    @property
    def user(self) -> str: ...
    @property
    def account(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def partition(self) -> str: ...


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _diagnosis_dict(d: Any) -> dict[str, Any]:
    """A diagnosis (analysis.Diagnosis, or any object/dict with kind/confidence/...) as JSON data."""
    to_dict = getattr(d, "to_dict", None)
    if callable(to_dict):
        data = to_dict()
        if isinstance(data, dict):
            return data
    evidence = _get(d, "evidence", {})
    if not isinstance(evidence, Mapping):
        evidence = dict(evidence or ())
    return {"kind": _get(d, "kind", "unknown"), "confidence": _get(d, "confidence"),
            "evidence": dict(evidence), "explanation": _get(d, "explanation", ""),
            "action": _get(d, "action", ""), "severity": _get(d, "severity", "info")}


def _diagnoses_of(entry: Any) -> list[dict[str, Any]]:
    """Accepts an analysis.DeviceAnalysis, a sequence of diagnoses, or None."""
    if entry is None:
        return []
    inner = _get(entry, "diagnoses", None)
    if inner is not None and not isinstance(entry, (list, tuple)):
        entry = inner
    return [_diagnosis_dict(d) for d in entry]


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None or math.isnan(x) else round(x, digits)


@record
class FleetDevice:
    key: str
    node: str
    index: int
    name: str
    uuid: str
    vendor: str
    state: str  # ok | lost | unavailable
    gpu_util_pct: float | None
    sm_active_pct: float | None
    tensor_active_pct: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    primary: str  # primary diagnosis kind, "stale", or "unknown"
    severity: str  # ok | info | warning | critical
    confidence: float | None
    diagnoses: tuple[dict[str, Any], ...]
    idle: bool
    efficiency_pct: float | None
    usd_per_hour: float | None
    idle_usd_per_hour: float
    waste_usd_per_hour: float | None
    error: str | None = None

    @property
    def mem_used_pct(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes

    @property
    def alarm(self) -> bool:
        return self.severity == "critical" or self.state != "ok"

    @property
    def waste_frac(self) -> float:
        if self.state != "ok":
            return 1.0
        return 1.0 - (self.efficiency_pct or 0.0) / 100.0

    def offender_key(self) -> tuple:
        """Sort key, worst first: alarms, then money wasted (or the wasted share when unpriced),
        then severity, then lowest efficiency."""
        waste = self.waste_usd_per_hour if self.waste_usd_per_hour is not None else self.waste_frac
        return (not self.alarm, -waste, -SEVERITY_RANK.get(self.severity, 0),
                self.efficiency_pct if self.efficiency_pct is not None else -1.0,
                self.node, self.index)

    def to_dict(self, age_s: float | None = None) -> dict[str, Any]:
        """``age_s``: the age of the reading in the view (``FleetView.age_of``)."""
        return {
            "key": self.key, "node": self.node, "index": self.index, "name": self.name,
            "uuid": self.uuid, "vendor": self.vendor, "state": self.state, "error": self.error,
            "age_s": _r(age_s, 1),
            "gpu_util_pct": _r(self.gpu_util_pct), "sm_active_pct": _r(self.sm_active_pct),
            "tensor_active_pct": _r(self.tensor_active_pct),
            "mem_used_bytes": self.mem_used_bytes, "mem_total_bytes": self.mem_total_bytes,
            "mem_used_pct": _r(self.mem_used_pct), "power_w": _r(self.power_w),
            "power_limit_w": _r(self.power_limit_w), "temp_c": _r(self.temp_c),
            "primary": self.primary, "severity": self.severity,
            "confidence": _r(self.confidence, 3), "idle": self.idle,
            "efficiency_pct": _r(self.efficiency_pct, 1),
            "usd_per_hour": _r(self.usd_per_hour, 4),
            "idle_usd_per_hour": _idle_usd(self.usd_per_hour, self.idle_usd_per_hour),
            "waste_usd_per_hour": _r(self.waste_usd_per_hour, 4),
            "diagnoses": list(self.diagnoses),
        }


#: What the front ends say in place of an idle cost when no price is known (no ``--instance``):
#: the cost is unknown, not $0.
PRICE_UNKNOWN = "price unknown: --instance TYPE"


def _idle_usd(usd_per_hour: float | None, idle_usd_per_hour: float) -> float | None:
    """The idle cost as JSON data: none when the price is unknown (idle devices would read $0)."""
    return None if usd_per_hour is None else _r(idle_usd_per_hour, 4)


def efficiency_of(d: DeviceSnapshot) -> float | None:
    if d.state != "ok":
        return None
    value = d.sm_active_pct if d.sm_active_pct is not None else d.gpu_util_pct
    return None if value is None else max(0.0, min(100.0, value))


def fleet_device(d: DeviceSnapshot, diagnoses: Sequence[dict[str, Any]],
                 usd_per_hour: float | None) -> FleetDevice:
    efficiency = efficiency_of(d)
    if d.state != "ok":
        primary, severity, confidence = STALE_KIND, "warning", None
        if d.state == "lost":
            primary, severity = "device_lost", "critical"
        idle = False
    elif diagnoses:
        top = diagnoses[0]
        primary, severity, confidence = top["kind"], top.get("severity") or "info", top.get("confidence")
        idle = primary == "idle"
    else:
        primary, severity, confidence = "unknown", "info", None
        idle = (d.gpu_util_pct is not None and d.gpu_util_pct < IDLE_UTIL_MAX_PCT
                and (d.sm_active_pct is None or d.sm_active_pct < IDLE_UTIL_MAX_PCT))
        if idle:
            primary = "idle"
    if diagnoses and d.state == "ok":
        worst = max(SEVERITY_RANK.get(x.get("severity") or "info", 0) for x in diagnoses)
        severity = next(k for k, v in SEVERITY_RANK.items() if v == worst)
    if idle:
        efficiency = 0.0 if efficiency is None else min(efficiency, IDLE_UTIL_MAX_PCT)
    waste = None
    if usd_per_hour is not None:
        waste = usd_per_hour * (1.0 if d.state != "ok" else 1.0 - (efficiency or 0.0) / 100.0)
    return FleetDevice(
        key=d.key, node=d.node, index=d.index, name=d.name, uuid=d.uuid, vendor=d.vendor,
        state=d.state, gpu_util_pct=d.gpu_util_pct, sm_active_pct=d.sm_active_pct,
        tensor_active_pct=d.tensor_active_pct, mem_used_bytes=d.mem_used_bytes,
        mem_total_bytes=d.mem_total_bytes, power_w=d.power_w, power_limit_w=d.power_limit_w,
        temp_c=d.temp_c, primary=primary, severity=severity, confidence=confidence,
        diagnoses=tuple(diagnoses), idle=idle, efficiency_pct=efficiency,
        usd_per_hour=usd_per_hour,
        idle_usd_per_hour=(usd_per_hour or 0.0) if idle else 0.0,
        waste_usd_per_hour=waste, error=d.error)


@record
class NodeRollup:
    node: str
    devices: tuple[FleetDevice, ...]  # by device index (the grid row)
    mean_gpu_util_pct: float | None
    mean_sm_active_pct: float | None
    mem_used_bytes: int
    mem_total_bytes: int
    power_w: float
    worst: FleetDevice | None  # worst offender on this node
    idle_devices: int
    stale_devices: int
    usd_per_hour: float | None
    idle_usd_per_hour: float
    waste_usd_per_hour: float | None
    efficiency_pct: float | None
    errors: tuple[str, ...] = ()
    # a node of an aggregated fleet: its device count (``devices`` is empty until drilled into)
    device_total: int | None = None

    @property
    def device_count(self) -> int:
        return len(self.devices) if self.device_total is None else self.device_total

    @property
    def worst_kind(self) -> str:
        return self.worst.primary if self.worst else "unknown"

    @property
    def worst_severity(self) -> str:
        return self.worst.severity if self.worst else "info"

    @property
    def mem_used_pct(self) -> float | None:
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes if self.mem_total_bytes else None

    def offender_key(self) -> tuple:
        worst = self.worst.offender_key() if self.worst else (True,)
        waste = self.waste_usd_per_hour
        if waste is None and self.device_total is not None:  # aggregated: from the node's means
            waste = self.stale_devices + (self.device_count - self.stale_devices) * (
                1.0 - (self.efficiency_pct or 0.0) / 100.0)
        elif waste is None:
            waste = sum(d.waste_frac for d in self.devices)
        return (worst[0], -waste, -self.idle_devices, self.node)

    def to_dict(self, *, with_devices: bool = True,
                ages: Mapping[str, float | None] | None = None) -> dict[str, Any]:
        """``ages``: each device's reading age by key (``FleetView.ages``)."""
        out = {
            "node": self.node, "devices": self.device_count,
            "mean_gpu_util_pct": _r(self.mean_gpu_util_pct),
            "mean_sm_active_pct": _r(self.mean_sm_active_pct),
            "mem_used_bytes": self.mem_used_bytes, "mem_total_bytes": self.mem_total_bytes,
            "mem_used_pct": _r(self.mem_used_pct), "power_w": _r(self.power_w),
            "worst_kind": self.worst_kind, "worst_severity": self.worst_severity,
            "worst_device": self.worst.key if self.worst else None,
            "idle_devices": self.idle_devices, "stale_devices": self.stale_devices,
            "usd_per_hour": _r(self.usd_per_hour, 4),
            "idle_usd_per_hour": _idle_usd(self.usd_per_hour, self.idle_usd_per_hour),
            "waste_usd_per_hour": _r(self.waste_usd_per_hour, 4),
            "efficiency_pct": _r(self.efficiency_pct, 1), "errors": list(self.errors),
        }
        if with_devices and self.device_total is None:
            ages = ages or {}
            out["device_list"] = [d.to_dict(ages.get(d.key)) for d in self.devices]
        return out


def _node_rollup(node: str, devices: list[FleetDevice], worst: FleetDevice | None,
                 errors: tuple[str, ...]) -> NodeRollup:
    """``devices``: the node's devices by index; ``worst``: its worst offender; ``errors``: the
    snapshot's errors about this node."""
    ok = [d for d in devices if d.state == "ok"]
    priced = [d.usd_per_hour for d in devices if d.usd_per_hour is not None]
    price = sum(priced) if priced else None
    waste = (sum(d.waste_usd_per_hour or 0.0 for d in devices) if price is not None else None)
    eff = _weighted_efficiency(devices)
    return NodeRollup(
        node=node, devices=tuple(devices),
        mean_gpu_util_pct=_mean(d.gpu_util_pct for d in ok),
        mean_sm_active_pct=_mean(d.sm_active_pct for d in ok),
        mem_used_bytes=sum(d.mem_used_bytes or 0 for d in devices),
        mem_total_bytes=sum(d.mem_total_bytes or 0 for d in devices),
        power_w=sum(d.power_w or 0.0 for d in ok),
        worst=worst,
        idle_devices=sum(d.idle for d in devices),
        stale_devices=sum(d.state != "ok" for d in devices),
        usd_per_hour=price, idle_usd_per_hour=sum(d.idle_usd_per_hour for d in devices),
        waste_usd_per_hour=waste, efficiency_pct=eff,
        errors=errors)


def _weighted_efficiency(devices: Sequence[FleetDevice]) -> float | None:
    """Price-weighted mean efficiency (plain mean when unpriced); stale devices count as 0."""
    num = den = 0.0
    for d in devices:
        weight = d.usd_per_hour if d.usd_per_hour else 1.0
        eff = 0.0 if d.state != "ok" else d.efficiency_pct
        if eff is None:
            continue
        num += weight * eff
        den += weight
    return num / den if den else None


def node_prices(devices: Iterable[DeviceSnapshot], instance_prices: Prices) -> dict[str, float]:
    """$/h per device by node, from per-node instance prices (or one price for every node)."""
    if instance_prices is None:
        return {}
    counts: dict[str, int] = {}
    for d in devices:
        counts[d.node] = counts.get(d.node, 0) + 1
    out = {}
    for node, n in counts.items():
        if isinstance(instance_prices, (int, float)):
            price = float(instance_prices)
        else:
            price = instance_prices.get(node, instance_prices.get("*"))
        if price is not None and n:
            out[node] = float(price) / n
    return out


@record
class FleetView:
    timestamp: float
    source: str
    nodes: tuple[NodeRollup, ...]  # worst first
    offenders: tuple[FleetDevice, ...]  # every device, worst first
    utilization_pct: float | None  # mean NVML utilization of reporting devices
    sm_active_pct: float | None
    efficiency_pct: float | None
    usd_per_hour: float | None
    idle_usd_per_hour: float
    waste_usd_per_hour: float | None
    idle_devices: int
    stale_devices: int
    errors: tuple[str, ...] = ()
    message: str | None = None
    _by_node: dict[str, NodeRollup] = field(default_factory=dict, compare=False, repr=False)
    # each device's reading age in this view, by key: kept apart from the devices, so a device
    # whose reading only grew older is the same FleetDevice (and its node the same NodeRollup)
    # from view to view (FleetViews)
    ages: Mapping[str, float | None] = field(default_factory=dict, compare=False, repr=False)
    # a fleet past the threshold, as the server rolled it up (``from_aggregate``): the nodes hold
    # no devices, ``offenders`` are the least-used devices only, ``read_node_view`` drills down
    aggregate: FleetAggregate | None = field(default=None, compare=False, repr=False)

    @property
    def device_count(self) -> int:
        return len(self.offenders) if self.aggregate is None else self.aggregate.device_count

    @property
    def aggregated(self) -> bool:
        """Whether the roll-ups were computed by the server (a fleet past the threshold)."""
        return self.aggregate is not None

    @property
    def jobs(self) -> tuple[JobAggregate, ...]:
        """An aggregated fleet's jobs (``hpc_job``) worst first: most idle devices, then the
        lowest utilization. Empty for a fleet read device by device (``core.cluster`` attributes
        those)."""
        if self.aggregate is None:
            return ()
        return tuple(sorted(self.aggregate.jobs, key=lambda j: (
            -j.idle_devices, j.util_pct if j.util_pct is not None else -1.0, j.job)))

    @property
    def device_usd_per_hour(self) -> float | None:
        """The fleet's GPU price: the median $/h of one device over the priced nodes (a job's
        idle GPUs are charged at it, as the chargeback does)."""
        per = sorted(n.usd_per_hour / n.device_count for n in self.nodes
                     if n.usd_per_hour is not None and n.device_count)
        return per[len(per) // 2] if per else None

    def jobs_dict(self, slurm_jobs: Iterable[SchedulerJob] = (), *, user: str | None = None,
                  account: str | None = None) -> list[dict[str, Any]]:
        """An aggregated fleet's jobs as JSON data, worst first, idle GPUs priced. With
        ``slurm_jobs`` (Slurm's current jobs), each job whose ``hpc_job`` label is a Slurm job id
        (``J_T`` or the raw id) carries Slurm's user, account, state and partition, and ``user``
        / ``account`` keep only the jobs Slurm names with them."""
        price = self.device_usd_per_hour
        by_id: dict[str, SchedulerJob] = {}
        for sj in slurm_jobs:
            for name in sj.ids:
                by_id.setdefault(name, sj)
        rows = []
        for j in self.jobs:
            sj = by_id.get(j.job)
            if (user is not None and (sj is None or sj.user != user)) or (
                    account is not None and (sj is None or sj.account != account)):
                continue
            rows.append({
                "job": j.job, "devices": j.devices, "nodes": j.nodes, "util_pct": _r(j.util_pct),
                "idle_devices": j.idle_devices,
                "idle_usd_per_hour": None if price is None else _r(price * j.idle_devices, 4),
                "user": sj.user if sj else None, "account": sj.account if sj else None,
                "state": sj.state if sj else None, "partition": sj.partition if sj else None})
        return rows

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def age_of(self, device: FleetDevice) -> float | None:
        """Seconds between ``device``'s reading (its scrape) and this view; None = just read."""
        return self.ages.get(device.key)

    def node(self, name: str) -> NodeRollup:
        """Drill-down; KeyError names the nearest node names."""
        try:
            return self._by_node[name]
        except KeyError:
            import difflib

            near = difflib.get_close_matches(name, list(self._by_node), n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise KeyError(f"no node {name!r} in the fleet{hint}") from None

    def node_dict(self, name: str) -> dict[str, Any]:
        """One node as JSON data (``fleet --node NAME --json``), its devices with their ages."""
        return self.node(name).to_dict(ages=self.ages)

    def grid(self) -> list[tuple[str, tuple[FleetDevice, ...]]]:
        """Rows of the nodes × devices grid, worst node first."""
        return [(n.node, n.devices) for n in self.nodes]

    def to_dict(self, *, devices: bool = True) -> dict[str, Any]:
        return {
            "timestamp": round(self.timestamp, 3), "source": self.source, "kind": "fleet",
            "message": self.message, "errors": list(self.errors),
            "fleet": {
                "nodes": self.node_count, "devices": self.device_count,
                "utilization_pct": _r(self.utilization_pct),
                "sm_active_pct": _r(self.sm_active_pct),
                "efficiency_pct": _r(self.efficiency_pct, 1),
                "usd_per_hour": _r(self.usd_per_hour, 4),
                "idle_usd_per_hour": _idle_usd(self.usd_per_hour, self.idle_usd_per_hour),
                "waste_usd_per_hour": _r(self.waste_usd_per_hour, 4),
                "idle_devices": self.idle_devices, "stale_devices": self.stale_devices,
            },
            "nodes": [n.to_dict(with_devices=devices, ages=self.ages) for n in self.nodes],
            "offenders": [d.key for d in self.offenders],
            "aggregated": self.aggregated,
            **({"aggregate": self._aggregate_dict()} if self.aggregate is not None else {}),
        }

    def _aggregate_dict(self) -> dict[str, Any]:
        agg = self.aggregate
        assert agg is not None
        return {
            "on_server": True, "threshold_devices": agg.threshold, "answer_bytes": agg.answer_bytes,
            "counts": dict(agg.counts),
            "worst_devices": [d.to_dict() for d in self.offenders],
            "jobs": self.jobs_dict(),
            "job_devices": sum(j.devices for j in agg.jobs),
        }

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, diagnoses: Mapping[str, Any] | None = None,
                      instance_prices: Prices = None) -> "FleetView":
        """``diagnoses`` maps ``DeviceSnapshot.key`` to an ``analysis.DeviceAnalysis`` (or a list
        of diagnoses); ``instance_prices`` is $/h per node (``"*"`` = any node) or one number."""
        if snapshot.aggregate is not None:
            return cls.from_aggregate(snapshot, instance_prices)
        diagnoses = diagnoses or {}
        return cls.from_converted(snapshot, {d.key: _diagnoses_of(diagnoses.get(d.key))
                                             for d in snapshot.devices}, instance_prices)

    @classmethod
    def from_converted(cls, snapshot: Snapshot, diagnoses: Mapping[str, Sequence[dict[str, Any]]],
                       instance_prices: Prices = None) -> "FleetView":
        """``diagnoses``: each device's diagnoses already as JSON-ready dicts, worst first."""
        per_device_price = node_prices(snapshot.devices, instance_prices)
        return cls.from_devices(snapshot, [
            fleet_device(d, diagnoses.get(d.key, ()), per_device_price.get(d.node))
            for d in snapshot.devices])

    @classmethod
    def from_devices(cls, snapshot: Snapshot, fleet_devices: Sequence[FleetDevice],
                     offender_keys: Sequence[tuple] | None = None, *,
                     ages: Mapping[str, float | None] | None = None,
                     last: "FleetView | None" = None) -> "FleetView":
        """The roll-ups of ``snapshot``'s devices already made ``FleetDevice``s (in its order);
        ``offender_keys``: their ``offender_key()``s where the caller kept them; ``ages``: the
        readings' ages by key where the caller made them (else read from ``snapshot``); ``last``:
        a previous view whose node roll-ups are reused where a node has the same devices (the
        same objects) and errors: at 4,096 GPUs scraped every 15 s, ~7/8 of the nodes."""
        if offender_keys is None:
            offender_keys = [fd.offender_key() for fd in fleet_devices]
        if ages is None:
            ages = {d.key: snapshot.age_of(d) for d in snapshot.devices}
        rank = offender_keys.__getitem__  # devices are handled by position: no pairs to allocate
        by_node: dict[str, list[int]] = {}
        for i, fd in enumerate(fleet_devices):
            by_node.setdefault(fd.node, []).append(i)
        before = last._by_node if last is not None else {}
        errors = snapshot.errors
        nodes = []
        for node, where in by_node.items():
            if len(where) > 1:
                where.sort(key=lambda i: (fleet_devices[i].index, fleet_devices[i].uuid))
            devices = [fleet_devices[i] for i in where]
            node_errors = tuple(e for e in errors if e.startswith(f"{node}:")) if errors else ()
            kept = before.get(node)
            if (kept is not None and kept.errors == node_errors
                    and len(kept.devices) == len(devices)
                    and all(a is b for a, b in zip(kept.devices, devices))):
                nodes.append(kept)  # the same readings, diagnoses and prices: the same roll-up
                continue
            nodes.append(_node_rollup(node, devices, fleet_devices[min(where, key=rank)],
                                      node_errors))
        nodes.sort(key=NodeRollup.offender_key)
        in_node_order = [i for n in nodes for i in by_node[n.node]]
        devices = [fleet_devices[i] for i in in_node_order]
        offenders = tuple(fleet_devices[i] for i in sorted(in_node_order, key=rank))
        ok = [d for d in devices if d.state == "ok"]
        priced = [d.usd_per_hour for d in devices if d.usd_per_hour is not None]
        price = sum(priced) if priced else None
        return cls(
            timestamp=snapshot.timestamp, source=snapshot.source, nodes=tuple(nodes),
            offenders=offenders,
            utilization_pct=_mean(d.gpu_util_pct for d in ok),
            sm_active_pct=_mean(d.sm_active_pct for d in ok),
            efficiency_pct=_weighted_efficiency(devices),
            usd_per_hour=price,
            idle_usd_per_hour=sum(d.idle_usd_per_hour for d in devices),
            waste_usd_per_hour=(sum(d.waste_usd_per_hour or 0.0 for d in devices)
                                if price is not None else None),
            idle_devices=sum(d.idle for d in devices),
            stale_devices=sum(d.state != "ok" for d in devices),
            errors=snapshot.errors, message=snapshot.message,
            _by_node={n.node: n for n in nodes}, ages=ages,
        )


    @classmethod
    def from_aggregate(cls, snapshot: Snapshot, instance_prices: Prices = None) -> "FleetView":
        """The view of a fleet the server rolled up (``snapshot.aggregate``): a node roll-up per
        node from its counts and means, the least-used devices as the offenders. Prices as in
        ``from_snapshot`` (a node's price split among its devices)."""
        agg = snapshot.aggregate
        if agg is None:
            raise ValueError("from_aggregate: the snapshot carries no aggregate")
        totals = {n.node: n.devices + n.stale_devices for n in agg.nodes}
        prices = {n: p for n in totals if (p := _node_price(instance_prices, n)) is not None}
        offenders = tuple(_worst_device(w, _split(prices.get(w.node), totals.get(w.node, 0)))
                          for w in agg.worst)
        first: dict[str, FleetDevice] = {}
        for d in offenders:
            first.setdefault(d.node, d)
        errors = snapshot.errors
        nodes = [_aggregate_rollup(n, first.get(n.node), prices.get(n.node),
                                   tuple(e for e in errors if e.startswith(f"{n.node}:")))
                 for n in agg.nodes]
        nodes.sort(key=NodeRollup.offender_key)
        priced = [n.usd_per_hour for n in nodes if n.usd_per_hour is not None]
        price = sum(priced) if priced else None
        return cls(
            timestamp=snapshot.timestamp, source=snapshot.source, nodes=tuple(nodes),
            offenders=offenders, utilization_pct=agg.utilization_pct,
            sm_active_pct=_weighted((n.sm_active_pct, n.devices) for n in agg.nodes),
            efficiency_pct=_weighted((n.efficiency_pct, _weight(n)) for n in nodes),
            usd_per_hour=price, idle_usd_per_hour=sum(n.idle_usd_per_hour for n in nodes),
            waste_usd_per_hour=(sum(n.waste_usd_per_hour or 0.0 for n in nodes)
                                if price is not None else None),
            idle_devices=agg.idle_devices, stale_devices=agg.stale_devices,
            errors=errors, message=snapshot.message, _by_node={n.node: n for n in nodes},
            aggregate=agg)


def _node_price(instance_prices: Prices, node: str) -> float | None:
    """$/h of ``node`` from ``instance_prices`` (as ``node_prices`` reads them)."""
    if instance_prices is None:
        return None
    if isinstance(instance_prices, (int, float)):
        return float(instance_prices)
    price = instance_prices.get(node, instance_prices.get("*"))
    return None if price is None else float(price)


def _split(node_price: float | None, devices: int) -> float | None:
    return node_price / devices if node_price is not None and devices else None


def _weighted(pairs: Iterable[tuple[float | None, float]]) -> float | None:
    known = [(v, w) for v, w in pairs if v is not None and w]
    total = sum(w for _, w in known)
    return sum(v * w for v, w in known) / total if total else None


def _weight(n: NodeRollup) -> float:
    """A node's weight in the fleet's efficiency: its price, else its device count."""
    return n.usd_per_hour if n.usd_per_hour else float(n.device_count)


def _worst_device(w: WorstDevice, usd_per_hour: float | None) -> FleetDevice:
    """One of the least-used devices of an aggregated fleet (its utilization only; the idle rule
    without a diagnosis, as ``fleet_device``)."""
    util = w.util_pct
    idle = util is not None and util < IDLE_UTIL_MAX_PCT
    efficiency = None if util is None else max(0.0, min(100.0, util))
    if idle:
        efficiency = min(efficiency or 0.0, IDLE_UTIL_MAX_PCT)
    return FleetDevice(
        key=f"{w.node}/{w.uuid or w.index}", node=w.node, index=w.index if w.index is not None else -1,
        name="", uuid=w.uuid, vendor="nvidia", state="ok", gpu_util_pct=util, sm_active_pct=None,
        tensor_active_pct=None, mem_used_bytes=None, mem_total_bytes=None, power_w=None,
        power_limit_w=None, temp_c=None, primary="idle" if idle else "unknown", severity="info",
        confidence=None, diagnoses=(), idle=idle, efficiency_pct=efficiency,
        usd_per_hour=usd_per_hour, idle_usd_per_hour=(usd_per_hour or 0.0) if idle else 0.0,
        waste_usd_per_hour=(None if usd_per_hour is None
                            else usd_per_hour * (1.0 - (efficiency or 0.0) / 100.0)))


def _aggregate_rollup(n: NodeAggregate, worst: FleetDevice | None, price: float | None,
                      errors: tuple[str, ...]) -> NodeRollup:
    """A node of an aggregated fleet: its means and counts; efficiency is SM activity where
    exported, else utilization, with its stale devices counted as 0 (as ``_weighted_efficiency``)."""
    total = n.devices + n.stale_devices
    mean = n.sm_active_pct if n.sm_active_pct is not None else n.util_pct
    eff = None if mean is None or not total else max(0.0, min(100.0, mean)) * n.devices / total
    per_device = _split(price, total)
    return NodeRollup(
        node=n.node, devices=(), mean_gpu_util_pct=n.util_pct, mean_sm_active_pct=n.sm_active_pct,
        mem_used_bytes=n.mem_used_bytes or 0, mem_total_bytes=n.mem_total_bytes or 0,
        power_w=n.power_w or 0.0, worst=worst, idle_devices=n.idle_devices,
        stale_devices=n.stale_devices, usd_per_hour=price,
        idle_usd_per_hour=(per_device or 0.0) * n.idle_devices,
        waste_usd_per_hour=None if price is None else price * (1.0 - (eff or 0.0) / 100.0),
        efficiency_pct=eff, errors=errors, device_total=total)


def read_node_view(source: Any, node: str, instance_prices: Prices = None) -> FleetView:
    """A drill-down into one node of an aggregated fleet: that node's devices read in full
    (``PrometheusSource.read_node``, blocking: call it off the event loop) as a one-node view
    (no window behind it, so the idle rule without a diagnosis). Raises what ``read_node``
    raises."""
    return FleetView.from_snapshot(source.read_node(node), None, instance_prices)


def fleet_json(snapshot: Snapshot, diagnoses: Mapping[str, Any] | None = None,
               instance_prices: Prices = None, *, devices: bool = True) -> dict[str, Any]:
    """The fleet view as JSON-ready data (``monitor --once --json`` for a fleet source)."""
    return FleetView.from_snapshot(snapshot, diagnoses, instance_prices).to_dict(devices=devices)


class FleetViews:
    """An engine subscriber: each tick (snapshot + per-device analyses) as a ``FleetView``.

    A fleet device's analysis is kept while its window is unchanged (``FleetWindowPolicy``), so
    its JSON-ready diagnoses are converted once per analysis, not once per refresh; a device whose
    reading (but for its age), diagnoses and price are those of the last view keeps its
    ``FleetDevice``, and a node all of whose devices were kept keeps its ``NodeRollup``: at 4,096
    GPUs scraped every 15 s, ~7/8 of them each refresh. The ages are the view's ``ages``.

    Not for two threads at once (the panes build views in one exclusive worker at a time)."""

    def __init__(self, instance_prices: Prices = None):
        self.instance_prices = instance_prices
        self._converted: dict[str, tuple[Any, tuple[dict[str, Any], ...]]] = {}
        # key -> (reading, its diagnoses, its $/h, the FleetDevice made of them, its offender key,
        # the reading without its age once compared)
        self._devices: dict[str, tuple[DeviceSnapshot, tuple, float | None, FleetDevice, tuple,
                                       tuple | None]] = {}
        self.latest: FleetView | None = None

    def __call__(self, tick: Any) -> FleetView:
        return self.view(tick.snapshot, tick.analyses)

    def view(self, snapshot: Snapshot, analyses: Mapping[str, Any]) -> FleetView:
        if snapshot.aggregate is not None:  # a fleet past the threshold: the server's roll-ups
            self._devices, self._converted = {}, {}
            self.latest = FleetView.from_aggregate(snapshot, self.instance_prices)
            return self.latest
        cache = self._converted
        converted = {}
        for key, analysis in analyses.items():
            kept = cache.get(key)
            if kept is None or kept[0] is not analysis:
                kept = cache[key] = (analysis, tuple(_diagnoses_of(analysis)))
            converted[key] = kept[1]
        if len(cache) > 2 * len(analyses) + 64:  # devices gone from the fleet
            self._converted = {k: v for k, v in cache.items() if k in analyses}
        prices = node_prices(snapshot.devices, self.instance_prices)
        before, made, ages = self._devices, {}, {}
        fleet_devices, offender_keys = [], []
        handed_on = snapshot.device_ages  # readings as first read, only older: their ages now
        for d in snapshot.devices:
            key = d.key
            diagnoses, price = converted.get(key, ()), prices.get(d.node)
            kept = before.get(key)
            if kept is None or kept[1] is not diagnoses or kept[2] != price:
                kept = None  # a new analysis or price (every device with a new reading)
            elif kept[0] is not d:  # the same reading, only older? (the age is not compared)
                if kept[5] is None:  # its reading as a tuple, made once
                    kept = (*kept[:5], _reading(kept[0]))
                if _reading(d) != kept[5]:
                    kept = None
            if kept is None:
                fd = fleet_device(d, diagnoses, price)
                kept = (d, diagnoses, price, fd, fd.offender_key(), None)
            # else: the same reading, maybe older: the same FleetDevice (its age is in ``ages``)
            made[key] = kept
            ages[key] = handed_on.get(key, d.age_s)
            fleet_devices.append(kept[3])
            offender_keys.append(kept[4])
        self._devices = made
        self.latest = FleetView.from_devices(snapshot, fleet_devices, offender_keys, ages=ages,
                                             last=self.latest)
        return self.latest


# A reading without its age (FleetViews' reuse).
_reading = attrgetter(*(f.name for f in fields(DeviceSnapshot) if f.name != "age_s"))


def instance_price_usd_per_hour(instance_type: str, *, pricing: str = "on-demand",
                                catalog_dirs: Sequence[str] = ()) -> float:
    """The cheapest listed ``pricing`` price of an instance type across regions (UserError for an
    unknown type, naming the nearest ones)."""
    from fleet_tui.core.catalog import load_catalog  # pydantic: only when pricing
    from fleet_tui.core.errors import FieldError

    offers = load_catalog(catalog_dirs).find_instance(instance_type)
    prices = [p for p in (o.price(pricing) for o in offers) if p is not None]
    if not prices:
        raise FieldError("instance", f"{{instance}} {instance_type}: the catalog lists no "
                         f"{pricing} price for it")
    return min(prices)


async def read_fleet_view(source, *, window_s: float = 30.0,
                          instance_prices: Prices = None) -> FleetView:
    """One-shot fleet view (``fleet``): the engine with the fleet policy over ``window_s``
    backfills that much history where the source can (Prometheus range query), then reads now, so
    diagnoses rest on a window rather than one reading. Opens and closes ``source``."""
    engine = MonitorEngine(source, alert_rules=[], price=False,
                           policy=FleetWindowPolicy(seconds=window_s))
    views = FleetViews(instance_prices)
    engine.subscribe(views)
    with one_deadline(source):
        await engine.run(count=1)
    if views.latest is None:  # run(count=1) steps once and each step publishes a tick
        raise RuntimeError("the monitor engine published no tick")
    return views.latest


@contextmanager
def one_deadline(source: Any) -> Iterator[None]:
    """A one-shot read (backfill + reading) as one operation: a source with a timeout (Prometheus)
    ends every request of it before one shared deadline, so ``--timeout`` bounds the command."""
    begin = getattr(source, "begin_operation", None)
    if begin is None:
        yield
        return
    begin()
    try:
        yield
    finally:
        source.end_operation()


def unavailable_reason(errors: Sequence[str], message: str | None) -> str:
    """Why a one-shot read found no devices: the source's own words without its "retrying in"
    note (a one-shot command does not retry). ``fleet`` and ``monitor --once`` both fail with it,
    so the same situation gives the same answer."""
    why = (errors[0] if errors else message) or "no devices"
    return why.split("; retrying")[0]
