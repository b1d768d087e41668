"""``fleet-tui jobs --slurm`` on a head node: a real single-node Slurm (tests/cluster/conftest.py)
runs a 2-GPU job, and a real Prometheus scrapes that node's (replayed) dcgm-exporter, whose series
carry no job label. Slurm's node list and GPU indices attribute the devices; the other two GPUs of
the node are counted apart; accounting is off, so finished jobs come with a note."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from fleet_tui.cli import main
from fleet_tui.core.cluster.slurm import SlurmReader
from tests.cluster.conftest import NODE, slurm_cluster  # noqa: F401 - the fixture
from tests.fleet.dcgm_replay import NodeSpec, ReplayFleet, load_frames, phase_runs
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

pytestmark = pytest.mark.prometheus


@pytest.fixture
def node_exporter():
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    runs = phase_runs(load_frames())
    busy, idle = runs["compute_bound"][10], runs["idle"][10]
    fleet = ReplayFleet([NodeSpec(hostname=NODE, gpus=[[busy], [busy], [idle], [idle]],
                                  offsets=[0] * 4)])
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 4, 30, what="the exporter")
        yield prom, busy.gpu_util_pct
    finally:
        prom.close()
        fleet.close()


def test_slurm_names_the_job_on_prometheus_devices(slurm_cluster, node_exporter,  # noqa: F811
                                                   monkeypatch, capsys):
    prom, busy_util = node_exporter
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    jid = slurm_cluster.sbatch("--gres=gpu:2", "-t", "2", "-J", "train", "--wrap", "sleep 60")
    reader = SlurmReader(env=slurm_cluster.env)
    deadline = time.monotonic() + 30
    while not any(j.job == jid and j.state == "RUNNING" for j in reader.jobs()):
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.2)
    try:
        assert main(["jobs", "--source", f"prometheus:{prom.url}", "--slurm", "--window", "3",
                     "--node-price", "32", "--json"]) == 0
        captured = capsys.readouterr()
        doc = json.loads(captured.out)
        (job,) = doc["jobs"]
        assert (job["job"], job["user"], job["via"], job["devices"]) == (jid, "root", "slurm", 2)
        assert job["nodes"] == [NODE] and job["util_pct"] == busy_util and job["state"] == "RUNNING"
        assert doc["unattributed"] == {"devices": 2, "idle_devices": 2, "usd_idle_per_hour": 16.0}
        assert doc["finished"] is None and "accounting storage is disabled" in doc["finished_note"]
        assert "finished jobs not listed" in captured.err
    finally:
        subprocess.run(["scancel", jid], env=slurm_cluster.env, check=False, timeout=10)
