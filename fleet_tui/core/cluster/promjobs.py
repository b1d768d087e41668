"""Which job, pod or user each device of a Prometheus fleet belongs to, from the labels and gauges
its exporters publish — the input ``jobs.job_view`` attributes devices with.

The fleet source's per-refresh query keeps only the labels that identify a device (``max by``), so
job labels are read by one query of their own, once per jobs refresh:

- every device's carrier series (``DCGM_FI_DEV_GPU_UTIL``, AMD's ``gpu_gfx_activity``) grouped by
  the device labels plus the job labels (``metrics.JOB_LABELS``: dcgm-exporter's ``hpc_job`` and
  ``pod``/``namespace``/``container``; AMD device-metrics-exporter's ``job_id``/``job_user``);
- Princeton jobstats' ``nvidia_gpu_jobId``/``nvidia_gpu_jobUid`` gauges (value = Slurm job id /
  owner uid, labelled ``uuid`` and ``minor_number``; a different exporter, so they are joined to
  the DCGM device by UUID, else by host and GPU index — jobstats joins them by UUID for the same
  reason). A job id of 0 means no job.

Empty label values (dcgm-exporter and AMD's exporter clear them when a job ends) mean no job.
"""

from __future__ import annotations

import asyncio
import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet_tui.core.cluster.jobs import DeviceUsage, short_node
from fleet_tui.core.monitor.sources.prometheus.metrics import JOB_CARRIERS, JOB_ID_GAUGE, JOB_LABELS, JOB_UID_GAUGE
from fleet_tui.core.monitor.sources.prometheus.parse import node_of, parse_value

# labels that say which device a carrier series is about (DCGM and AMD's exporter)
DEVICE_LABELS = ("Hostname", "hostname", "instance", "gpu", "gpu_id", "UUID", "uuid", "gpu_uuid",
                 "device")
# kept with the job labels: the GPU's minor number, which Slurm's GRES index follows
MINOR_LABELS = ("device", "minor_number")


def job_label_query() -> str:
    """One instant query: each device's job labels, and the jobstats job-id gauges."""
    by = ", ".join((*DEVICE_LABELS, *JOB_LABELS))
    carriers = '{__name__=~"%s"}' % "|".join(JOB_CARRIERS)
    gauges = '{__name__=~"%s|%s"}' % (JOB_ID_GAUGE, JOB_UID_GAUGE)
    return f"group by ({by}) ({carriers}) or {gauges}"


def _index(labels: Mapping[str, str]) -> int | None:
    for key in ("gpu", "gpu_id", "minor_number"):
        raw = labels.get(key)
        if raw is not None and raw.isdigit():
            return int(raw)
    return None


def _user_of_uid(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"uid {uid}"


@dataclass(slots=True)
class DeviceLabels:
    """Job labels per device: by UUID (most exporters carry it) and by (short node, GPU index)."""

    by_uuid: dict[str, dict[str, str]] = field(default_factory=dict)
    by_slot: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)

    def add(self, labels: Mapping[str, str], uuid: str, node: str, index: int | None) -> None:
        if not labels:
            return
        if uuid:
            self.by_uuid.setdefault(uuid, {}).update(labels)
        if node and index is not None:
            self.by_slot.setdefault((short_node(node), index), {}).update(labels)

    def for_device(self, node: str, index: int, uuid: str = "") -> dict[str, str]:
        found = self.by_uuid.get(uuid) if uuid else None
        if found is None:
            found = self.by_slot.get((short_node(node), index))
        return dict(found or {})

    def __len__(self) -> int:
        return max(len(self.by_uuid), len(self.by_slot))


def labels_from_result(result: Iterable[Mapping[str, Any]]) -> DeviceLabels:
    """The answer of :func:`job_label_query` (``data.result``) -> job labels per device."""
    out = DeviceLabels()
    for item in result:
        try:
            labels = item["metric"]
            raw = item["value"][1]
        except (KeyError, IndexError, TypeError):
            continue
        name = labels.get("__name__", "")
        uuid = labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid") or ""
        node = node_of(labels)
        index = _index(labels)
        if name in (JOB_ID_GAUGE, JOB_UID_GAUGE):
            value = parse_value(raw)
            if value is None or value <= 0:
                continue
            key, text = ("jobId", str(int(value))) if name == JOB_ID_GAUGE else \
                        ("jobUser", _user_of_uid(int(value)))
            found = {key: text}
            if labels.get("minor_number"):
                found["minor_number"] = labels["minor_number"]
            out.add(found, uuid, node, index)
            continue
        found = {k: labels[k] for k in (*JOB_LABELS, *MINOR_LABELS) if labels.get(k)}
        out.add(found, uuid, node, index)
    return out


async def read_device_labels(source: Any) -> DeviceLabels:
    """Job labels of every device ``source`` serves; empty for sources without a Prometheus API
    (a local GPU has no job labels). Runs the HTTP request in a worker thread."""
    query = getattr(source, "query_instant", None)
    if query is None:
        return DeviceLabels()
    return labels_from_result(await asyncio.to_thread(query, job_label_query()))


def usages_from_view(view: Any, labels: DeviceLabels, *, observed_s: float) -> list[DeviceUsage]:
    """Every device of a ``core.fleet.FleetView`` as a DeviceUsage carrying its job labels."""
    return [DeviceUsage.from_fleet_device(d, labels.for_device(d.node, d.index, d.uuid),
                                          observed_s=observed_s)
            for d in view.offenders]
