"""``fleet-tui queue simulate FILE``: replay a job list under several scheduling policies, side by
side, with what-ifs (more nodes, part of the work on spot). Engine imports happen in the handler."""

from __future__ import annotations

import argparse

from fleet_tui.commands._numbers import finite_float, whole_number


def register(subparsers: argparse._SubParsersAction) -> None:
    q = subparsers.add_parser(
        "queue", help="queue what-ifs: replay a job list under FIFO, priority, fair-share, "
                      "backfill and preemption",
        description="Queue what-ifs on a GPU cluster.")
    qs = q.add_subparsers(dest="queue_command", metavar="ACTION")
    s = qs.add_parser(
        "simulate", help="replay FILE (sacct --json, SWF or CSV) under each --policy",
        description="Replay a job list on NODES × GPUS_PER_NODE GPUs under each policy and print "
                    "mean and p95 wait, bounded slowdown, utilization, makespan and per-user share "
                    "side by side. FILE: 'sacct --json' output, a Parallel Workloads Archive .swf "
                    "(processors read as GPUs) or CSV with job,user,submit_s,run_s,gpus"
                    "[,requested_s,priority]. fifo is strict; backfill is EASY backfilling on "
                    "requested run times, scanning the whole queue unless --backfill-depth says "
                    "otherwise. Jobs larger than the cluster are skipped and counted.")
    s.add_argument("file", metavar="FILE",
                   help="the job list (a regular file up to 128 MiB, at most 10^6 jobs; times "
                        "finite, within 1e10 s)")
    s.add_argument("--nodes", type=whole_number, required=True, metavar="N", help="nodes")
    s.add_argument("--gpus-per-node", type=whole_number, required=True, metavar="G",
                   help="GPUs per node")
    s.add_argument("--policy", default="fifo,priority,fair-share,backfill,preemption",
                   metavar="LIST", help="comma-separated policies (default: all five)")
    s.add_argument("--format", default=None, choices=("swf", "sacct-json", "csv"),
                   help="FILE's format (default: from its name and content)")
    s.add_argument("--add-nodes", type=whole_number, default=0, metavar="K",
                   help="what-if: the same jobs on K more nodes")
    s.add_argument("--spot-fraction", type=finite_float, default=0.0, metavar="F",
                   help="what-if: move the shortest jobs, F of the GPU-hours (0-1), to spot "
                        "instances (interruption model of the pricing engine)")
    s.add_argument("--cloud", default="aws", help="cloud whose spot interruption rate applies "
                                                  "(aws, azure, gcp, other; default aws)")
    s.add_argument("--backfill-depth", type=whole_number, default=None, metavar="N",
                   help="backfill scans only the first N waiting jobs per pass, as Slurm's "
                        "bf_max_job_test (Slurm's default: 500); default: the whole queue")
    s.add_argument("--json", action="store_true", help="the whole result as JSON")
    s.set_defaults(func=_cmd_simulate)
    q.set_defaults(func=lambda args: (q.print_help(), 2)[1])


def _cmd_simulate(args: argparse.Namespace) -> int:
    from fleet_tui.commands._output import print_json
    from fleet_tui.core.cluster.joblists import load_workload
    from fleet_tui.core.cluster.whatif import simulate_all

    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    work = load_workload(args.file, args.format)
    doc = simulate_all(work.jobs, args.nodes, args.gpus_per_node, policies,
                       add_nodes=args.add_nodes, spot_fraction=args.spot_fraction,
                       cloud=args.cloud, backfill_depth=args.backfill_depth)
    doc = {"file": work.path, "format": work.format, "skipped": work.skipped,
           **({"trace_max_procs": work.max_procs} if work.max_procs is not None else {}),
           **({"trace_max_nodes": work.max_nodes} if work.max_nodes is not None else {}), **doc}
    if args.json:
        print_json(doc)
        return 0
    print(f"{work.path} ({work.format}): {len(work.jobs)} jobs ({work.skipped} skipped) on "
          f"{args.nodes} × {args.gpus_per_node} = {doc['gpus']} GPUs")
    if work.max_procs is not None or work.max_nodes is not None:
        print("recorded on a machine of " + " and ".join(
            f"{v} {k}" for k, v in (("processors", work.max_procs), ("nodes", work.max_nodes))
            if v is not None) + " (the trace's MaxProcs/MaxNodes header)")
    if "backfill" in doc["policies"]:
        depth = args.backfill_depth
        print("backfill scans " + ("the whole queue" if depth is None else
                                   f"the first {depth} waiting jobs (--backfill-depth)"))
    too_large = max((r["jobs_skipped_too_large"] for r in doc["policies"].values()), default=0)
    if too_large:
        first = next(iter(doc["policies"].values()))["skipped_jobs"]
        print(f"{too_large} jobs ask for more than {doc['gpus']} GPUs and could never start: "
              f"skipped (e.g. {', '.join(first[:5])})")
    _table(doc["policies"])
    for name, what in (doc.get("what_if") or {}).items():
        if name == "add_nodes":
            print(f"\nwith {what['nodes']} nodes:")
        else:
            print(f"\nwith {what['jobs_moved']} jobs ({what['gpu_hours_moved']:.1f} GPU-h) on "
                  f"{args.cloud} spot: +{what['extra_gpu_hours']:.2f} GPU-h lost to "
                  f"{what['expected_interruptions']:.2f} expected interruptions; the rest:")
        _table(what["policies"])
    return 0


def _table(policies: dict) -> None:
    from fleet_tui.commands._output import print_table
    from fleet_tui.core.cluster.queue import short_duration

    rows = []
    for name, r in policies.items():
        top = max(r["user_share_pct"].items(), key=lambda kv: kv[1], default=("-", 0))
        rows.append([name, short_duration(r["mean_wait_s"]), short_duration(r["p95_wait_s"]),
                     f"{r['mean_slowdown']:.2f}",
                     f"{r['utilization_pct']:.1f}%", short_duration(r["makespan_s"]), str(r["preemptions"]),
                     f"{top[0]} {top[1]:.0f}%"])
    print_table(["policy", "mean wait", "p95 wait", "slowdown", "util", "makespan", "preempted",
                 "top user"], rows)


