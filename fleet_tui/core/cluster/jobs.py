"""Whose job is on which device, and what it wastes: devices attributed to jobs, worst first.

A device is attributed to a job from whatever the site has, most specific first:

1. labels on the device's metrics — dcgm-exporter's HPC job mapping label ``hpc_job`` (set when
   the exporter runs with ``--hpc-job-mapping-dir``), the ``jobId``/``jobid``/``job_id``/``jobUid``
   labels or gauges of Slurm GPU exporters (AMD's device-metrics-exporter adds ``job_id``,
   ``job_user``, ``job_partition`` with its Slurm integration), and dcgm-exporter's Kubernetes labels ``pod``,
   ``namespace``, ``container`` (the job is ``namespace/pod``, its user the namespace);
2. Slurm itself: a running job's node list and GPU indices (``squeue``/``scontrol --json``, see
   ``cluster.slurm``) claim ``(node, index)``; a node whose job has no GPU indices is claimed whole
   when only one job runs there.

Slurm also supplies the user and start time of a job named by a label. Devices no job claims are
reported apart (``unattributed``): idle devices without a job are capacity, not a user's waste.

Per job: user, nodes, device count, runtime, mean utilization and SM activity over its devices, peak
memory, the diagnoses its devices show, idle device-hours and their cost. *Idle* is the engine's
definition (``core.fleet``: primary diagnosis ``idle``, or utilization and SM activity under 1%);
a device's idle share over the observed window is applied to the job's runtime, so idle
device-hours are an estimate when the window is shorter than the job. Worst first = most idle
dollars, then idle device-hours, then lowest utilization.

The inputs are plain records (:class:`DeviceUsage`), built from the fleet view's devices
(:meth:`DeviceUsage.from_fleet_device`, what ``fleet-tui jobs`` and a Jobs pane use) or from a
JSON document, so wiring another source's labels in is one call to :func:`job_view`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from fleet_tui.core.cluster.slurm import SlurmJob, running_on
from fleet_tui.core.errors import UserError
from fleet_tui.core.limits import check_count
from fleet_tui.core.records import record

JOB_ID_LABELS = ("hpc_job", "jobId", "jobid", "job_id", "jobUid", "slurm_job_id")
USER_LABELS = ("hpc_user", "user", "username", "jobUser", "job_user")  # job_user: AMD's exporter
HEALTHY = "healthy_compute"


@record
class DeviceUsage:
    """One device over the observed window, with the labels its metrics carry."""

    node: str
    index: int
    labels: tuple[tuple[str, str], ...] = ()
    util_pct: float | None = None
    sm_active_pct: float | None = None
    mem_peak_bytes: int | None = None
    mem_total_bytes: int | None = None
    idle_fraction: float = 0.0  # share of the observed window the device was idle
    observed_s: float = 0.0
    usd_per_hour: float | None = None
    primary: str = "unknown"
    action: str = ""  # what to change, from the primary diagnosis
    phases: tuple[tuple[float, float, str], ...] = ()  # (start, end, diagnosis) over its history
    key: str = ""  # the engine's device key (its analyses and alerts are keyed by it)
    uuid: str = ""

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def minor(self) -> int | None:
        """The GPU's minor number (``/dev/nvidiaN``), which Slurm's GRES index follows when
        gres.conf lists ``File=/dev/nvidia[0-N]`` (or AutoDetect finds them): dcgm-exporter's
        ``device="nvidiaN"`` label, jobstats' ``minor_number``. None when no label says."""
        labels = self.label_map
        dev = labels.get("device", "")
        if dev.startswith("nvidia") and dev[6:].isdigit():
            return int(dev[6:])
        raw = labels.get("minor_number", "")
        return int(raw) if raw.isdigit() else None

    @property
    def slot(self) -> int:
        """The number Slurm's GRES index is compared with: the minor number where known, else
        the source's device index (a single-node source numbers devices as NVML does)."""
        minor = self.minor
        return self.index if minor is None else minor

    @classmethod
    def from_fleet_device(cls, dev: Any, labels: Mapping[str, str] | None = None, *,
                          observed_s: float = 0.0) -> "DeviceUsage":
        """From a ``core.fleet.FleetDevice`` (the engine's diagnosed device). Its utilization and
        memory are the latest reading and its idleness the diagnosis over the analysis window, so
        ``mem_peak_bytes`` is a lower bound until history (the recorder) supplies the peak."""
        diagnoses = getattr(dev, "diagnoses", ()) or ()
        action = diagnoses[0].get("action", "") if diagnoses else ""
        return cls(node=dev.node, index=dev.index, labels=tuple(sorted((labels or {}).items())),
                   util_pct=dev.gpu_util_pct, sm_active_pct=dev.sm_active_pct,
                   mem_peak_bytes=dev.mem_used_bytes, mem_total_bytes=dev.mem_total_bytes,
                   idle_fraction=1.0 if dev.idle else 0.0, observed_s=observed_s,
                   usd_per_hour=dev.usd_per_hour, primary=dev.primary, action=action,
                   key=dev.key, uuid=getattr(dev, "uuid", "") or "")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "DeviceUsage":
        try:
            labels = d.get("labels") or {}
            if not isinstance(labels, Mapping):
                raise TypeError("labels must be an object")
            idle = float(d.get("idle_fraction", 0.0))
            if not 0.0 <= idle <= 1.0:
                raise ValueError(f"idle_fraction must be 0-1, got {idle}")

            def opt(name: str) -> float | None:
                v = d.get(name)
                return None if v is None else float(v)

            def opt_int(name: str) -> int | None:
                v = d.get(name)
                return None if v is None else int(v)

            return cls(node=str(d["node"]), index=int(d["index"]),
                       labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                       util_pct=opt("util_pct"), sm_active_pct=opt("sm_active_pct"),
                       mem_peak_bytes=opt_int("mem_peak_bytes"),
                       mem_total_bytes=opt_int("mem_total_bytes"), idle_fraction=idle,
                       observed_s=float(d.get("observed_s", 0.0)),
                       usd_per_hour=opt("usd_per_hour"), primary=str(d.get("primary", "unknown")),
                       action=str(d.get("action", "")))
        except KeyError as exc:
            raise UserError(f"{where}: device record needs {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where}: bad device record: {exc}") from None


@record
class Owner:
    job: str
    user: str
    via: str  # hpc_job | exporter | kubernetes | slurm


@record
class JobUsage:
    job: str
    user: str
    via: str
    nodes: tuple[str, ...]
    devices: tuple[DeviceUsage, ...]
    runtime_s: float
    util_pct: float | None
    sm_active_pct: float | None
    mem_peak_bytes: int | None
    idle_device_hours: float
    usd_idle: float | None
    primary: str
    diagnoses: dict[str, int] = field(default_factory=dict)  # kind -> devices showing it
    state: str = ""
    phases: tuple[tuple[float, float, str], ...] = ()  # the job's headline diagnosis over time
    account: str = ""
    partition: str = ""
    name: str = ""
    time_limit_s: float | None = None
    exit_code: str = ""

    def sort_key(self) -> tuple:
        return (-(self.usd_idle or 0.0), -self.idle_device_hours,
                self.util_pct if self.util_pct is not None else math.inf, self.job)

    def to_dict(self, *, with_devices: bool = False) -> dict[str, Any]:
        out = {"job": self.job, "user": self.user, "via": self.via, "nodes": list(self.nodes),
               "devices": len(self.devices), "runtime_s": round(self.runtime_s, 1),
               "util_pct": _r(self.util_pct), "sm_active_pct": _r(self.sm_active_pct),
               "mem_peak_bytes": self.mem_peak_bytes,
               "idle_device_hours": round(self.idle_device_hours, 4),
               "usd_idle": _r(self.usd_idle, 4), "primary": self.primary,
               "diagnoses": dict(self.diagnoses), "state": self.state,
               "account": self.account, "partition": self.partition, "name": self.name,
               "time_limit_s": self.time_limit_s, "exit_code": self.exit_code,
               "phases": [{"start": a, "end": b, "primary": k} for a, b, k in self.phases]}
        if with_devices:
            out["device_list"] = [{"node": d.node, "index": d.index, "util_pct": _r(d.util_pct),
                                   "sm_active_pct": _r(d.sm_active_pct),
                                   "mem_peak_bytes": d.mem_peak_bytes,
                                   "idle_fraction": round(d.idle_fraction, 3),
                                   "primary": d.primary} for d in self.devices]
        return out


@record
class Conflict:
    """A device whose metric labels name one job while Slurm allocates it to another (or to none):
    Slurm's live allocation is what the device is attributed by."""

    node: str
    index: int
    label_job: str  # the job the labels name
    slurm_job: str  # the job Slurm allocates the GPU to; "" for none

    @property
    def message(self) -> str:
        held = f"Slurm allocates it to job {self.slurm_job}" if self.slurm_job else \
            "Slurm runs no job on it"
        return f"{self.node} GPU {self.index}: label says job {self.label_job}, {held}"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "index": self.index, "label_job": self.label_job,
                "slurm_job": self.slurm_job, "message": self.message}


@record
class JobsView:
    jobs: tuple[JobUsage, ...]  # worst first
    unattributed: tuple[DeviceUsage, ...]
    conflicts: tuple[Conflict, ...] = ()

    def job(self, job_id: str) -> JobUsage:
        for j in self.jobs:
            if j.job == job_id:
                return j
        known = ", ".join(j.job for j in self.jobs[:10]) or "none"
        raise KeyError(f"no job {job_id!r} holds a device (jobs: {known})")

    def to_dict(self) -> dict[str, Any]:
        idle = [d for d in self.unattributed if d.idle_fraction > 0]
        return {"jobs": [j.to_dict() for j in self.jobs],
                "conflicts": [c.to_dict() for c in self.conflicts],
                "unattributed": {"devices": len(self.unattributed), "idle_devices": len(idle),
                                 "usd_idle_per_hour": _r(sum(d.usd_per_hour for d in idle
                                            if d.usd_per_hour is not None), 4)
                if any(d.usd_per_hour is not None for d in idle) else None}}


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def short_node(node: str) -> str:
    """Prometheus ``instance`` values carry a port and sometimes a domain; Slurm names don't."""
    return node.rsplit(":", 1)[0].split(".")[0] if not node.startswith("[") else node


def label_owner(labels: Mapping[str, str]) -> Owner | None:
    user = next((labels[k] for k in USER_LABELS if labels.get(k)), "")
    for key in JOB_ID_LABELS:
        value = labels.get(key)
        if value and value not in ("0", "-1"):
            return Owner(value, user, "hpc_job" if key == "hpc_job" else "exporter")
    pod = labels.get("pod")
    if pod:
        ns = labels.get("namespace", "")
        return Owner(f"{ns}/{pod}" if ns else pod, user or ns, "kubernetes")
    return None


class SlurmIndex:
    """Who holds ``(node, GPU)`` according to Slurm's running jobs. A job holds the GPUs Slurm
    allocated to it and nothing else: a job with no GPU in its allocated TRES holds none, whatever
    node it shares. Where Slurm gives a GPU count but no indices (older Slurm), the node's GPUs go
    to that job only when it is the one GPU job there."""

    def __init__(self, jobs: Iterable[SlurmJob]):
        self.by_id: dict[str, SlurmJob] = {}
        self.by_gpu: dict[tuple[str, int], SlurmJob] = {}
        whole: dict[str, list[SlurmJob]] = {}
        for j in running_on(jobs):
            for jid in j.ids:
                self.by_id[jid] = j
            if j.gpus <= 0:
                continue
            for node in j.nodes:
                idx = j.gpu_indices.get(node)
                if idx:
                    for i in idx:
                        self.by_gpu[(short_node(node), i)] = j
                else:
                    whole.setdefault(short_node(node), []).append(j)
        self.by_node = {n: js[0] for n, js in whole.items() if len(js) == 1}

    def owner(self, node: str, slot: int) -> SlurmJob | None:
        n = short_node(node)
        return self.by_gpu.get((n, slot)) or self.by_node.get(n)


def _attribute(d: DeviceUsage, index: SlurmIndex | None) -> tuple[Owner | None, Conflict | None]:
    """The owner of one device: Slurm's live allocation first where Slurm was asked, then labels;
    a Slurm job label that Slurm contradicts is reported as a conflict."""
    label = label_owner(d.label_map) if d.labels else None
    if index is None:
        return label, None
    sj = index.owner(d.node, d.slot)
    slurm_label = label is not None and label.via in ("hpc_job", "exporter")
    if sj is not None:
        if slurm_label and label is not None and label.job not in sj.ids:
            return Owner(sj.job, sj.user, "slurm"), Conflict(d.node, d.index, label.job, sj.job)
        if slurm_label and label is not None:
            return Owner(sj.job, label.user or sj.user, label.via), None
        return Owner(sj.job, sj.user, "slurm"), None
    if slurm_label and label is not None:
        running = index.by_id.get(label.job)
        if running is None or (running.gpus > 0 and short_node(d.node) not in
                               {short_node(n) for n in running.nodes}):
            return None, Conflict(d.node, d.index, label.job, "")  # a stale label
        return Owner(running.job, label.user or running.user, label.via), None
    return label, None


def job_view(devices: Iterable[DeviceUsage], slurm_jobs: Sequence[SlurmJob] = (), *,
             now: float | None = None, user: str | None = None,
             account: str | None = None,
             attributed: Mapping[str, tuple[str, Sequence[DeviceUsage]]] | None = None,
             ) -> JobsView:
    """Attribute ``devices`` to jobs (Slurm's allocation where Slurm was asked, else labels) and
    roll each job up. ``user``/``account`` keep only that user's or account's jobs.
    ``attributed``: Slurm job id -> (how, devices) already attributed by the caller (an
    aggregated fleet's nodes held whole, ``aggjobs``: no label contradicts Slurm there)."""
    index = SlurmIndex(slurm_jobs) if slurm_jobs else None
    groups: dict[str, list[DeviceUsage]] = {}
    owners: dict[str, Owner] = {}
    loose: list[DeviceUsage] = []
    conflicts: list[Conflict] = []
    for d in devices:
        owner, conflict = _attribute(d, index)
        if conflict is not None:
            conflicts.append(conflict)
        if owner is None:
            loose.append(d)
            continue
        groups.setdefault(owner.job, []).append(d)
        if owner.job not in owners or (not owners[owner.job].user and owner.user):
            owners[owner.job] = owner
    by_id = index.by_id if index is not None else {i: j for j in slurm_jobs for i in j.ids}
    for job_id, (via, devs) in (attributed or {}).items():
        held = by_id.get(job_id)
        groups.setdefault(job_id, []).extend(devs)
        owners.setdefault(job_id, Owner(job_id, held.user if held else "", via))
    jobs = []
    for job_id, devs in groups.items():
        owner = owners[job_id]
        sj = by_id.get(job_id)
        job_user = owner.user or (sj.user if sj else "")
        if user is not None and job_user != user:
            continue
        if account is not None and (sj.account if sj else "") != account:
            continue
        jobs.append(rollup_job(job_id, job_user, owner.via, devs, sj, now))
    jobs.sort(key=JobUsage.sort_key)
    return JobsView(tuple(jobs), tuple(loose), tuple(conflicts))


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def rollup_job(job_id: str, user: str, via: str, devs: list[DeviceUsage], sj: SlurmJob | None,
            now: float | None) -> JobUsage:
    runtime = sj.runtime_s(now) if sj is not None and now is not None else None
    if runtime is None:
        runtime = max(d.observed_s for d in devs)
    hours = runtime / 3600.0
    idle_h = sum(d.idle_fraction for d in devs) * hours
    idle_rates = [(d.idle_fraction, d.usd_per_hour) for d in devs if d.usd_per_hour is not None]
    usd_idle = sum(f * hours * usd for f, usd in idle_rates) if idle_rates else None
    kinds = Counter(d.primary for d in devs)
    primary = _primary_of(kinds)
    peaks = [d.mem_peak_bytes for d in devs if d.mem_peak_bytes is not None]
    nodes = tuple(sorted({d.node for d in devs}))
    return JobUsage(job=job_id, user=user, via=via, nodes=nodes,
                    devices=tuple(sorted(devs, key=lambda d: (d.node, d.index))),
                    runtime_s=runtime, util_pct=_mean(d.util_pct for d in devs),
                    sm_active_pct=_mean(d.sm_active_pct for d in devs),
                    mem_peak_bytes=max(peaks) if peaks else None, idle_device_hours=idle_h,
                    usd_idle=usd_idle, primary=primary,
                    diagnoses=dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
                    state=sj.state if sj is not None else "", phases=_job_phases(devs),
                    account=sj.account if sj else "", partition=sj.partition if sj else "",
                    name=sj.name if sj else "", time_limit_s=sj.time_limit_s if sj else None,
                    exit_code=sj.exit_code if sj else "")


def _job_phases(devs: Sequence[DeviceUsage]) -> tuple[tuple[float, float, str], ...]:
    """The job's headline diagnosis over time: at every boundary of a device phase, the headline
    of what its devices show then; equal neighbours merged."""
    bounds = sorted({t for d in devs for a, b, _ in d.phases for t in (a, b)})
    out: list[tuple[float, float, str]] = []
    for a, b in zip(bounds, bounds[1:]):
        kinds = Counter(k for d in devs for s, e, k in d.phases if s <= a and e >= b)
        if not kinds:
            continue
        kind = _primary_of(kinds)
        if out and out[-1][2] == kind and out[-1][1] == a:
            out[-1] = (out[-1][0], b, kind)
        else:
            out.append((a, b, kind))
    return tuple(out)


def _primary_of(kinds: Counter) -> str:
    """The job's headline: the diagnosis most of its devices show, a healthy device counting only
    when nothing else is found (one idle GPU out of eight is the news, not seven healthy ones)."""
    problems = [(n, k) for k, n in kinds.items() if k not in (HEALTHY, "unknown")]
    if problems:
        return min(problems, key=lambda nk: (-nk[0], nk[1]))[1]
    return HEALTHY if kinds.get(HEALTHY) else "unknown"


def idle_job_alerts(view: JobsView, *, min_devices: int = 8, min_idle_s: float = 1800.0) -> list[dict]:
    """Jobs holding at least ``min_devices`` devices that sat idle for ``min_idle_s`` (e.g. 8 GPUs
    for 30 minutes): the job-level alert rule, as plain records for the alert engine."""
    out = []
    for j in view.jobs:
        idle = [d for d in j.devices if d.idle_fraction >= 0.999]
        if len(idle) >= min_devices and j.runtime_s >= min_idle_s:
            out.append({"job": j.job, "user": j.user, "idle_devices": len(idle),
                        "idle_s": j.runtime_s, "usd_idle": _r(j.usd_idle, 2),
                        "message": f"job {j.job} ({j.user or 'unknown user'}) holds {len(idle)} "
                                   f"idle GPUs for {j.runtime_s / 60:.0f} min"})
    return out


def usages_from_doc(doc: Any, where: str) -> list[DeviceUsage]:
    """``{"devices": [{"node", "index", "labels", "util_pct", ...}, ...]}`` (a saved view, or
    records from another tool) as device usages."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("devices"), list):
        raise UserError(f"{where}: expected an object with a \"devices\" list")
    check_count(len(doc["devices"]), "devices", where, "devices")
    return [DeviceUsage.from_dict(d if isinstance(d, Mapping) else {}, f"{where}: devices[{i}]")
            for i, d in enumerate(doc["devices"])]
