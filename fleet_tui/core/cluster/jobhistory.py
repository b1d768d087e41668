"""A job's GPUs over its whole life, from the fleet's Prometheus history: what ``jobs report`` shows
for a job that is running or already finished (in the spirit of Princeton's ``jobstats``).

Method. One ``query_range`` over ``[start, end]`` of the job (sacct's times; a running job ends
now) for the DCGM series of the job's nodes (utilization, SM activity, framebuffer used/free,
power), at a step of ``max(MIN_STEP_S, span / MAX_POINTS)`` so an answer has at most
``MAX_POINTS`` samples per series whatever the job's length. Which of a node's GPUs were the
job's:

1. the samples whose ``hpc_job`` (dcgm-exporter's HPC job mapping) names the job — the label
   changes with the job, so these are exactly the job's samples on exactly its GPUs;
2. without that label, every GPU of a node the job held whole (its GPU count per node equals the
   GPUs the node's history shows);
3. otherwise the GPUs cannot be told apart and the report says so (sacct keeps no GPU indices).

Each GPU's samples become a ``DeviceUsage`` through ``phases.usage_from_samples`` (the monitor's
single-box diagnosis per 5-minute window), and the job one ``JobUsage`` (``jobs.rollup_job``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet_tui.core.cluster.device_phases import usage_from_samples
from fleet_tui.core.cluster.jobs import JobUsage, rollup_job, short_node
from fleet_tui.core.cluster.slurm import SlurmJob
from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.monitor.sources.prometheus.parse import node_of, parse_value

MAX_POINTS = 720  # samples per series per answer (Prometheus refuses more than 11,000)
MIN_STEP_S = 1.0
# metric -> (DeviceSnapshot field, scale); framebuffer in MiB
JOB_METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", 2.0**20),
    "DCGM_FI_DEV_FB_FREE": ("mem_free_bytes", 2.0**20),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
}
NODE_LABELS = ("Hostname", "hostname", "instance")


def range_step_s(start: float, end: float) -> float:
    return max(MIN_STEP_S, math.ceil(max(0.0, end - start) / MAX_POINTS))


def _regex_literal(text: str) -> str:
    return "".join("\\\\" + c if c in r".^$*+?()[]{}|\\" else c for c in text).replace('"', '\\"')


def job_history_query(nodes: Iterable[str]) -> str:
    """The DCGM series of ``nodes`` (as Hostname, or as the scrape instance with a port)."""
    names = "|".join(JOB_METRICS)
    hosts = "|".join(_regex_literal(short_node(n)) for n in nodes)
    parts = [f'{{__name__=~"{names}", Hostname=~"({hosts})([.].*)?"}}',
             f'{{__name__=~"{names}", Hostname="", instance=~"({hosts})([.:].*)?"}}']
    return " or ".join(parts)


def _slot(labels: Mapping[str, str]) -> tuple[str, int] | None:
    raw = labels.get("gpu", "")
    if not raw.isdigit():
        return None
    return short_node(node_of(labels)), int(raw)


def _samples(matrix: Sequence[Mapping[str, Any]], job_ids: set[str], by_label: bool,
             ) -> tuple[dict[tuple[str, int], list[DeviceSnapshot]], dict[tuple[str, int], str]]:
    """Per GPU, its snapshots (oldest first); with ``by_label`` only the job-labelled series."""
    values: dict[tuple[str, int], dict[float, dict[str, float]]] = {}
    minors: dict[tuple[str, int], str] = {}
    for series in matrix:
        labels = series.get("metric") if isinstance(series, Mapping) else None
        points = series.get("values") if isinstance(series, Mapping) else None
        if not isinstance(labels, Mapping) or not isinstance(points, list):
            continue
        name = labels.get("__name__", "")
        slot = _slot(labels)
        if name not in JOB_METRICS or slot is None:
            continue
        if by_label and labels.get("hpc_job", "") not in job_ids:
            continue
        if labels.get("device"):
            minors[slot] = labels["device"]
        field, scale = JOB_METRICS[name]
        per_time = values.setdefault(slot, {})
        for pair in points[: MAX_POINTS * 2]:
            try:
                ts, v = float(pair[0]), parse_value(pair[1])
            except (TypeError, ValueError, IndexError):
                continue
            if v is not None:
                per_time.setdefault(ts, {})[field] = v * scale
    out: dict[tuple[str, int], list[DeviceSnapshot]] = {}
    for (node, index), per_time in values.items():
        snaps = []
        for ts in sorted(per_time):
            f = per_time[ts]
            used, free = f.get("mem_used_bytes"), f.get("mem_free_bytes")
            snaps.append(DeviceSnapshot(
                index=index, name="", node=node, timestamp=ts,
                gpu_util_pct=f.get("gpu_util_pct"), sm_active_pct=f.get("sm_active_pct"),
                mem_used_bytes=None if used is None else int(used),
                mem_total_bytes=None if used is None or free is None else int(used + free),
                power_w=f.get("power_w")))
        if snaps:
            out[(node, index)] = snaps
    return out, minors


class JobHistory:
    """The answer for one job: its usage over its life, or why there is none."""

    def __init__(self, job: JobUsage | None, note: str | None, power_w: float | None = None,
                 step_s: float = 0.0, samples: int = 0):
        self.job = job
        self.note = note
        self.power_w = power_w  # mean over the job's GPUs and samples
        self.step_s = step_s
        self.samples = samples


def job_history(query_range: Any, sj: SlurmJob, *, now: float,
                usd_per_gpu_hour: float | None = None) -> JobHistory:
    """``query_range(query, start, end, step_s)`` is the Prometheus source's; ``sj`` the job as
    sacct (or squeue) knows it."""
    if not sj.started or sj.start_s is None:
        return JobHistory(None, f"job {sj.job} never started: it has no GPU history")
    end = min(now, sj.end_s) if sj.end_s and sj.state not in ("RUNNING", "SUSPENDED") else now
    start = sj.start_s
    step = range_step_s(start, end)
    matrix = query_range(job_history_query(sj.nodes), start, max(end, start + step), step)
    ids = set(sj.ids)
    samples, minors = _samples(matrix, ids, by_label=True)
    how = "hpc_job"
    if not samples:
        every, minors = _samples(matrix, ids, by_label=False)
        per_node = sj.gpus / max(1, len(sj.nodes))
        held_whole = [n for n in {k[0] for k in every}
                      if sum(1 for k in every if k[0] == n) == per_node]
        if not every:
            return JobHistory(None, f"no GPU history for the job's nodes "
                                    f"({', '.join(sj.nodes)}) between its start and end",
                              step_s=step)
        if len(held_whole) != len({short_node(n) for n in sj.nodes}):
            return JobHistory(None, "the job shared its nodes and its series carry no hpc_job "
                                    "label, so its GPUs cannot be told apart (dcgm-exporter "
                                    "--hpc-job-mapping-dir labels them)", step_s=step)
        samples, how = every, "slurm"
    devices = []
    for slot, snaps in sorted(samples.items()):
        labels = {"device": minors[slot]} if slot in minors else {}
        devices.append(usage_from_samples(snaps, labels=labels, usd_per_hour=usd_per_gpu_hour))
    powers = [s.power_w for snaps in samples.values() for s in snaps if s.power_w is not None]
    job = rollup_job(sj.job, sj.user, how, devices, sj, now)
    return JobHistory(job, None, sum(powers) / len(powers) if powers else None, step,
                      sum(len(v) for v in samples.values()))
