"""``fleet-tui jobs``: whose job holds which devices and what it wastes, worst first; ``fleet-tui
jobs report JOB``: one job's efficiency report. Engine imports happen inside handlers."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from fleet_tui.commands._fleet_args import aggregate_flag
from fleet_tui.commands._names import given_name
from fleet_tui.commands._numbers import finite_float, timeout_seconds
from fleet_tui.commands._output import kind_words
from fleet_tui.core.errors import UserError
from fleet_tui.core.jsonio import parse_json
from fleet_tui.core.units import hours_minutes as _hours
from fleet_tui.core.units import pct as _pct

if TYPE_CHECKING:  # for the checker only: Slurm is read inside the handler
    from fleet_tui.core.cluster.slurm import SlurmJob, SlurmNode

_S = argparse.SUPPRESS  # app flags given before the subcommand keep their value

def register(subparsers: argparse._SubParsersAction) -> None:
    j = subparsers.add_parser(
        "jobs", help="jobs on the fleet worst first (who holds idle GPUs, what it costs); "
                     "'jobs report JOB' for one job",
        description="Attribute every device to a job, pod or user — from the labels its metrics "
                    "carry (dcgm-exporter's hpc_job, Kubernetes pod/namespace, AMD "
                    "device-metrics-exporter's job_id/job_user, jobstats' nvidia_gpu_jobId/"
                    "jobUid gauges) and, with --slurm, from Slurm's own view of running jobs "
                    "(node list and GPU indices) — and print per job its user, nodes, devices, "
                    "utilization, idle device-hours and their cost, worst first; GPUs without a "
                    "job are counted apart. With --slurm, jobs that finished since --since "
                    "(sacct, when accounting is on) are listed too. 'fleet-tui jobs report JOB' "
                    "prints one job's efficiency report.")
    j.add_argument("words", nargs="*", metavar="report JOB | summary",
                   help="'report JOB': the efficiency report of one job (running or finished); "
                        "'summary': the digest of --since (per user and account GPU-hours, idle "
                        "GPU-hours, $, worst jobs), from sacct")
    j.add_argument("--source", default=_S,
                   help="where readings come from, usually prometheus:URL (a fleet); also sim[:N], "
                        "nvml, replay:PATH")
    j.add_argument("--devices", default=None, metavar="FILE",
                   help="instead of --source: a JSON document {\"devices\": [{\"node\", \"index\", "
                        "\"labels\", \"util_pct\", ...}]} (e.g. saved from another tool; a regular "
                        "file up to 128 MiB, at most 10^6 devices)")
    j.add_argument("--slurm", action="store_true", default=_S,
                   help="also ask Slurm (scontrol/squeue --json) which job runs on which node "
                        "and GPU, and sacct --json for finished jobs")
    j.add_argument("--since", default="now-1days", metavar="WHEN",
                   help="with --slurm: finished jobs (sacct) since WHEN: now-N{seconds|minutes|"
                        "hours|days|weeks} or YYYY-MM-DD[THH:MM[:SS]] as sacct reads them, or "
                        "7d/12h (default now-1days)")
    j.add_argument("--until", default="now", metavar="WHEN",
                   help="'summary': the period's end, in --since's forms (default now); each "
                        "job counts its GPU-hours inside the period only, as sreport does")
    j.add_argument("--user", type=given_name, default=None, metavar="U", help="only jobs of user U")
    j.add_argument("--account", type=given_name, default=None, metavar="A",
                   help="with --slurm: only jobs charged to Slurm account A")
    j.add_argument("--window", type=finite_float, default=60.0, metavar="SECONDS",
                   help="history behind each device's diagnosis (default 60)")
    j.add_argument("--instance", default=_S, metavar="TYPE",
                   help="catalog instance type of every node, for the cost of idle GPUs")
    j.add_argument("--node-price", type=finite_float, default=None, metavar="USD_PER_HOUR",
                   help="price of one node per hour (instead of --instance)")
    j.add_argument("--catalog-dir", action="append", default=_S, metavar="DIR",
                   help="extra catalog directory (repeatable)")
    aggregate_flag(j)
    j.add_argument("--timeout", type=timeout_seconds, default=10.0, metavar="SECONDS",
                   help="timeout of each Slurm command and Prometheus query, at most 3600 "
                        "(default 10)")
    j.add_argument("--json", action="store_true", help="the jobs as JSON")
    j.set_defaults(func=_cmd_jobs)


class NoDevicesRead(UserError):
    """The source answered but serves no device now."""


def _opt(args: argparse.Namespace, name: str, default=None):
    v = getattr(args, name, None)
    return default if v is None else v


def _usages(args: argparse.Namespace, read=None):
    """Device usages from --devices or from a source's fleet view (``read``: the view and labels
    ``_read_view`` already returned)."""

    from fleet_tui.core.cluster.jobs import usages_from_doc

    if args.devices is not None:
        from fleet_tui.core.fsutil import read_text_capped

        text = read_text_capped(args.devices, "device list")
        doc = parse_json(text, args.devices)
        return usages_from_doc(doc, args.devices)
    from fleet_tui.core.cluster.promjobs import usages_from_view

    view, labels = _read_view(args) if read is None else read
    return usages_from_view(view, labels, observed_s=args.window)


def _read_view(args: argparse.Namespace):
    """The source's fleet view and its devices' job labels (none read for an aggregated fleet:
    its jobs are the server's roll-ups)."""
    from fleet_tui.core.errors import UserError

    spec = _opt(args, "source")
    if spec is None:
        raise UserError("jobs needs --source (e.g. prometheus:URL) or --devices FILE")
    if args.window < 0:
        raise UserError(f"--window {args.window:g}: must be zero or more seconds")
    import asyncio

    from fleet_tui.commands._fleet_args import aggregate_above
    from fleet_tui.core.cluster.promjobs import DeviceLabels, read_device_labels
    from fleet_tui.core.fleet import read_fleet_view
    from fleet_tui.core.monitor.sources import open_source
    from fleet_tui.core.monitor.sources.prometheus import PrometheusResponseError
    from fleet_tui.core.redact import redact_spec

    threshold = aggregate_above(args)
    opts = {} if threshold is None else {"aggregate_above": threshold}
    source = open_source(spec, timeout_s=args.timeout, **opts)

    async def once():
        await source.open()
        try:
            view = await read_fleet_view(source, window_s=args.window,
                                         instance_prices=_prices(args))
            if not view.offenders:
                why = "; ".join(view.errors[:3]) or view.message or "the source has no devices"
                raise NoDevicesRead(f"--source {redact_spec(spec)}: no devices read ({why})")
            if view.aggregated:
                return view, DeviceLabels()
            try:
                labels = await read_device_labels(source)
            except (OSError, ValueError, PrometheusResponseError) as exc:  # readings came, labels not
                print(f"fleet-tui: job labels not read ({exc}); devices are attributed "
                      "through Slurm only", file=sys.stderr)
                labels = DeviceLabels()
            return view, labels
        finally:
            await source.close()

    return asyncio.run(once())


def _prices(args: argparse.Namespace):
    from fleet_tui.core.errors import UserError

    if args.node_price is not None:
        if args.node_price < 0:
            raise UserError(f"--node-price {args.node_price:g}: must be zero or more (USD per hour)")
        return {"*": args.node_price}
    instance = _opt(args, "instance")
    if not instance:
        return None
    from fleet_tui.core.fleet import instance_price_usd_per_hour

    return {"*": instance_price_usd_per_hour(instance, catalog_dirs=_opt(args, "catalog_dir") or [])}


def _read_slurm(args: argparse.Namespace, now: float
                ) -> tuple[list[SlurmJob], list[SlurmNode], list[SlurmJob] | None, str | None]:
    """With --slurm: the running jobs, the nodes, the finished jobs since --since (None without
    accounting) and why finished jobs are missing; each part Slurm cannot answer is said on
    stderr and left empty."""
    if not args.slurm:
        return [], [], None, None
    from fleet_tui.core.cluster.slurm import SlurmError, SlurmReader

    reader = SlurmReader(timeout_s=args.timeout)
    slurm_jobs = reader.jobs()
    nodes: list[SlurmNode] = []
    try:
        nodes = reader.nodes()
    except SlurmError as exc:  # partitions' free GPUs are missing then, nothing else
        print(f"fleet-tui: partitions not read: {exc}", file=sys.stderr)
    try:  # finished jobs need accounting (slurmdbd); without it, say so and go on
        from fleet_tui.core.cluster.slurmtime import as_sacct, parse_when

        accounting = reader.sacct(since=as_sacct(parse_when(args.since, now, field="since")),
                                  user=args.user, account=args.account)
    except SlurmError as exc:
        finished_note = f"finished jobs not listed: {exc}"
        print(f"fleet-tui: {finished_note}", file=sys.stderr)
        return slurm_jobs, nodes, None, finished_note
    return slurm_jobs, nodes, accounting, None


def _cmd_jobs(args: argparse.Namespace) -> int:
    import time

    from fleet_tui.commands._output import print_json
    from fleet_tui.core.cluster.headnode import head_node_view
    from fleet_tui.core.errors import UserError

    words = list(args.words)
    if words == ["summary"]:
        return _summary(args)
    if words and (words[0] != "report" or len(words) != 2):
        raise UserError(f"jobs: unexpected {' '.join(words)!r}; use 'fleet-tui jobs', "
                        "'fleet-tui jobs report JOB' or 'fleet-tui jobs summary --since 7d'")
    args.slurm = bool(getattr(args, "slurm", None))
    if args.account is not None and not args.slurm:
        raise UserError("--account needs --slurm (accounts are Slurm's)")
    read = None
    usages = None
    if args.devices is None and _opt(args, "source") is not None:
        try:
            read = _read_view(args)
        except NoDevicesRead as exc:
            if not (words and args.slurm):
                raise
            # a job Slurm knows is reported from accounting and its GPUs' history over its
            # life, which a Prometheus keeps after the fleet's exporters stopped answering
            print(f"fleet-tui: {exc}; the job is reported from Slurm and its history",
                  file=sys.stderr)
            usages = []
    allocation = None
    if read is not None and read[0].aggregate is not None and not (args.slurm or words):
        return _aggregated_jobs(args, read[0])  # the server's roll-ups by hpc_job label
    now = time.time()
    slurm_jobs, nodes, accounting, finished_note = _read_slurm(args, now)
    if read is not None and read[0].aggregate is not None and not (slurm_jobs or words):
        return _aggregated_jobs(args, read[0])  # Slurm runs nothing: the hpc_job roll-ups
    if read is not None and read[0].aggregate is not None:
        # the fleet is read as the server's roll-ups: the GPUs of the nodes Slurm's running jobs
        # hold (or, without Slurm, those the reported job's label names) are read on their own
        allocation = _allocated_usages(args, read[0], slurm_jobs, words[1] if words else None)
        usages = list(allocation.usages)
    if usages is None:
        usages = _usages(args, read)
    spec = _opt(args, "source") or ""
    if not args.slurm and spec.startswith("fleet-replay"):
        from fleet_tui.core.monitor.sources import open_source
        from fleet_tui.core.monitor.sources.fleet_replay import FleetReplaySource

        recording = open_source(spec)
        if isinstance(recording, FleetReplaySource):  # what a fleet-replay spec opens
            slurm_jobs = recording.slurm_jobs()  # the recording's own jobs
    report = head_node_view(usages, slurm_jobs, now=now, nodes=nodes, accounting=accounting,
                            finished_note=finished_note, user=args.user, account=args.account,
                            slurm=args.slurm,
                            attributed=allocation.held if allocation is not None else None)
    if words:
        return _report(args, report, words[1], slurm_jobs, accounting)
    replay = spec.startswith(("fleet-replay", "replay"))
    if args.json:
        extra = {} if allocation is None or read is None else _allocation_dict(read[0], allocation)
        print_json({**report.to_dict(), "replay": replay, **extra})
        return 0
    if replay:
        print(f"REPLAY: readings from a recording, not a live fleet (--source {spec})")
    if allocation is not None and read is not None:
        agg = read[0].aggregate
        print(f"{read[0].source}: {read[0].device_count} devices, aggregated on the server (more "
              f"than {agg.threshold if agg else '?'} devices, --aggregate-above); Slurm's jobs "
              f"hold GPUs on {allocation.nodes} nodes: {allocation.whole_nodes} held whole, "
              f"from the node roll-ups; {allocation.device_nodes} read device by device")
    _print_text(args, report)
    return 0


def _report(args: argparse.Namespace, report, job_id: str, slurm_jobs, accounting) -> int:
    """One job: running (the fleet's view now) or finished (sacct, and its GPUs' Prometheus
    history over its life with --source prometheus:URL)."""
    import time

    from fleet_tui.commands._output import print_json
    from fleet_tui.core.cluster.jobreport import job_report, slurm_efficiency, slurm_lines
    from fleet_tui.core.errors import UserError

    now = time.time()
    known = [*slurm_jobs, *(accounting or ())]
    sj = next((j for j in known if job_id in j.ids), None)
    try:
        job = report.running_job(job_id)
    except KeyError as exc:
        job, missing = None, exc.args[0]
    history = None
    if job is None and sj is not None:
        history = _history(args, sj, now, report.usd_per_gpu_hour)
        job = history.job if history is not None else None
    if job is None and sj is None:
        raise UserError(f"jobs report {job_id}: {missing}"
                        + ("" if args.slurm else "; --slurm also looks in Slurm's accounting"))
    note = history.note if history is not None else (
        None if job is not None else "the job's GPU history needs --source prometheus:URL")
    if args.json:
        doc = (job.to_dict(with_devices=True) if job is not None
               else {"job": sj.job} if sj is not None else {})
        doc["slurm"] = sj.to_dict() if sj is not None else None
        doc["efficiency"] = slurm_efficiency(sj, now) if sj is not None else None
        doc["history_note"] = note
        if history is not None:
            doc["history"] = {"step_s": history.step_s, "samples": history.samples,
                              "power_w": history.power_w}
        print_json(doc)
        return 0
    if job is not None:
        sys.stdout.write(job_report(job))
        if history is not None:
            power = "N/A" if history.power_w is None else f"{history.power_w:.0f} W"
            print(f"(over its life from Prometheus: {history.samples} samples, step "
                  f"{history.step_s:g} s; mean power {power})")
    elif sj is not None:  # finished: what Slurm knows of it
        print(f"Job {sj.job}  user {sj.user or 'unknown'}  {sj.gpus} GPUs on "
              f"{', '.join(sj.nodes) or 'no node'}")
    if note:
        print(f"GPU history: {note}")
    if sj is not None:
        print("\n".join(slurm_lines(sj, now)))
    return 0


def _history(args: argparse.Namespace, sj, now: float, usd_per_gpu_hour):
    spec = _opt(args, "source")
    if not spec:
        return None
    from fleet_tui.core.cluster.jobhistory import JobHistory, job_history
    from fleet_tui.core.monitor.sources import open_source, parse_source_spec
    from fleet_tui.core.monitor.sources.prometheus import PrometheusResponseError
    from fleet_tui.core.monitor.sources.prometheus.source import PrometheusSource

    if parse_source_spec(spec).kind != "prometheus":
        return JobHistory(None, f"--source {spec} keeps no history; a finished job's GPUs need "
                                "prometheus:URL")
    source = open_source(spec, timeout_s=args.timeout)
    if not isinstance(source, PrometheusSource):  # what a prometheus spec opens
        return JobHistory(None, f"--source {spec} keeps no history")
    try:
        return job_history(source.query_range, sj, now=now, usd_per_gpu_hour=usd_per_gpu_hour)
    except (OSError, ValueError, PrometheusResponseError) as exc:
        return JobHistory(None, f"Prometheus history not read: {exc}")


SUMMARY_HISTORY_JOBS = 20  # jobs (most GPU-hours first) whose Prometheus history a summary reads


def _period(args: argparse.Namespace, now: float) -> tuple[float, float]:
    """--since/--until as epoch seconds (sacct's forms, or 7d/12h)."""
    from fleet_tui.core.cluster.slurmtime import parse_when
    from fleet_tui.core.errors import UserError

    start = parse_when(args.since, now, field="since")
    end = parse_when(args.until, now, field="until")
    if end <= start:
        raise UserError(f"--until {args.until!r} is not after --since {args.since!r}")
    return start, end


def _summary(args: argparse.Namespace) -> int:
    """``jobs summary --since 7d``: sacct's GPU jobs of the period; with --source prometheus:URL
    the GPU history of the SUMMARY_HISTORY_JOBS largest gives their idle GPU-hours."""
    import time

    from fleet_tui.commands._output import print_json, print_table
    from fleet_tui.core.cluster.headnode import jobs_summary
    from fleet_tui.core.cluster.slurm import SlurmReader
    from fleet_tui.core.cluster.slurmtime import as_sacct

    now = time.time()
    period = _period(args, now)
    since, until = as_sacct(period[0]), as_sacct(period[1])
    from fleet_tui.core.cluster.slurm import SlurmError
    from fleet_tui.core.errors import UserError

    reader = SlurmReader(timeout_s=args.timeout)
    try:
        accounting = reader.sacct(since=since, until=until, user=args.user, account=args.account)
    except SlurmError as exc:  # the digest is Slurm's accounting: say where it must run
        raise UserError(f"jobs summary reads Slurm's job accounting (sacct, with slurmdbd), which "
                        f"this machine cannot give: {exc}. Run it on a Slurm head node; "
                        f"'fleet-tui jobs' shows the jobs of a fleet or recording now") from None
    price = None
    if args.node_price is not None or _opt(args, "instance"):
        per_node = next(iter((_prices(args) or {}).values()))
        try:  # a node's price is shared by its GPUs (sinfo's GRES)
            gpus_per_node = max((n.gpus for n in reader.nodes() if n.gpus), default=0)
        except SlurmError:
            gpus_per_node = 0
        if not gpus_per_node:
            gpus_per_node = max((j.gpus // max(1, len(j.nodes)) for j in accounting if j.nodes),
                                default=1) or 1
        price = per_node / gpus_per_node
    usage = {}
    spec = _opt(args, "source")
    if spec:
        ranked = sorted((j for j in accounting if j.started and j.gpus > 0),
                        key=lambda j: -(j.gpus * (j.runtime_s(now) or 0.0)))
        for j in ranked[:SUMMARY_HISTORY_JOBS]:
            history = _history(args, j, now, price)
            if history is not None and history.job is not None:
                usage[j.job] = history.job
    digest = jobs_summary(accounting, now=now, since=since, until=until, period=period,
                          usage=usage, usd_per_gpu_hour=price)
    if args.json:
        print_json(digest.to_dict())
        return 0
    print(f"{since} to {until}: {digest.jobs} GPU jobs, {digest.gpu_hours:.2f} GPU-hours"
          + (f" at ${price:,.2f}/GPU-hour" if price is not None else "")
          + (f"; idle hours from the GPU history of {digest.history_jobs} jobs" if spec else
             "; idle hours need --source prometheus:URL"))
    money = lambda v: "-" if v is None else f"${v:,.2f}"  # noqa: E731
    print_table(["user", "account", "jobs", "gpu-h", "idle gpu-h", "$", "idle $"],
                [[c.user or "-", c.account or "-", str(c.jobs), f"{c.gpu_hours:.2f}",
                  f"{c.idle_gpu_hours:.2f}", money(c.usd), money(c.usd_idle)]
                 for c in digest.rows[:50]])
    if digest.worst:
        print("\nworst jobs:")
        print_table(["job", "user", "account", "state", "gpus", "gpu-h", "util", "idle gpu-h",
                     "idle $"],
                    [[w.job, w.user or "-", w.account or "-", w.state, str(w.gpus),
                      f"{w.gpu_hours:.2f}", _pct(w.util_pct),
                      "-" if w.idle_gpu_hours is None else f"{w.idle_gpu_hours:.2f}",
                      money(w.usd_idle)] for w in digest.worst])
    return 0


def _allocated_usages(args: argparse.Namespace, view, slurm_jobs, job: str | None):
    """An aggregated fleet's GPUs that jobs are attributed from (``cluster.aggjobs``)."""
    from fleet_tui.core.cluster.aggjobs import read_job_usages
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.sources import open_source
    from fleet_tui.core.monitor.sources.prometheus import PrometheusResponseError
    from fleet_tui.core.monitor.sources.prometheus.source import PrometheusSource

    source = open_source(_opt(args, "source") or "", timeout_s=args.timeout)
    if not isinstance(source, PrometheusSource):  # only a Prometheus fleet is aggregated
        raise UserError("--aggregate-above: only a prometheus:URL source is read as aggregates")
    try:
        return read_job_usages(source.client, view, slurm_jobs, observed_s=args.window, job=job)
    except ValueError as exc:
        raise UserError(f"jobs: {exc}") from None
    except (OSError, PrometheusResponseError) as exc:
        raise UserError(f"jobs: the GPUs of Slurm's jobs not read from --source: {exc}") from None


def _allocation_dict(view, allocation) -> dict:
    agg = view.aggregate
    return {"aggregated": True, "threshold_devices": agg.threshold if agg else None,
            "fleet_devices": view.device_count,
            "allocation": {"nodes": allocation.nodes, "whole_nodes": allocation.whole_nodes,
                           "device_nodes": allocation.device_nodes,
                           "devices": len(allocation.usages) + sum(
                               len(d) for _via, d in allocation.held.values()),
                           "answer_bytes": allocation.answer_bytes}}


def _limit(s: float | None) -> str:
    return "-" if s is None else _hours(s)


def _aggregated_jobs(args: argparse.Namespace, view) -> int:
    """A fleet past --aggregate-above without --slurm (or where Slurm runs no job): its jobs
    (``hpc_job``) as the server rolled them up (with Slurm's jobs, ``_cmd_jobs`` reads the GPUs of
    Slurm's allocations instead)."""
    from fleet_tui.commands._output import print_json, print_table

    agg = view.to_dict(devices=False)["aggregate"]
    if args.user is not None and not args.slurm:
        print("fleet-tui: --user needs --slurm on an aggregated fleet (the hpc_job label names no "
              "user): no job kept", file=sys.stderr)
    jobs = view.jobs_dict((), user=args.user, account=args.account)
    attributed = agg["job_devices"]
    if args.json:
        print_json({"source": view.source, "aggregated": True,
                    "threshold_devices": agg["threshold_devices"], "devices": view.device_count,
                    "unattributed_devices": view.device_count - attributed,
                    "device_usd_per_hour": view.device_usd_per_hour, "jobs": jobs,
                    "slurm": bool(args.slurm), "errors": list(view.errors)})
        return 0
    print(f"{view.source}: {len(jobs)} jobs (hpc_job label) on {view.device_count} devices, "
          f"aggregated on the server (more than {agg['threshold_devices']} devices, "
          "--aggregate-above)")
    print_table(["job", "nodes", "gpus", "util", "idle gpus", "idle $/h"],
                [[j["job"], str(j["nodes"]), str(j["devices"]), _pct(j["util_pct"]),
                  str(j["idle_devices"]),
                  "-" if j["idle_usd_per_hour"] is None else f"${j['idle_usd_per_hour']:,.2f}"]
                 for j in jobs])
    print(f"{view.device_count - attributed} devices without a job label")
    print("(--slurm attributes the GPUs by Slurm's allocations, with users, pending demand and "
          "partitions)")
    for err in view.errors[:5]:
        print(f"  ! {err}")
    return 0


def _print_text(args: argparse.Namespace, report) -> None:
    from fleet_tui.commands._output import print_table

    view = report.running
    # without Slurm a job's start is unknown: its runtime is at least the observed window;
    # account, state, partition, name and limit are Slurm's, shown with --slurm
    slurm_cols = args.slurm or any(j.state for j in view.jobs)  # Slurm's, or a recording's
    headers = ["job", "user", *(["account", "state", "partition", "name"] if slurm_cols else []),
               "nodes", "gpus", "util", "sm", "runtime", *(["limit"] if slurm_cols else []),
               "idle gpu-h", "idle $", "primary"]
    rows = []
    for j in view.jobs:
        slurm = [j.account or "-", j.state or "-", j.partition or "-", j.name[:16] or "-"]
        rows.append([j.job, j.user or "-", *(slurm if slurm_cols else []),
                     ",".join(j.nodes)[:30], str(len(j.devices)), _pct(j.util_pct),
                     _pct(j.sm_active_pct), ("" if j.state else "≥") + _hours(j.runtime_s),
                     *([_limit(j.time_limit_s)] if slurm_cols else []),
                     f"{j.idle_device_hours:.2f}",
                     "-" if j.usd_idle is None else f"${j.usd_idle:,.2f}", kind_words(j.primary)])
    print_table(headers, rows)
    if not args.slurm and any(not j.user for j in view.jobs):
        print("(user -: the labels name no user; --slurm reads users and start times from Slurm)")
    loose = view.to_dict()["unattributed"]
    if loose["devices"]:
        cost = "" if loose["usd_idle_per_hour"] is None else f", ${loose['usd_idle_per_hour']:,.2f}/h"
        print(f"{loose['devices']} devices without a job ({loose['idle_devices']} idle{cost})")
    for c in view.conflicts:
        print(f"conflict: {c.message} (Slurm's allocation is used)")
    if report.pending:
        print("\npending:")
        print_table(["job", "user", "account", "partition", "name", "reason", "gpus", "waited",
                     "limit"],
                    [[p.job, p.user or "-", p.account or "-", p.partition or "-",
                      p.name[:16] or "-", p.reason, str(p.gpus),
                      "-" if p.age_s is None else _hours(p.age_s), _limit(p.time_limit_s)]
                     for p in report.pending[:50]])
    if report.partitions:
        print("\npartitions (GPUs):")
        print_table(["partition", "gpus", "free", "idle held", "pending", "short"],
                    [[p.partition, str(p.gpus), str(p.gpus_free), str(p.gpus_idle_allocated),
                      f"{p.gpus_pending} ({p.pending_jobs} jobs)", str(p.short_gpus)]
                     for p in report.partitions])
    if report.finished:
        print(f"\nfinished since {args.since} (sacct; utilization: 'jobs report JOB'):")
        print_table(["job", "user", "account", "state", "exit", "gpus", "runtime", "gpu-h",
                     "nodes"],
                    [[f["job"], f["user"] or "-", f.get("account") or "-", f["state"],
                      f.get("exit_code") or "-", str(f["devices"]), _hours(f["runtime_s"]),
                      f"{f['gpu_hours']:.2f}", ",".join(f["nodes"])[:30]]
                     for f in report.finished[:50]])
    if report.chargeback:
        print("\nby user and account:")
        print_table(["user", "account", "jobs", "gpu-h", "idle gpu-h", "$", "idle $"],
                    [[c.user or "-", c.account or "-", str(c.jobs), f"{c.gpu_hours:.2f}",
                      f"{c.idle_gpu_hours:.2f}", "-" if c.usd is None else f"${c.usd:,.2f}",
                      "-" if c.usd_idle is None else f"${c.usd_idle:,.2f}"]
                     for c in report.chargeback[:50]])


