"""The head-node answer on a fleet past ``--aggregate-above``: CPU per refresh and answer sizes.

    .venv/bin/python bench/bench_aggjobs.py [--nodes 4096] [--gpus 8] [--refreshes 5]

A separate process answers as Prometheus would (compact JSON, sorted labels, string values) the
device count, the fleet's aggregate query (``bench_fleet._aggregate_answers``: the canned
H200-trace readings) and the allocation query of ``prometheus.allocation`` (one ``dev_util`` series
per GPU of the asked nodes with its node, ``gpu``, ``device`` and ``hpc_job``, one ``dev_sm`` and,
for an idle GPU, one ``dev_idle``). Slurm's side is records: every node busy with a job of 8 nodes ×
8 GPUs (512 running jobs holding all 32,768 GPUs: the largest allocation answer), 200 pending jobs
in 4 partitions, the 4,096 nodes with their partitions. Measured in this process per refresh,
``time.process_time()``: the aggregated refresh (``PrometheusSource`` + ``FleetView``), the
allocation read (``aggjobs.read_job_usages``: HTTP, parse, 32,768 ``DeviceUsage``), and
``headnode.head_node_view`` (attribution, pending demand, partitions, chargeback): the path
``fleet-tui jobs --slurm`` takes. Targets: <= 300 ms client CPU for the allocation read and the
report, <= 5 MB per answer.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TS_MARK = "__TS__"


def _node(n: int) -> str:
    return f"gpu-node-{n:03d}"  # the names bench_fleet's canned fleet uses


def _job_of(n: int, g: int, gpus: int, shared: bool) -> int:
    """The Slurm job holding GPU ``g`` of node ``n``: 8 whole nodes a job, or (``shared``) two
    jobs a node, each half its GPUs."""
    return 100000 + (2 * n + (2 * g) // gpus if shared else n // 8)


def _allocation_answer(n_nodes: int, gpus: int, shared: bool) -> str:
    from bench_fleet import _answer

    from fleet_tui.core.fleet import IDLE_UTIL_MAX_PCT
    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGG_LABEL, JOB_LABEL, NODE_KEY
    from tests.fleet.dcgm_replay import load_frames, phase_runs

    runs = [r for p, r in phase_runs(load_frames()).items() if not p.startswith("sizing")]

    def item(part: str, value: float, **labels: str) -> str:
        metric = dict(sorted({AGG_LABEL: part, **labels}.items()))
        return json.dumps({"metric": metric, "value": [TS_MARK, f"{value:g}"]},
                          separators=(",", ":")).replace(f'"{TS_MARK}"', TS_MARK)

    chunks = []
    for n in range(n_nodes):
        run = runs[n % len(runs)]
        for g in range(gpus):
            d = run[(3 * n + 5 * g) % len(run)]
            util = float(int(d.gpu_util_pct or 0))
            sm = None if d.sm_active_pct is None else d.sm_active_pct / 100.0
            key = {NODE_KEY: _node(n), "gpu": str(g)}
            chunks.append(item("dev_util", util, device=f"nvidia{g}",
                               **{JOB_LABEL: str(_job_of(n, g, gpus, shared))}, **key))
            if sm is not None:
                chunks.append(item("dev_sm", sm, **key))
            if util < IDLE_UTIL_MAX_PCT and (sm is None or sm < IDLE_UTIL_MAX_PCT / 100):
                chunks.append(item("dev_idle", 1, **key))
    return _answer(chunks)


def _label_answer(n_nodes: int, gpus: int, shared: bool) -> str:
    from bench_fleet import _answer

    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGG_LABEL, JOB_LABEL, NODE_KEY

    chunks = []
    for n in range(n_nodes):
        for job in sorted({_job_of(n, g, gpus, shared) for g in range(gpus)}):
            count = sum(1 for g in range(gpus) if _job_of(n, g, gpus, shared) == job)
            metric = dict(sorted({AGG_LABEL: "node_label", NODE_KEY: _node(n),
                                  JOB_LABEL: str(job)}.items()))
            chunks.append(json.dumps({"metric": metric, "value": [TS_MARK, str(count)]},
                                     separators=(",", ":")).replace(f'"{TS_MARK}"', TS_MARK))
    return _answer(chunks)


def _serve(port_q, n_nodes: int, gpus: int, shared: bool) -> None:
    from bench_fleet import _aggregate_answers, _answer, serve_queries

    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGG_LABEL

    roll_ups = _aggregate_answers(n_nodes, gpus, 50)[0]
    from fleet_tui.core.monitor.sources.prometheus.allocation import CHUNK_NODES

    # one chunk's answer (CHUNK_NODES nodes); every chunk is answered alike
    allocation = _allocation_answer(min(n_nodes, CHUNK_NODES), gpus, shared)
    labels = _label_answer(n_nodes, gpus, shared)
    count = _answer([f'{{"metric":{{}},"value":[{TS_MARK},"{n_nodes * gpus}"]}}'])

    def answer(query: str) -> str:
        return (labels if '"node_label"' in query else allocation if '"dev_util"' in query
                else roll_ups if AGG_LABEL in query else count)

    serve_queries(port_q, answer)


def _slurm(n_nodes: int, gpus: int, now: float, shared: bool):
    from fleet_tui.core.cluster.slurm import SlurmJob, SlurmNode

    parts = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")
    jobs = []
    holds: dict[int, dict[str, list[int]]] = {}
    for n in range(n_nodes):
        for g in range(gpus):
            holds.setdefault(_job_of(n, g, gpus, shared), {}).setdefault(_node(n), []).append(g)
    for jid, where in sorted(holds.items()):
        j = jid - 100000
        jobs.append(SlurmJob(job=str(jid), user=f"user{j % 40}", state="RUNNING",
                             nodes=tuple(where), gpus=sum(len(v) for v in where.values()),
                             gpu_indices={n: tuple(v) for n, v in where.items()},
                             submit_s=now - 7200, start_s=now - 3600, time_limit_s=86400,
                             partition=parts[j % 4], account=f"acct{j % 8}", name="train"))
    for p in range(200):
        jobs.append(SlurmJob(job=str(200000 + p), user=f"user{p % 40}", state="PENDING",
                             gpus=8 * (1 + p % 4), submit_s=now - 60 * p, partition=parts[p % 4],
                             reason=("Resources", "Priority", "Dependency")[p % 3]))
    nodes = [SlurmNode(name=_node(n), partitions=(parts[(n // 8) % 4],), gpus=gpus,
                       gpus_used=gpus) for n in range(n_nodes)]
    return jobs, nodes


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--refreshes", type=int, default=5)
    ap.add_argument("--shared", action="store_true",
                    help="two jobs a node (each half its GPUs): every node read device by device")
    args = ap.parse_args()

    from fleet_tui.core.cluster.aggjobs import read_job_usages
    from fleet_tui.core.cluster.headnode import head_node_view
    from fleet_tui.core.fleet import FleetView
    from fleet_tui.core.monitor.sources.prometheus import PrometheusSource

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(q, args.nodes, args.gpus, args.shared), daemon=True)
    proc.start()
    try:
        url = f"http://127.0.0.1:{q.get(timeout=300)}"
        src = PrometheusSource(url, env={}, timeout_s=60, aggregate_above=min(4096, args.nodes * args.gpus - 1))
        rows, sizes = [], []
        report = None
        for i in range(args.refreshes + 1):  # the first one warms imports and the connection
            now = time.time()
            slurm_jobs, nodes = _slurm(args.nodes, args.gpus, now, args.shared)
            c0 = time.process_time()
            snap = src.sample_blocking()
            view = FleetView.from_snapshot(snap, None, {"*": 98.32})
            c1 = time.process_time()
            read = read_job_usages(src.client, view, slurm_jobs, observed_s=60.0)
            c2 = time.process_time()
            report = head_node_view(list(read.usages), slurm_jobs, now=now, nodes=nodes,
                                    slurm=True, attributed=read.held)
            c3 = time.process_time()
            if snap.aggregate is None:
                raise SystemExit(f"not aggregated: {snap.errors or snap.message}")
            if i:
                rows.append(((c1 - c0) * 1e3, (c2 - c1) * 1e3, (c3 - c2) * 1e3))
                sizes.append((snap.aggregate.answer_bytes, read.answer_bytes))
        assert report is not None

        def stats(col: int) -> str:
            vals = sorted(r[col] for r in rows)
            return f"median {statistics.median(vals):6.1f}  max {vals[-1]:6.1f}"

        both = sorted(r[1] + r[2] for r in rows)
        print(f"{args.nodes * args.gpus} GPUs on {args.nodes} nodes, "
              f"{len(report.running.jobs)} running jobs attributed by Slurm, "
              f"{len(report.pending)} pending, {len(report.partitions)} partitions, "
              f"{args.refreshes} refreshes")
        print(f"  CPU ms  aggregated refresh + FleetView        {stats(0)}")
        print(f"  CPU ms  allocation read ({read.nodes} nodes: {read.whole_nodes} whole from the "
              f"roll-ups, {read.device_nodes} per device)   {stats(1)}")
        print(f"  CPU ms  head-node report                      {stats(2)}")
        print(f"  CPU ms  allocation + report                   median "
              f"{statistics.median(both):6.1f}  max {both[-1]:6.1f}   (target <= 300)")
        print(f"  answers: roll-ups {max(s[0] for s in sizes) / 1e6:.2f} MB, allocation "
              f"{max(s[1] for s in sizes) / 1e6:.2f} MB largest   (target <= 5)")
    finally:
        proc.terminate()
        proc.join(10)


if __name__ == "__main__":
    main()
