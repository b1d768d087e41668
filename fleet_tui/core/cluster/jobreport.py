"""One job's efficiency report as plain text, in the spirit of Princeton's ``jobstats``: what the
job held, how much of it worked, what its idle GPUs cost, its diagnoses over its life, and what to
change. Shared by ``fleet-tui jobs report JOB`` and the Jobs pane."""

from __future__ import annotations

from collections.abc import Sequence

from fleet_tui.core.cluster.jobs import HEALTHY, JobUsage
from fleet_tui.core.cluster.slurm import SlurmJob
from fleet_tui.core.units import gib, pct
from fleet_tui.core.units import hours_minutes as hours

# What to change, by the job's headline diagnosis (used when the diagnosis carries no action).
ADVICE = {
    "idle": "GPUs held but unused: ask for fewer (--gres=gpu:N), release them between phases, or "
            "check that every rank actually started on its GPU.",
    "input_bound": "The GPUs wait for data: more dataloader workers, pinned memory, prefetch, or "
                   "faster storage.",
    "input_starved": "The GPUs wait for input: more dataloader workers, pinned memory, prefetch.",
    HEALTHY: "The job keeps its GPUs busy; look at larger batches or mixed precision only if "
             "throughput matters.",
}


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *map(fmt, rows)])


def job_report(job: JobUsage) -> str:
    lines = [f"Job {job.job}  user {job.user or 'unknown'}  ({job.via})"
             f"{'  state ' + job.state if job.state else ''}",
             f"  {len(job.devices)} GPUs on {len(job.nodes)} node(s): {', '.join(job.nodes)}",
             f"  runtime {hours(job.runtime_s)}   GPU utilization {pct(job.util_pct)} (mean)   "
             f"SM activity {pct(job.sm_active_pct)}   peak memory {gib(job.mem_peak_bytes)}"]
    cost = "" if job.usd_idle is None else f" = ${job.usd_idle:,.2f}"
    lines += [f"  idle: {job.idle_device_hours:.2f} GPU-hours{cost}", ""]
    lines.append(_table(["node", "gpu", "util", "sm", "mem peak", "idle", "diagnosis"],
                        [[d.node, str(d.index), pct(d.util_pct), pct(d.sm_active_pct),
                          gib(d.mem_peak_bytes), f"{100 * d.idle_fraction:.0f}%", d.primary]
                         for d in job.devices]))
    lines += ["", "Diagnoses: " + ", ".join(f"{k} ×{n}" for k, n in job.diagnoses.items())]
    if job.phases:
        t0 = job.phases[0][0]
        lines.append("Phases: " + ", ".join(f"+{hours(a - t0)}–+{hours(b - t0)} {k}"
                                            for a, b, k in job.phases))
    actions: list[str] = []
    for d in sorted(job.devices, key=lambda d: d.primary == HEALTHY):  # problems first
        text = d.action or ADVICE.get(d.primary, "")
        if text and text not in actions:
            actions.append(text)
    if actions:
        lines.append("What to change:")
        lines += [f"  - {a}" for a in actions[:5]]
    return "\n".join(lines) + "\n"


def slurm_efficiency(sj: SlurmJob, now: float) -> dict[str, float | None]:
    """CPU efficiency = TotalCPU / (elapsed × allocated CPUs) and host-memory efficiency =
    MaxRSS / allocated memory, as ``seff``/jobstats report them (sacct's fields)."""
    elapsed = sj.runtime_s(now) or 0.0
    cpu = (sj.total_cpu_s / (elapsed * sj.cpus) * 100.0
           if sj.total_cpu_s is not None and sj.cpus and elapsed > 0 else None)
    mem = (sj.max_rss_bytes / sj.mem_bytes * 100.0
           if sj.max_rss_bytes is not None and sj.mem_bytes else None)
    return {"elapsed_s": elapsed, "cpu_efficiency_pct": cpu, "mem_efficiency_pct": mem,
            "total_cpu_s": sj.total_cpu_s, "max_rss_bytes": sj.max_rss_bytes,
            "cpus": sj.cpus, "mem_bytes": sj.mem_bytes}


def slurm_lines(sj: SlurmJob, now: float) -> list[str]:
    e = slurm_efficiency(sj, now)
    cpu_time = "N/A" if e["total_cpu_s"] is None else hours(e["total_cpu_s"])
    lines = [f"Slurm: {sj.state}{' exit ' + sj.exit_code if sj.exit_code else ''}  account "
             f"{sj.account or '-'}  partition {sj.partition or '-'}  name {sj.name or '-'}  "
             f"limit {hours(sj.time_limit_s) if sj.time_limit_s else '-'}",
             f"  CPU efficiency {pct(e['cpu_efficiency_pct'])} ({cpu_time} of CPU time on "
             f"{sj.cpus or '?'} CPUs over {hours(e['elapsed_s'] or 0.0)})   host memory "
             f"{pct(e['mem_efficiency_pct'])} (peak RSS {gib(sj.max_rss_bytes)} of "
             f"{gib(sj.mem_bytes)})"]
    if e["cpu_efficiency_pct"] is not None and e["cpu_efficiency_pct"] < 25 and (sj.cpus or 0) > 1:
        lines.append(f"  - CPUs mostly idle: ask for fewer than {sj.cpus} (--cpus-per-task).")
    if e["mem_efficiency_pct"] is not None and e["mem_efficiency_pct"] < 25 and sj.mem_bytes \
            and sj.mem_bytes > 4 * 2**30:
        lines.append("  - Host memory mostly unused: ask for less (--mem).")
    return lines
