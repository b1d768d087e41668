"""``fleet-tui jobs --slurm`` on a fleet read as server-side aggregates gives the per-device answer.

A real single-node Slurm (tests/cluster/conftest.py: node ``ftnode``, 4 GRES GPUs, partition
``gpu``) runs a 2-GPU job and holds a 4-GPU job pending for Resources; a real Prometheus scrapes
``ftnode``'s replayed dcgm-exporter (two busy GPUs, two idle; GPU 0 carries a stale ``hpc_job``
label of a job Slurm does not run) and a node Slurm does not know whose GPUs carry another stale
label. The same data is read with the threshold lowered to 0 (aggregated: only the GPUs of the
nodes Slurm's running jobs hold, and job-labelled GPUs elsewhere, are read) and raised above the
fleet (device by device): the running jobs, the conflicts, the pending jobs, the partitions and
the job report are the same."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from fleet_tui.cli import main
from fleet_tui.core.cluster.slurm import SlurmReader
from tests.cluster.conftest import NODE, slurm_cluster  # noqa: F401 - the fixture
from tests.fleet.dcgm_replay import ReplayFleet, load_frames, phase_runs
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until
from tests.fleet.test_jobs_prometheus import JobNode

pytestmark = pytest.mark.prometheus

STALE = "999991"  # a job id on ftnode's GPU 0 that Slurm does not run
GHOST = "999992"  # the label on the GPUs of the node Slurm does not know


def _serve(stale: bool):
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    runs = phase_runs(load_frames())
    busy, idle = runs["compute_bound"][10], runs["idle"][10]
    nodes = [JobNode(hostname=NODE, gpus=[[busy], [busy], [idle], [idle]], offsets=[0] * 4,
                     hpc_jobs=[STALE if stale else None, None, None, None]),
             JobNode(hostname="ghost01", gpus=[[idle], [busy]], offsets=[0] * 2,
                     hpc_jobs=[GHOST, GHOST] if stale else [])]
    fleet = ReplayFleet(nodes)
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 6, 30, what="the exporters")
        yield prom
    finally:
        prom.close()
        fleet.close()


@pytest.fixture
def exporters():
    """ftnode with a stale label on GPU 0, and a node Slurm does not know with another."""
    yield from _serve(stale=True)


@pytest.fixture
def plain_exporters():
    """The same GPUs without any job label."""
    yield from _serve(stale=False)


def _wait_running(reader, job: str) -> None:
    deadline = time.monotonic() + 30
    while not any(j.job == job and j.state == "RUNNING" for j in reader.jobs()):
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.2)


def _jobs(capsys, prom, threshold: int, *extra: str) -> dict:
    assert main(["jobs", *extra, "--source", f"prometheus:{prom.url}", "--window", "3",
                 "--node-price", "32", "--json", "--aggregate-above", str(threshold)]) == 0
    return json.loads(capsys.readouterr().out)


def _running(doc: dict) -> dict:
    return {j["job"]: (j["user"], j["via"], j["devices"], j["nodes"], j["util_pct"],
                       j["sm_active_pct"], j["state"], j["partition"]) for j in doc["jobs"]}


def _devices(job: dict) -> list:
    return [(d["node"], d["index"], d["util_pct"], d["sm_active_pct"], d["idle_fraction"])
            for d in job["device_list"]]


def test_aggregated_jobs_with_slurm_equal_the_per_device_answer(slurm_cluster, exporters,  # noqa: F811
                                                                 monkeypatch, capsys):
    prom = exporters
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    run = slurm_cluster.sbatch("--gres=gpu:2", "-t", "5", "-J", "train", "--wrap", "sleep 120")
    reader = SlurmReader(env=slurm_cluster.env)
    _wait_running(reader, run)
    deadline = time.monotonic() + 30
    wait = slurm_cluster.sbatch("--gres=gpu:4", "-t", "5", "-J", "big", "--wrap", "sleep 60")
    try:
        while not any(j.job == wait and j.reason == "Resources" for j in reader.jobs()):
            assert time.monotonic() < deadline + 30, "the second job is not pending on Resources"
            time.sleep(0.2)
        dev = _jobs(capsys, prom, 10_000, "--slurm")
        agg = _jobs(capsys, prom, 0, "--slurm")
        assert "aggregated" not in dev
        assert agg["aggregated"] is True and agg["threshold_devices"] == 0
        assert agg["fleet_devices"] == 6
        # only ftnode (Slurm's running job) and the job-labelled GPUs elsewhere were read
        alloc = agg["allocation"]
        assert (alloc["nodes"], alloc["whole_nodes"], alloc["device_nodes"]) == (1, 0, 2)
        assert alloc["devices"] == 6
        # the running job: Slurm's allocation, its two GPUs, with the same readings
        assert _running(agg) == _running(dev)
        job = next(j for j in agg["jobs"] if j["job"] == run)
        assert (job["via"], job["devices"], job["nodes"]) == ("slurm", 2, [NODE])
        for a, d in zip(agg["jobs"], dev["jobs"]):
            assert a["idle_device_hours"] == pytest.approx(d["idle_device_hours"], rel=0.05,
                                                           abs=1e-4)
        # a stale label loses to Slurm's allocation on both paths, and the conflicts are the same
        assert sorted(map(json.dumps, agg["conflicts"])) == sorted(map(json.dumps,
                                                                       dev["conflicts"]))
        assert {c["label_job"] for c in agg["conflicts"]} >= {GHOST}
        assert agg["unattributed"] == dev["unattributed"]
        # pending demand and partitions: Slurm's, beside the idle GPUs held
        strip = lambda ps: [{k: v for k, v in p.items() if k != "age_s"} for p in ps]  # noqa: E731
        assert strip(agg["pending"]) == strip(dev["pending"])
        assert [p["job"] for p in agg["pending"]] == [wait]
        assert agg["pending"][0]["reason"] == "Resources" and agg["pending"][0]["gpus"] == 4
        assert agg["partitions"] == dev["partitions"]
        (part,) = agg["partitions"]
        assert (part["partition"], part["gpus"], part["gpus_pending"]) == ("gpu", 4, 4)
        assert part["gpus_free"] == 2 and part["short_gpus"] == 2
        idle_held = sum(1 for d in _devices(
            _jobs(capsys, prom, 0, "--slurm", "report", run)) if d[4] >= 0.5)
        assert part["gpus_idle_allocated"] == idle_held
        # the job report: the same devices with the same readings
        rep_dev = _jobs(capsys, prom, 10_000, "--slurm", "report", run)
        rep_agg = _jobs(capsys, prom, 0, "--slurm", "report", run)
        assert _devices(rep_agg) == _devices(rep_dev) and len(_devices(rep_agg)) == 2
        assert rep_agg["util_pct"] == rep_dev["util_pct"]
        assert rep_agg["slurm"]["job"] == rep_dev["slurm"]["job"] == run
        # the text says how it was read
        assert main(["jobs", "--slurm", "--source", f"prometheus:{prom.url}",
                     "--aggregate-above", "0"]) == 0
        out = capsys.readouterr().out
        assert "aggregated on the server" in out and run in out and "Resources" in out
    finally:
        subprocess.run(["scancel", run, wait], env=slurm_cluster.env, check=False, timeout=10)


def test_aggregated_report_by_job_label_without_slurm(exporters, capsys):
    prom = exporters
    dev = _jobs(capsys, prom, 10_000, "report", GHOST)
    agg = _jobs(capsys, prom, 0, "report", GHOST)
    assert _devices(agg) == _devices(dev) and len(_devices(agg)) == 2
    assert (agg["job"], agg["via"], agg["util_pct"]) == (GHOST, "hpc_job", dev["util_pct"])
    assert main(["jobs", "report", "no-such-job", "--source", f"prometheus:{prom.url}",
                 "--aggregate-above", "0"]) == 2
    assert "no-such-job" in capsys.readouterr().err


def test_a_node_held_whole_comes_from_the_roll_ups(slurm_cluster, plain_exporters,  # noqa: F811
                                                   monkeypatch, capsys):
    """A job holding all of ftnode's GPUs (no label to check) is taken from the node's roll-up:
    no device of it is read for the jobs list, yet its devices, means, idle GPUs and their
    dollars are the per-device answer; its report reads the node device by device."""
    prom = plain_exporters
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    run = slurm_cluster.sbatch("--gres=gpu:4", "-t", "5", "-J", "whole", "--wrap", "sleep 120")
    _wait_running(SlurmReader(env=slurm_cluster.env), run)
    try:
        dev = _jobs(capsys, prom, 10_000, "--slurm")
        agg = _jobs(capsys, prom, 0, "--slurm")
        alloc = agg["allocation"]
        assert (alloc["nodes"], alloc["whole_nodes"], alloc["device_nodes"]) == (1, 1, 0)
        assert _running(agg) == _running(dev)
        (a,), (d,) = agg["jobs"], dev["jobs"]
        assert (a["job"], a["devices"], a["nodes"]) == (run, 4, [NODE])
        # idle GPUs: the same count (per node: the partitions' idle GPUs held)
        assert a["idle_device_hours"] == pytest.approx(d["idle_device_hours"], abs=1e-3)
        assert agg["partitions"] == dev["partitions"]
        assert agg["partitions"][0]["gpus_idle_allocated"] == 2
        rep_dev = _jobs(capsys, prom, 10_000, "--slurm", "report", run)
        rep_agg = _jobs(capsys, prom, 0, "--slurm", "report", run)
        assert _devices(rep_agg) == _devices(rep_dev) and len(_devices(rep_agg)) == 4
        # ended (squeue still lists it): the report is its GPUs' history over its life, the same
        # both ways
        time.sleep(3)  # a few scrapes of its life
        subprocess.run(["scancel", run], env=slurm_cluster.env, check=True, timeout=10)
        reader = SlurmReader(env=slurm_cluster.env)
        deadline = time.monotonic() + 30
        while not any(j.job == run and j.state == "CANCELLED" for j in reader.jobs()):
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.2)
        end_dev = _jobs(capsys, prom, 10_000, "--slurm", "report", run)
        end_agg = _jobs(capsys, prom, 0, "--slurm", "report", run)
        assert end_agg["history_note"] is None and end_agg["history"]["samples"] > 0
        assert end_agg["slurm"]["state"] == end_dev["slurm"]["state"] == "CANCELLED"
        assert [d[:3] for d in _devices(end_agg)] == [d[:3] for d in _devices(end_dev)]
        assert len(_devices(end_agg)) == 4
        assert end_agg["util_pct"] == pytest.approx(end_dev["util_pct"], abs=0.5)
    finally:
        subprocess.run(["scancel", run], env=slurm_cluster.env, check=False, timeout=10)
