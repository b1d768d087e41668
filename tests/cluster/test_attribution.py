"""Attribution as Slurm means it, on recorded ``squeue --json`` of Debian's Slurm 22.05.8
(tests/cluster/data/README.md): allocated GPUs only, array ids, GRES index joined by minor number,
Slurm's allocation over a stale label, the pending jobs and the partitions' demand."""

from __future__ import annotations

from pathlib import Path

from fleet_tui.core.cluster.headnode import head_node_view
from fleet_tui.core.cluster.jobs import DeviceUsage, job_view
from fleet_tui.core.cluster.slurm import parse_jobs_json, parse_nodes_json

DATA = Path(__file__).parent / "data"


def squeue():
    return parse_jobs_json((DATA / "squeue_slurm_22_05_8_debian.json").read_text())


def gn1(minor_of=lambda i: i, labels=None, util=0.0):
    return [DeviceUsage(node="gn1", index=i, usd_per_hour=2.0, observed_s=60.0,
                        labels=tuple(sorted({"device": f"nvidia{minor_of(i)}",
                                             **(labels or {}).get(i, {})}.items())),
                        util_pct=util, idle_fraction=1.0 if util == 0 else 0.0,
                        primary="idle" if util == 0 else "healthy_compute") for i in range(4)]


def test_records_read_as_slurm_prints_them():
    jobs = {j.job: j for j in squeue()}
    assert set(jobs) == {"1", "2_0", "2_1", "3", "4", "5"}
    cpu = jobs["1"]
    assert (cpu.gpus, cpu.cpus, cpu.mem_bytes, cpu.nodes) == (0, 2, 1000 * 2**20, ("gn1",))
    assert jobs["2_0"].job_raw == "6" and jobs["2_0"].ids == ("2_0", "6")
    assert jobs["2_0"].gpu_indices == {"gn1": (0, 1)} and jobs["2_1"].gpu_indices == {"gn1": (2, 3)}
    assert (jobs["3"].state, jobs["3"].reason, jobs["3"].gpus, jobs["3"].nodes) == \
        ("PENDING", "Priority", 8, ())
    assert jobs["4"].reason == "JobHeldUser" and jobs["5"].reason == "Dependency"
    assert jobs["2_0"].account == "physics" and jobs["2_0"].exit_code == "0:0"


def test_cpu_only_job_holds_no_gpu():
    jobs = [j for j in squeue() if j.job == "1"]  # alone on gn1
    view = job_view(gn1(), jobs, now=jobs[0].start_s + 600)
    assert view.jobs == () and len(view.unattributed) == 4


def test_gres_index_joins_minor_number_not_position():
    # NVML numbers gn1's devices in the reverse of their minor numbers
    devices = gn1(minor_of=lambda i: 3 - i)
    view = job_view(devices, squeue(), now=2e9)
    jobs = {j.job: j for j in view.jobs}
    assert sorted(d.minor for d in jobs["2_0"].devices) == [0, 1]
    assert sorted(d.index for d in jobs["2_0"].devices) == [2, 3]


def test_live_allocation_beats_a_stale_label_and_says_so():
    devices = gn1(labels={0: {"hpc_job": "1"}, 3: {"hpc_job": "6"}})  # 6 is 2_0's raw id
    view = job_view(devices, squeue(), now=2e9)
    jobs = {j.job: j for j in view.jobs}
    assert [(c.index, c.label_job, c.slurm_job) for c in view.conflicts] == [(0, "1", "2_0"),
                                                                             (3, "6", "2_1")]
    assert sorted(d.index for d in jobs["2_0"].devices) == [0, 1]
    assert "label says job 1, Slurm allocates it to job 2_0" in view.conflicts[0].message
    # without Slurm the labels are all there is
    assert {j.job for j in job_view(devices).jobs} == {"1", "6"}


def test_pending_demand_beside_free_and_idle_gpus():
    nodes = parse_nodes_json((DATA / "sinfo_slurm_22_05_8_debian.json").read_text())
    jobs = squeue()
    now = max(j.submit_s for j in jobs) + 30
    view = head_node_view(gn1(), jobs, now=now, nodes=nodes, slurm=True)
    assert {p.job: (p.reason, p.gpus) for p in view.pending} == {
        "3": ("Priority", 8), "4": ("JobHeldUser", 1), "5": ("Dependency", 1)}
    assert all(p.age_s is not None and p.age_s >= 30 for p in view.pending)
    (gpu,) = [p for p in view.partitions if p.partition == "gpu"]
    assert gpu.gpus == sum(n.gpus for n in nodes if "gpu" in n.partitions)
    assert gpu.gpus_pending == 10 and gpu.pending_jobs == 3
    assert gpu.gpus_idle_allocated == 4  # the array's four GPUs read idle
    assert gpu.short_gpus == max(0, 10 - gpu.gpus_free)
    assert {p.job for p in head_node_view(gn1(), jobs, now=now, user="ftdave").pending} == {"4", "5"}
    assert head_node_view(gn1(), jobs, now=now, account="physics").pending == ()
