"""The project's Slurm reader and queue simulator against a real slurmctld/slurmd (conftest)."""

from __future__ import annotations

import time

import pytest

from fleet_tui.core.cluster.jobs import DeviceUsage, job_view
from fleet_tui.core.cluster.queue import QueueJob, simulate
from fleet_tui.core.cluster.slurm import SlurmError, SlurmReader


def _wait_done(reader, ids, timeout_s=90.0):
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = {j.job: j for j in reader.jobs() if j.job in ids}
        if len(jobs) == len(ids) and all(j.state == "COMPLETED" for j in jobs.values()):
            return jobs
        assert time.monotonic() < deadline, {k: v.state for k, v in jobs.items()}
        time.sleep(0.5)


def test_reader_sees_running_job_with_gpu_indices(slurm_cluster):
    reader = SlurmReader(env=slurm_cluster.env)
    jid = slurm_cluster.sbatch("--gres=gpu:3", "-t", "1", "-J", "probe", "--wrap", "sleep 3")
    deadline = time.monotonic() + 30
    while True:
        job = next(j for j in reader.jobs() if j.job == jid)
        if job.state == "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert job.state == "RUNNING"
    assert job.nodes == ("ftnode",)
    assert job.gpus == 3
    assert job.gpu_indices == {"ftnode": (0, 1, 2)}
    assert job.user == "root" and job.name == "probe" and job.time_limit_s == 60
    assert job.start_s and job.submit_s and job.start_s >= job.submit_s
    # the node's four GPUs, as a fleet source reports them (no labels): Slurm names the owner
    devices = [DeviceUsage(node="ftnode", index=i, util_pct=50.0 if i < 3 else 0.0,
                           idle_fraction=0.0 if i < 3 else 1.0, observed_s=60.0, usd_per_hour=3.0,
                           primary="healthy_compute" if i < 3 else "idle") for i in range(4)]
    view = job_view(devices, reader.jobs(), now=job.start_s + 60)
    (mine,) = [j for j in view.jobs if j.job == jid]
    assert (mine.user, mine.via, len(mine.devices), mine.util_pct) == ("root", "slurm", 3, 50.0)
    assert [(d.node, d.index) for d in view.unattributed] == [("ftnode", 3)]
    _wait_done(reader, {jid})


def test_sacct_without_accounting_is_a_clear_error(slurm_cluster):
    with pytest.raises(SlurmError, match="sacct .*Slurm accounting storage is disabled"):
        SlurmReader(env=slurm_cluster.env).sacct()


def test_simulated_backfill_order_matches_real_slurm(slurm_cluster):
    """4 GPUs. J1 holds 2 for 8 s (limit 3 min); J2 needs all 4; J3 (2 GPUs, limit 1 min) ends
    before J1's limit, so the backfill scheduler starts it ahead of J2; J4 (2 GPUs, limit 5 min)
    would delay J2's reservation, so it waits. Strict FIFO would run J1, J2, J3, J4."""
    reader = SlurmReader(env=slurm_cluster.env)
    ids = [slurm_cluster.sbatch("--gres=gpu:2", "-t", "3", "--wrap", "sleep 8")]
    time.sleep(1)
    ids.append(slurm_cluster.sbatch("--gres=gpu:4", "-t", "1", "--wrap", "sleep 1"))
    ids.append(slurm_cluster.sbatch("--gres=gpu:2", "-t", "1", "--wrap", "sleep 1"))
    ids.append(slurm_cluster.sbatch("--gres=gpu:2", "-t", "5", "--wrap", "sleep 1"))
    done = _wait_done(reader, set(ids))
    real = sorted(ids, key=lambda i: (done[i].start_s, done[i].submit_s, int(i)))
    assert real == [ids[0], ids[2], ids[1], ids[3]]
    jobs = [QueueJob(job=j.job, user=j.user, submit_s=j.submit_s, run_s=j.end_s - j.start_s,
                     gpus=j.gpus, requested_s=j.time_limit_s) for j in (done[i] for i in ids)]
    assert [j.gpus for j in jobs] == [2, 4, 2, 2]
    assert simulate(jobs, 4, "backfill").start_order() == real
    assert simulate(jobs, 4, "fifo").start_order() == [ids[0], ids[1], ids[2], ids[3]]
