"""The GPUs of a few named nodes (or of one job label) on a fleet read as aggregates: what Slurm's
allocations need to be joined with, without reading every device of the fleet.

On an aggregated fleet (``aggregate``) the client holds no device, but attribution by Slurm asks
which GPU (node, minor number) did what. The nodes Slurm's running jobs hold are named, so one
instant query restricted to those nodes — a regex on ``Hostname``, else ``hostname``, else the
scrape ``instance``, as ``parse.node_of`` names a node — and grouped by the server to one series
per device and part, carrying only the labels the join needs (the node, ``gpu``, ``device``
(``nvidiaN``: the minor number Slurm's GRES index follows) and ``hpc_job``), gives each device's
utilization, SM activity and whether the fleet's idle rule (``aggregate.idle_expr``) holds now:

- ``dev_util``: ``max by (node, gpu, device, hpc_job)`` of ``DCGM_FI_DEV_GPU_UTIL`` of those nodes;
- ``dev_sm``: the same of ``DCGM_FI_PROF_SM_ACTIVE`` (a 0..1 ratio), by node and gpu;
- ``dev_idle``: the idle devices among them, by node and gpu.

A device's answer is up to 3 series of ~100 bytes; ``read_node_devices`` asks ``CHUNK_NODES``
nodes a query, 1.25 MB an answer at 8 GPUs a node (bench/bench_aggjobs.py, docs/head-node.md).
``build_node_label_query`` asks the whole fleet for each node's ``hpc_job`` labels and how many GPUs
carry each (one series per labelled node and label), so a caller can tell the nodes whose labels
agree with Slurm from those to read device by device. ``build_job_label_query`` asks for the
devices whose ``hpc_job`` is one job (a report without Slurm). MIG instances (``GPU_I_ID``) of one
GPU fold into the GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fleet_tui.core.monitor.sources.prometheus.aggregate import (
    AGG_LABEL,
    JOB_LABEL,
    NODE_KEY,
    idle_expr,
    per_device,
    tag_part,
)
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient
from fleet_tui.core.monitor.sources.prometheus.metrics import DCGM_ID_LABELS
from fleet_tui.core.monitor.sources.prometheus.parse import parse_envelope, parse_value

__all__ = ["MAX_NODES", "DeviceReading", "build_allocation_query", "build_job_label_query",
           "build_node_label_query", "node_labels_from_answer", "read_job_devices",
           "read_node_devices", "read_node_labels", "readings_from_answer"]

CHUNK_NODES = 512  # nodes per per-device query: ~4,096 GPUs, ~1.3 MB (bench/bench_aggjobs.py)
MAX_NODES = 16384  # node names in one query's regex (~200 kB of PromQL at 12-character names)
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_SM = "DCGM_FI_PROF_SM_ACTIVE"


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """One device of the asked nodes, as the server grouped it."""

    node: str
    gpu: int
    device: str  # dcgm-exporter's ``device`` label (``nvidia3``), "" where not exported
    hpc_job: str  # "" where the series carry no job label
    util_pct: float | None
    sm_active_pct: float | None
    idle: bool


def _node_regex(nodes: Iterable[str]) -> str:
    """A PromQL regex literal (inside double quotes) matching each of ``nodes`` as a host name,
    with or without a domain. ValueError for a name that is no host name."""
    names = sorted({n for n in nodes})
    if len(names) > MAX_NODES:
        raise ValueError(f"{len(names)} nodes: at most {MAX_NODES} in one query")
    for n in names:
        if not _NODE_NAME.fullmatch(n):
            raise ValueError(f"node name {n[:60]!r}: expected a host name (letters, digits, "
                             "'.', '_', '-')")
    return "|".join(n.replace(".", "\\\\.") for n in names)


def _on_nodes(metric: str, regex: str) -> str:
    """``metric``'s series of the nodes ``regex`` names, however the exporter names its node."""
    return (f'{metric}{{Hostname=~"({regex})([.].*)?"}} or '
            f'{metric}{{Hostname="", hostname=~"({regex})([.].*)?"}} or '
            f'{metric}{{Hostname="", hostname="", instance=~"({regex})([.:].*)?"}}')


def _parts(util_expr: str, sm_expr: str) -> str:
    util = per_device(util_expr, "device", JOB_LABEL)
    ids = ", ".join(DCGM_ID_LABELS)
    return " or ".join([
        tag_part(f"max by ({NODE_KEY}, gpu, device, {JOB_LABEL}) ({util})", "dev_util"),
        tag_part(f"max by ({NODE_KEY}, gpu) ({per_device(sm_expr)})", "dev_sm"),
        tag_part(f"max by ({NODE_KEY}, gpu) (({idle_expr()}) and on ({ids}) ({util}))",
                 "dev_idle"),
    ])


def build_allocation_query(nodes: Sequence[str]) -> str:
    """One instant query: every GPU of ``nodes`` (Slurm's names), one series per device and part."""
    regex = _node_regex(nodes)
    if not regex:
        raise ValueError("no node to read")
    return _parts(_on_nodes(_UTIL, regex), _on_nodes(_SM, regex))


def build_node_label_query() -> str:
    """One instant query: per node, each ``hpc_job`` label its GPUs carry now and how many carry
    it (one series per node and label: ~100 bytes a labelled node)."""
    util = per_device(f'{_UTIL}{{{JOB_LABEL}!=""}}', JOB_LABEL)
    return tag_part(f"count by ({NODE_KEY}, {JOB_LABEL}) ({util})", "node_label")


def node_labels_from_answer(body: bytes) -> dict[str, dict[str, int]]:
    """node -> hpc_job label -> GPUs carrying it, from an answer of ``build_node_label_query``."""
    out: dict[str, dict[str, int]] = {}
    for item in parse_envelope(body):
        labels: Mapping[str, str] = item.get("metric") or {}
        if labels.get(AGG_LABEL) != "node_label" or not labels.get(JOB_LABEL):
            continue
        value = item.get("value") or (None, None)
        v = parse_value(value[1] if len(value) > 1 else None)
        node = out.setdefault(labels.get(NODE_KEY, ""), {})
        node[labels[JOB_LABEL]] = int(v or 0)
    return out


def read_node_labels(client: PrometheusClient, *, deadline: Deadline | None = None,
                     ) -> tuple[dict[str, dict[str, int]], int]:
    """``node_labels_from_answer`` of the fleet now, and the answer's size in bytes."""
    body = client.query_body(build_node_label_query(), deadline)
    return node_labels_from_answer(body), len(body)


def build_job_label_query(job: str) -> str:
    """The same for the devices whose ``hpc_job`` label is ``job`` now."""
    if not job or len(job) > 200 or any(c in job for c in '"\\\n'):
        raise ValueError(f"job {job[:60]!r}: expected a job id without quotes or backslashes")
    util = f'{_UTIL}{{{JOB_LABEL}="{job}"}}'
    # SM activity carries the same label where the exporter maps jobs
    return _parts(util, f'{_SM}{{{JOB_LABEL}="{job}"}}')


def readings_from_answer(body: bytes) -> list[DeviceReading]:
    """The devices in one answer of ``build_allocation_query``, by node then GPU."""
    util: dict[tuple[str, int], tuple[str, str, float | None]] = {}
    sm: dict[tuple[str, int], float | None] = {}
    idle: set[tuple[str, int]] = set()
    for item in parse_envelope(body):
        labels: Mapping[str, str] = item.get("metric") or {}
        gpu = labels.get("gpu", "")
        if not (gpu.isascii() and gpu.isdigit() and len(gpu) <= 6):
            continue
        key = (labels.get(NODE_KEY, ""), int(gpu))
        value = item.get("value") or (None, None)
        v = parse_value(value[1] if len(value) > 1 else None)
        part = labels.get(AGG_LABEL, "")
        if part == "dev_util":
            util[key] = (labels.get("device", ""), labels.get(JOB_LABEL, ""), v)
        elif part == "dev_sm":
            sm[key] = None if v is None else 100.0 * v
        elif part == "dev_idle":
            idle.add(key)
    return [DeviceReading(node=node, gpu=gpu, device=device, hpc_job=job, util_pct=u,
                          sm_active_pct=sm.get((node, gpu)), idle=(node, gpu) in idle)
            for (node, gpu), (device, job, u) in sorted(util.items())]


def read_node_devices(client: PrometheusClient, nodes: Sequence[str], *,
                      deadline: Deadline | None = None) -> tuple[list[DeviceReading], int]:
    """The GPUs of ``nodes`` now (``CHUNK_NODES`` nodes a query), and the largest answer's size
    in bytes (none read for no node)."""
    out: list[DeviceReading] = []
    size = 0
    names = sorted(set(nodes))
    for at in range(0, len(names), CHUNK_NODES):  # each answer under ~1.6 MB at 8 GPUs a node
        body = client.query_body(build_allocation_query(names[at:at + CHUNK_NODES]), deadline)
        out += readings_from_answer(body)
        size = max(size, len(body))
    return out, size


def read_job_devices(client: PrometheusClient, job: str, *,
                     deadline: Deadline | None = None) -> tuple[list[DeviceReading], int]:
    """The GPUs whose ``hpc_job`` label is ``job`` now, and the answer's size in bytes."""
    body = client.query_body(build_job_label_query(job), deadline)
    return readings_from_answer(body), len(body)
