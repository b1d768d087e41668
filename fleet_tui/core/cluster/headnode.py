"""The head node's one answer: whose jobs hold which GPUs and waste what, what waits and why, and
who used how much — one report (:class:`HeadNodeView`) that ``fleet-tui jobs`` and the Jobs pane
render.

Parts, each from what Slurm and the fleet say of the same moment:

- *running jobs*: :func:`jobs.job_view` — devices attributed by Slurm's live allocation (labels
  where Slurm was not asked), with their utilization and idle cost; conflicts between a job label
  and Slurm's allocation listed;
- *pending jobs*: every PENDING job with its reason (``Resources``, ``Priority``, ``Dependency``,
  ``JobHeldUser``...), the GPUs it asked for and how long it has waited (age = now − submit);
- *partitions*: per partition the GPUs it has, the GPUs Slurm has free, the GPUs held by jobs
  but idle on the fleet's readings, and the GPUs pending jobs ask for — the admin's "we are short"
  (pending demand above free GPUs) against "we are wasting" (idle allocated GPUs);
- *finished jobs* (sacct, when accounting is on): jobs that started and ended, with GPU-hours =
  allocated GPUs × elapsed; a job cancelled before it started held nothing and is not listed;
- *chargeback*: per user and account, GPU-hours (running: allocated GPUs × runtime so far;
  finished: as sacct), idle GPU-hours (running jobs, from the fleet's readings; finished jobs need
  their history: ``jobs report``) and dollars at the fleet's GPU price.

A node belonging to several partitions counts in each.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from fleet_tui.core.cluster.jobs import DeviceUsage, JobsView, JobUsage, job_view, short_node
from fleet_tui.core.cluster.slurm import SlurmJob, SlurmNode, finished_gpu_jobs, only
from fleet_tui.core.records import record


@record
class PendingJob:
    job: str
    user: str
    account: str
    partition: str
    name: str
    reason: str
    gpus: int  # requested
    age_s: float | None  # since submission
    time_limit_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "user": self.user, "account": self.account,
                "partition": self.partition, "name": self.name, "reason": self.reason,
                "gpus": self.gpus, "age_s": None if self.age_s is None else round(self.age_s, 1),
                "time_limit_s": self.time_limit_s}


@record
class PartitionDemand:
    partition: str
    gpus: int  # configured
    gpus_free: int  # not allocated (Slurm)
    gpus_idle_allocated: int  # allocated to a job, idle on the fleet's readings
    gpus_pending: int  # asked for by pending jobs
    pending_jobs: int

    @property
    def short_gpus(self) -> int:
        """GPUs pending jobs ask for beyond what is free now."""
        return max(0, self.gpus_pending - self.gpus_free)

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "gpus": self.gpus, "gpus_free": self.gpus_free,
                "gpus_idle_allocated": self.gpus_idle_allocated,
                "gpus_pending": self.gpus_pending, "pending_jobs": self.pending_jobs,
                "short_gpus": self.short_gpus}


@record
class ChargeRow:
    user: str
    account: str
    jobs: int
    gpu_hours: float
    idle_gpu_hours: float  # running jobs only (finished jobs: their history, 'jobs report')
    usd: float | None
    usd_idle: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "account": self.account, "jobs": self.jobs,
                "gpu_hours": round(self.gpu_hours, 4),
                "idle_gpu_hours": round(self.idle_gpu_hours, 4),
                "usd": None if self.usd is None else round(self.usd, 2),
                "usd_idle": None if self.usd_idle is None else round(self.usd_idle, 2)}


@record
class HeadNodeView:
    running: JobsView
    pending: tuple[PendingJob, ...]  # longest waiting first
    partitions: tuple[PartitionDemand, ...]
    finished: tuple[dict[str, Any], ...] | None  # None: sacct not read (finished_note says why)
    chargeback: tuple[ChargeRow, ...]  # most GPU-hours first
    finished_note: str | None = None
    usd_per_gpu_hour: float | None = None
    slurm: bool = False  # Slurm was asked
    aliases: dict[str, str] = field(default_factory=dict)  # Slurm's raw id -> the id shown

    def running_job(self, job_id: str) -> JobUsage:
        """A running job by the id shown (``11_0``) or Slurm's raw id; KeyError if none."""
        return self.running.job(self.aliases.get(job_id, job_id))

    def to_dict(self) -> dict[str, Any]:
        doc = self.running.to_dict()
        doc.update({"slurm": self.slurm,
                    "pending": [p.to_dict() for p in self.pending],
                    "partitions": [p.to_dict() for p in self.partitions],
                    "finished": None if self.finished is None else list(self.finished),
                    "finished_note": self.finished_note,
                    "chargeback": [c.to_dict() for c in self.chargeback],
                    "usd_per_gpu_hour": self.usd_per_gpu_hour})
        return doc


def pending_jobs(jobs: Iterable[SlurmJob], now: float) -> tuple[PendingJob, ...]:
    out = [PendingJob(job=j.job, user=j.user, account=j.account, partition=j.partition,
                      name=j.name, reason=j.reason or "-", gpus=j.gpus,
                      age_s=None if j.submit_s is None else max(0.0, now - j.submit_s),
                      time_limit_s=j.time_limit_s)
           for j in jobs if j.state == "PENDING"]
    out.sort(key=lambda p: (-(p.age_s or 0.0), p.job))
    return tuple(out)


def partition_demand(nodes: Sequence[SlurmNode], pending: Sequence[PendingJob],
                     running: JobsView) -> tuple[PartitionDemand, ...]:
    idle_by_node: dict[str, int] = {}
    for j in running.jobs:
        for d in j.devices:
            if d.idle_fraction >= 0.5:
                n = short_node(d.node)
                idle_by_node[n] = idle_by_node.get(n, 0) + 1
    names = sorted({p for n in nodes for p in n.partitions} | {p.partition for p in pending
                                                                 if p.partition})
    out = []
    for part in names:
        members = [n for n in nodes if part in n.partitions]
        # a pending job may name several partitions ("gpu,cpu"): it counts in each
        waiting = [p for p in pending if part in p.partition.split(",")]
        out.append(PartitionDemand(
            partition=part, gpus=sum(n.gpus for n in members),
            gpus_free=sum(max(0, n.gpus - n.gpus_used) for n in members),
            gpus_idle_allocated=sum(idle_by_node.get(n.name, 0) for n in members),
            gpus_pending=sum(p.gpus for p in waiting), pending_jobs=len(waiting)))
    return tuple(out)


def gpu_price(devices: Sequence[DeviceUsage]) -> float | None:
    """The fleet's GPU price ($/GPU-hour): the median of the devices' prices."""
    prices = [d.usd_per_hour for d in devices if d.usd_per_hour is not None]
    return statistics.median(prices) if prices else None


def chargeback(running: JobsView, finished: Sequence[dict[str, Any]] | None,
               slurm_jobs: Sequence[SlurmJob], usd_per_gpu_hour: float | None
               ) -> tuple[ChargeRow, ...]:
    account_of = {i: j.account for j in slurm_jobs for i in j.ids}
    rows: dict[tuple[str, str], list[float]] = {}  # jobs, gpu-h, idle gpu-h, $ (priced share)
    priced: dict[tuple[str, str], list[float]] = {}
    for j in running.jobs:
        key = (j.user, j.account or account_of.get(j.job, ""))
        r = rows.setdefault(key, [0, 0.0, 0.0])
        gpu_h = len(j.devices) * j.runtime_s / 3600.0
        r[0] += 1
        r[1] += gpu_h
        r[2] += j.idle_device_hours
        if j.usd_idle is not None:
            p = priced.setdefault(key, [0.0, 0.0])
            p[0] += sum((d.usd_per_hour or 0.0) for d in j.devices) * j.runtime_s / 3600.0
            p[1] += j.usd_idle
    for f in finished or ():
        key = (f["user"], f.get("account", ""))
        r = rows.setdefault(key, [0, 0.0, 0.0])
        r[0] += 1
        r[1] += f["gpu_hours"]
        if usd_per_gpu_hour is not None:
            priced.setdefault(key, [0.0, 0.0])[0] += f["gpu_hours"] * usd_per_gpu_hour
    out = [ChargeRow(user=u, account=a, jobs=int(r[0]), gpu_hours=r[1], idle_gpu_hours=r[2],
                     usd=priced[(u, a)][0] if (u, a) in priced else None,
                     usd_idle=priced[(u, a)][1] if (u, a) in priced else None)
           for (u, a), r in rows.items()]
    out.sort(key=lambda c: (-c.gpu_hours, c.user, c.account))
    return tuple(out)


def head_node_view(devices: Sequence[DeviceUsage], slurm_jobs: Sequence[SlurmJob] = (), *,
                   now: float, nodes: Sequence[SlurmNode] = (),
                   accounting: Sequence[SlurmJob] | None = None,
                   finished_note: str | None = None, user: str | None = None,
                   account: str | None = None, slurm: bool = False,
                   usd_per_gpu_hour: float | None = None,
                   attributed: Mapping[str, tuple[str, Sequence[DeviceUsage]]] | None = None,
                   ) -> HeadNodeView:
    """The whole head-node report. ``slurm_jobs``: squeue/scontrol now; ``accounting``: sacct
    (None when not read: ``finished_note`` says why); ``user``/``account`` filter every part;
    ``attributed``: devices the caller attributed already (``jobs.job_view``)."""
    running = job_view(devices, slurm_jobs, now=now, user=user, account=account,
                       attributed=attributed)
    mine = only(slurm_jobs, user=user, account=account)
    pending = pending_jobs(mine, now)
    finished = None
    if accounting is not None:
        live = {i for j in slurm_jobs if j.state not in ("PENDING",) and j.started
                and j.state in ("RUNNING", "SUSPENDED", "COMPLETING") for i in j.ids}
        done = [j for j in only(accounting, user=user, account=account)
                if not (set(j.ids) & live)]
        finished = tuple(finished_gpu_jobs(done, now))
    every = [*devices, *(d for _via, devs in (attributed or {}).values() for d in devs)]
    price = usd_per_gpu_hour if usd_per_gpu_hour is not None else gpu_price(every)
    return HeadNodeView(
        running=running, pending=pending,
        partitions=partition_demand(nodes, pending, running) if slurm else (),
        finished=finished, finished_note=finished_note,
        chargeback=chargeback(running, finished, slurm_jobs, price),
        usd_per_gpu_hour=price, slurm=slurm,
        aliases={j.job_raw: j.job for j in (*slurm_jobs, *(accounting or ()))
                 if j.job_raw and j.job_raw != j.job})


@record
class SummaryJob:
    job: str
    user: str
    account: str
    state: str
    gpus: int
    gpu_hours: float
    util_pct: float | None  # None: no GPU history read for it
    idle_gpu_hours: float | None
    usd: float | None
    usd_idle: float | None

    def to_dict(self) -> dict[str, Any]:
        r = lambda x, d=4: None if x is None else round(x, d)  # noqa: E731
        return {"job": self.job, "user": self.user, "account": self.account,
                "state": self.state, "gpus": self.gpus, "gpu_hours": r(self.gpu_hours),
                "util_pct": r(self.util_pct, 2), "idle_gpu_hours": r(self.idle_gpu_hours),
                "usd": r(self.usd, 2), "usd_idle": r(self.usd_idle, 2)}


@record
class JobsSummary:
    """A period's digest: per user and account GPU-hours, idle GPU-hours and dollars, and the
    worst jobs (most idle dollars, then idle GPU-hours, then GPU-hours)."""

    since: str
    until: str
    jobs: int
    gpu_hours: float
    rows: tuple[ChargeRow, ...]
    worst: tuple[SummaryJob, ...]
    history_jobs: int  # jobs whose GPU history was read (idle figures cover these)
    usd_per_gpu_hour: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "jobs": self.jobs, "gpu_hours": round(self.gpu_hours, 4),
                "history_jobs": self.history_jobs, "usd_per_gpu_hour": self.usd_per_gpu_hour,
                "by_user_account": [c.to_dict() for c in self.rows],
                "worst_jobs": [w.to_dict() for w in self.worst]}


def seconds_within(job: SlurmJob, start_s: float, end_s: float, now: float) -> float:
    """How long ``job`` ran inside ``[start_s, end_s)``: what ``sreport`` charges a period for
    a job that began before it or ends after it (a running job has run until ``now``)."""
    ran = job.runtime_s(now)
    if ran is None or job.start_s is None:
        return 0.0
    return max(0.0, min(job.start_s + ran, end_s) - max(job.start_s, start_s))


def jobs_summary(accounting: Sequence[SlurmJob], *, now: float, since: str,
                 usage: dict[str, JobUsage] | None = None,
                 usd_per_gpu_hour: float | None = None, worst: int = 10,
                 period: tuple[float, float] | None = None, until: str = "now") -> JobsSummary:
    """The digest of the GPU jobs in ``accounting`` (sacct over the period, running jobs too).
    ``period``: ``(start, end)`` epoch seconds; each job counts only its GPU-hours inside it, as
    ``sreport`` does (``None``: each job's whole run), and of its idle GPU-hours the same share.
    ``usage``: job id -> its usage over its
    life (``jobhistory``) for the jobs whose history was read; the others count GPU-hours but no
    idle hours."""
    usage = usage or {}
    rows: dict[tuple[str, str], list[float]] = {}
    items = []
    for j in accounting:
        if not j.started or j.gpus <= 0:
            continue
        ran = (j.runtime_s(now) or 0.0) if period is None else seconds_within(j, *period, now)
        if period is not None and ran <= 0:
            continue  # sacct lists it for the period, but it did not run inside it
        gpu_h = j.gpus * ran / 3600.0
        u = usage.get(j.job)
        idle_h = u.idle_device_hours if u is not None else None
        whole = j.runtime_s(now) or 0.0
        if idle_h is not None and whole > ran:  # the period's share of its life's idle hours
            idle_h *= ran / whole
        usd = gpu_h * usd_per_gpu_hour if usd_per_gpu_hour is not None else None
        usd_idle = (idle_h * usd_per_gpu_hour if usd_per_gpu_hour is not None and
                    idle_h is not None else None)
        items.append(SummaryJob(j.job, j.user, j.account, j.state, j.gpus, gpu_h,
                                u.util_pct if u is not None else None, idle_h, usd, usd_idle))
        r = rows.setdefault((j.user, j.account), [0, 0.0, 0.0])
        r[0] += 1
        r[1] += gpu_h
        r[2] += idle_h or 0.0
    price = usd_per_gpu_hour
    charge = [ChargeRow(user=u, account=a, jobs=int(r[0]), gpu_hours=r[1], idle_gpu_hours=r[2],
                        usd=None if price is None else r[1] * price,
                        usd_idle=None if price is None else r[2] * price)
              for (u, a), r in rows.items()]
    charge.sort(key=lambda c: (-c.gpu_hours, c.user, c.account))
    items.sort(key=lambda s: (-(s.usd_idle or 0.0), -(s.idle_gpu_hours or 0.0), -s.gpu_hours,
                              s.job))
    return JobsSummary(since=since, until=until, jobs=len(items), gpu_hours=sum(s.gpu_hours for s in items),
                       rows=tuple(charge), worst=tuple(items[:worst]),
                       history_jobs=sum(1 for s in items if s.idle_gpu_hours is not None),
                       usd_per_gpu_hour=price)
