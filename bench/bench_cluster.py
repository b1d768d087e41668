"""Head-node scale: the jobs view and the queue simulator.

    .venv/bin/python bench/bench_cluster.py [--jobs 100000] [--refreshes 20] [--seed 7]

1. Jobs view: 128 nodes × 8 GPUs = 1,024 diagnosed devices (``core.fleet.FleetDevice``, as the
   fleet view hands them over) and 200 jobs — all known to Slurm (node list + GPU indices), half
   also named by dcgm-exporter's ``hpc_job`` label, some spanning two nodes, ~10% of GPUs without a
   job. Measured per refresh: the answer of the job-label query (``promjobs.job_label_query``)
   read into per-device labels, the devices turned into ``DeviceUsage`` records carrying them,
   and ``job_view`` (attribution, roll-ups, worst-first sort). Goal <= 200 ms CPU. The fleet view itself (query,
   analysis) is bench_fleet.py's number and is not repeated here.
2. Queue: a synthetic SWF file (seeded; Poisson arrivals at ~90% offered load on 1,024 GPUs, GPU
   counts 1-64, log-normal run times, requested times 1-3× the run time, 40 users; 10% of jobs get
   a higher priority so ``priority`` and ``preemption`` have something to do) is written, parsed,
   and simulated under all five policies on one core. Goal <= 10 s for 100,000 jobs × 5 policies.

CPU is ``time.process_time()`` (the simulator is single-threaded: one core).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleet_tui.core.cluster.joblists import load_workload, swf_line  # noqa: E402
from fleet_tui.core.cluster.jobs import job_view  # noqa: E402
from fleet_tui.core.cluster.promjobs import labels_from_result, usages_from_view  # noqa: E402
from fleet_tui.core.cluster.queue import POLICIES, SLURM_BF_MAX_JOB_TEST, simulate  # noqa: E402
from fleet_tui.core.cluster.slurm import SlurmJob  # noqa: E402
from fleet_tui.core.fleet import fleet_device  # noqa: E402
from fleet_tui.core.monitor.snapshot import DeviceSnapshot  # noqa: E402


def fleet(rng: random.Random, nodes: int = 128, gpus: int = 8, jobs: int = 200):
    """(FleetDevices, labels by device key, Slurm jobs)."""
    slots = [(f"gpu{n:03d}", i) for n in range(nodes) for i in range(gpus)]
    free = slots[: int(len(slots) * 0.9)]  # the last 10% run no job
    labels: dict[str, dict[str, str]] = {}
    slurm: list[SlurmJob] = []
    pos = 0
    for j in range(jobs):
        size = max(1, min(len(free) - pos - (jobs - j - 1), rng.choice((1, 2, 4, 4, 8, 8, 12))))
        mine = free[pos: pos + size]
        pos += size
        jid = str(100000 + j)
        if j % 2 == 0:
            for node, i in mine:
                labels[f"{node}/{i}"] = {"hpc_job": jid, "user": f"user{j % 40}"}
        by_node: dict[str, list[int]] = {}
        for node, i in mine:
            by_node.setdefault(node, []).append(i)
        slurm.append(SlurmJob(job=jid, user=f"user{j % 40}", state="RUNNING",
                              nodes=tuple(by_node), gpus=size,
                              gpu_indices={n: tuple(v) for n, v in by_node.items()},
                              start_s=time.time() - rng.uniform(600, 86400)))
    devices = []
    for node, i in slots:
        util = rng.choice((0.0, 0.0, 35.0, 80.0, 97.0))
        snap = DeviceSnapshot(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-{node}-{i}",
                              node=node, gpu_util_pct=util, sm_active_pct=util * 0.7,
                              mem_used_bytes=int(util * 8e8), mem_total_bytes=80 * 2**30)
        kind = "idle" if util == 0 else "healthy_compute"
        devices.append(fleet_device(snap, [{"kind": kind, "severity": "info", "confidence": 0.9,
                                            "action": ""}], 98.32 / 8))
    return devices, labels, slurm


def label_answer(devices, labels) -> list[dict]:
    """What Prometheus answers to promjobs.job_label_query() for these devices."""
    out = []
    for d in devices:
        extra = labels.get(f"{d.node}/{d.index}", {})
        out.append({"metric": {"Hostname": d.node, "gpu": str(d.index), "UUID": d.uuid,
                               **({"hpc_job": extra["hpc_job"], "hpc_user": extra["user"]}
                                  if extra else {})}, "value": [0, "1"]})
    return out


class _View:  # the part of core.fleet.FleetView that usages_from_view reads
    def __init__(self, devices):
        self.offenders = devices


def bench_jobs(refreshes: int, rng: random.Random) -> None:
    devices, labels, slurm = fleet(rng)
    answer = label_answer(devices, labels)
    now = time.time()
    times, label_times = [], []
    view = None
    for _ in range(refreshes):
        t0 = time.process_time()
        device_labels = labels_from_result(answer)  # the pane does this every 30 s, the CLI once
        t1 = time.process_time()
        usages = usages_from_view(_View(devices), device_labels, observed_s=60.0)
        view = job_view(usages, slurm, now=now)
        t2 = time.process_time()
        label_times.append((t1 - t0) * 1000)
        times.append((t2 - t0) * 1000)
    assert view is not None and len(view.jobs) == 200, len(view.jobs)
    print(f"jobs view: {len(devices)} devices, {len(view.jobs)} jobs, "
          f"{len(view.unattributed)} devices without a job: "
          f"median {statistics.median(times):.1f} ms CPU per refresh "
          f"(min {min(times):.1f}, max {max(times):.1f}; goal <= 200 ms), of which reading the "
          f"job labels' answer {statistics.median(label_times):.1f} ms")


def synthetic_swf(path: Path, n: int, rng: random.Random, gpus_total: int = 1024,
                  load: float = 0.9) -> None:
    sizes = (1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 32, 64)
    mean_size = sum(sizes) / len(sizes)
    mu, sigma = math.log(1800.0), 1.2  # log-normal run time, median 30 min
    mean_run = math.exp(mu + sigma**2 / 2)
    rate = load * gpus_total / (mean_size * mean_run)  # arrivals per second
    t = 0.0
    lines = ["; synthetic workload for bench_cluster.py (seeded); SWF 2.2, processors = GPUs"]
    for k in range(1, n + 1):
        t += rng.expovariate(rate)
        run = max(1, int(rng.lognormvariate(mu, sigma)))
        req = int(run * rng.uniform(1.0, 3.0)) + 60
        lines.append(swf_line(k, t, run, rng.choice(sizes), req, rng.randrange(40)))
    path.write_text("\n".join(lines) + "\n")


def bench_queue(n: int, rng: random.Random, load: float = 0.9) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.swf"
        synthetic_swf(path, n, rng, load=load)
        t0 = time.process_time()
        work = load_workload(path)
        parse_s = time.process_time() - t0
    jobs = [dataclasses.replace(j, priority=10.0) if rng.random() < 0.1 else j for j in work.jobs]
    total = parse_s
    print(f"queue: {len(jobs):,} SWF jobs on 128 × 8 = 1,024 GPUs at {load:.0%} offered load; "
          f"parse {parse_s:.2f} s CPU")
    for policy in POLICIES:
        t0 = time.process_time()
        res = simulate(jobs, 1024, policy)
        dt = time.process_time() - t0
        total += dt
        print(f"  {policy:<11} {dt:6.2f} s CPU   mean wait {res.mean_wait_s / 60:8.1f} min   "
              f"p95 {res.p95_wait_s / 3600:6.1f} h   util {res.utilization_pct:5.1f}%   "
              f"preemptions {res.preemptions}")
    print(f"  total (parse + 5 policies) {total:.2f} s CPU (goal <= 10 s)")
    t0 = time.process_time()
    res = simulate(jobs, 1024, "backfill", backfill_depth=SLURM_BF_MAX_JOB_TEST)
    print(f"  backfill with --backfill-depth {SLURM_BF_MAX_JOB_TEST} (Slurm's default "
          f"bf_max_job_test): {time.process_time() - t0:.2f} s CPU   mean wait "
          f"{res.mean_wait_s / 60:.1f} min   p95 {res.p95_wait_s / 3600:.1f} h")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--load", type=float, default=0.9, help="offered load of the synthetic SWF")
    args = ap.parse_args()
    bench_jobs(args.refreshes, random.Random(args.seed))
    bench_queue(args.jobs, random.Random(args.seed), args.load)


if __name__ == "__main__":
    main()
