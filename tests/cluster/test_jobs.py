"""Devices attributed to jobs from labels and from Slurm; per-job roll-ups, worst first."""

from __future__ import annotations

import pytest

from fleet_tui.core.cluster.jobs import DeviceUsage, idle_job_alerts, job_view, usages_from_doc
from fleet_tui.core.cluster.slurm import SlurmJob
from fleet_tui.core.errors import UserError


def dev(node, index, util, *, labels=None, idle=None, price=4.0, primary=None, sm=None, mem=None):
    idle_frac = (1.0 if util == 0 else 0.0) if idle is None else idle
    return DeviceUsage(node=node, index=index, labels=tuple(sorted((labels or {}).items())),
                       util_pct=util, sm_active_pct=sm, mem_peak_bytes=mem, idle_fraction=idle_frac,
                       observed_s=3600.0, usd_per_hour=price,
                       primary=primary or ("idle" if util == 0 else "healthy_compute"))


def fleet():
    """node-a and node-b, 4 GPUs each. Job 101 (hpc_job label) spans a:2-3 and b:0-1, one of its
    GPUs idle; job 102 holds a:0-1 busy; b:2 runs a Kubernetes pod; b:3 is idle with no job."""
    return [
        dev("node-a", 0, 90, labels={"hpc_job": "102"}, mem=10),
        dev("node-a", 1, 70, labels={"hpc_job": "102"}, mem=30),
        dev("node-a", 2, 60, labels={"hpc_job": "101"}),
        dev("node-a", 3, 0, labels={"hpc_job": "101"}),
        dev("node-b", 0, 80, labels={"hpc_job": "101"}),
        dev("node-b", 1, 20, labels={"hpc_job": "101"}, primary="input_bound"),
        dev("node-b", 2, 50, labels={"pod": "trainer-0", "namespace": "vision", "container": "c"}),
        dev("node-b", 3, 0),
    ]


def test_labels_attribute_jobs_spanning_two_nodes():
    view = job_view(fleet())
    jobs = {j.job: j for j in view.jobs}
    assert set(jobs) == {"101", "102", "vision/trainer-0"}
    j101 = jobs["101"]
    assert j101.nodes == ("node-a", "node-b") and len(j101.devices) == 4
    assert j101.util_pct == pytest.approx((60 + 0 + 80 + 20) / 4)
    assert j101.idle_device_hours == pytest.approx(1.0)
    assert j101.usd_idle == pytest.approx(4.0)
    assert j101.primary in ("idle", "input_bound")
    assert jobs["102"].util_pct == 80 and jobs["102"].mem_peak_bytes == 30
    assert jobs["vision/trainer-0"].user == "vision" and jobs["vision/trainer-0"].via == "kubernetes"
    assert view.jobs[0].job == "101"  # worst first: the only job with idle dollars
    assert [(d.node, d.index) for d in view.unattributed] == [("node-b", 3)]
    doc = view.to_dict()
    assert doc["unattributed"] == {"devices": 1, "idle_devices": 1, "usd_idle_per_hour": 4.0}
    first = doc["jobs"][0]
    assert {"job", "user", "nodes", "devices", "util_pct", "idle_device_hours", "usd_idle",
            "primary"} <= set(first)
    assert first["devices"] == 4


def test_slurm_supplies_owner_user_and_runtime():
    slurm = [
        SlurmJob(job="101", user="ana", state="RUNNING", nodes=("node-a", "node-b"), gpus=4,
                 gpu_indices={"node-a": (2, 3), "node-b": (0, 1)}, start_s=1000.0),
        SlurmJob(job="200", user="bo", state="RUNNING", nodes=("node-c",), gpus=2,
                 gpu_indices={"node-c": (0, 1)}, start_s=1000.0 + 3600),
        SlurmJob(job="300", user="cy", state="RUNNING", nodes=("node-d",), gpus=8, start_s=0.0),
        SlurmJob(job="400", user="di", state="PENDING", nodes=(), gpus=8),
    ]
    devices = [d for d in fleet() if d.node == "node-a" and d.index >= 2] + [
        dev("node-b:9400", 0, 80), dev("node-b", 1, 20),  # Prometheus instance with a port
        dev("node-c", 0, 0), dev("node-c", 1, 0), dev("node-c", 2, 0),
        dev("node-d", 0, 40), dev("node-d", 1, 40)]
    view = job_view(devices, slurm, now=1000.0 + 7200)
    jobs = {j.job: j for j in view.jobs}
    assert jobs["101"].user == "ana" and len(jobs["101"].devices) == 4
    assert jobs["101"].runtime_s == 7200
    assert jobs["200"].via == "slurm" and len(jobs["200"].devices) == 2
    assert jobs["200"].idle_device_hours == pytest.approx(2.0)  # 2 idle GPUs × 1 h
    assert len(jobs["300"].devices) == 2  # node claimed whole: no GPU indices
    assert [(d.node, d.index) for d in view.unattributed] == [("node-c", 2)]
    assert [j.job for j in job_view(devices, slurm, now=8200.0, user="bo").jobs] == ["200"]


def test_idle_job_alert_rule():
    devices = [dev("n", i, 0, labels={"hpc_job": "7", "user": "ed"}) for i in range(8)]
    alerts = idle_job_alerts(job_view(devices))
    assert len(alerts) == 1 and alerts[0]["idle_devices"] == 8 and alerts[0]["user"] == "ed"
    assert idle_job_alerts(job_view(devices[:7])) == []


def test_device_records_from_json_name_the_bad_record():
    ok = usages_from_doc({"devices": [{"node": "a", "index": 0, "labels": {"hpc_job": "1"}}]}, "f")
    assert ok[0].label_map == {"hpc_job": "1"}
    with pytest.raises(UserError, match=r"f: devices\[0\]: device record needs 'index'"):
        usages_from_doc({"devices": [{"node": "a"}]}, "f")


def test_history_gives_phases_and_true_peaks():
    from fleet_tui.core.cluster.device_phases import usage_from_samples
    from fleet_tui.core.monitor.snapshot import DeviceSnapshot

    def series(node, index, busy_until):
        return [DeviceSnapshot(index=index, name="H100", node=node, timestamp=t,
                               gpu_util_pct=95.0 if t < busy_until else 0.0,
                               sm_active_pct=80.0 if t < busy_until else 0.0,
                               mem_used_bytes=(70 if t < busy_until else 10) * 2**30,
                               mem_total_bytes=80 * 2**30) for t in range(0, 1200, 15)]

    devs = [usage_from_samples(series("n1", i, 600), labels={"hpc_job": "9"}, usd_per_hour=3.0)
            for i in range(2)]
    d = devs[0]
    assert d.mem_peak_bytes == 70 * 2**30 and d.observed_s == 1185
    assert d.idle_fraction == pytest.approx(0.5)
    kinds = [k for _, _, k in d.phases]
    assert kinds[-1] == "idle" and kinds[0] != "idle"
    (job,) = job_view(devs).jobs
    assert [k for _, _, k in job.phases] == kinds
    assert job.to_dict()["phases"][-1]["primary"] == "idle"
