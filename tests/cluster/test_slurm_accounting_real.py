"""``fleet-tui jobs --slurm`` against a real multi-node Slurm with accounting (slurmdbd on a private
MariaDB; tests/cluster/slurm_accounting.py), four users in two accounts. What the tool shows is
checked against ``squeue``, ``sacct``, ``scontrol`` and ``sreport`` of the same cluster.

The cluster, set up once for the module:

- a finished GPU job (ftdave, 1 GPU, burns one CPU for 2 s, exits 3) and a finished CPU-only one;
- a job cancelled while it waited for GPUs (ftcarol): it never started;
- running: ftalice's CPU-only job (2 CPUs, 1000 MB) alone on GPU node gn1, and ftbob's two-task
  array (2 GPUs each) filling gn2;
- pending: ftcarol's 2-node × 4-GPU job (waits for GPUs), ftdave's held job and a job depending on
  carol's.

The fleet's readings come as a devices document (the fleet source is not what is tested here):
gn2's devices are numbered by NVML in the reverse of their minor numbers, so joining Slurm's GRES
index by position would swap bob's tasks; one gn2 device carries a stale ``hpc_job`` label naming
alice's job, one gn1 device a label naming the finished job.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.slurm_accounting import AccountingCluster, missing_or_skip

BUSY = "timeout 2 sh -c 'while :; do :; done'; exit 3"


def _until(ok, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        got = ok()
        if got:
            return got
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing_or_skip()
    c = AccountingCluster()
    try:
        c.start()
        ids: dict[str, str] = {}
        ids["gpu_done"] = c.sbatch("--gres=gpu:1", "-c", "1", "-w", "gn1", "-t", "2", "-J", "burn",
                                   "--wrap", BUSY, user="ftdave")
        ids["cpu_done"] = c.sbatch("-c", "1", "-t", "2", "-J", "cpu-short", "-w", "gn1", "--wrap",
                                   "true", user="ftalice")
        _until(lambda: c.run("squeue", "-h", "-j", ids["gpu_done"], "-o", "%T").stdout.strip()
               == "RUNNING", "the GPU job to start")
        # waits for gn1's GPU that the burning job holds, and is cancelled before it gets it
        ids["cancelled"] = c.sbatch("--gres=gpu:4", "-w", "gn1", "-t", "2", "-J", "never",
                                    "--wrap", "true", user="ftcarol")
        c.run("scancel", ids["cancelled"])
        done = {ids["gpu_done"], ids["cpu_done"], ids["cancelled"]}
        _until(lambda: not done & set(c.run("squeue", "-h", "-o", "%i").stdout.split()),
               "the short jobs to end")
        ids["cpu_only"] = c.sbatch("-c", "2", "--mem=1000M", "-w", "gn1", "-t", "10", "-J",
                                   "cpu-only", "--wrap", "sleep 300", user="ftalice")
        ids["array"] = c.sbatch("--gres=gpu:2", "-a", "0-1", "-w", "gn2", "-t", "10", "-J",
                                "sweep", "--wrap", "sleep 300", user="ftbob")
        _until(lambda: len(c.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.split()) == 3,
               "three running jobs")
        ids["big"] = c.sbatch("-N", "2", "--gres=gpu:4", "-t", "10", "-J", "big", "--wrap",
                              "sleep 1", user="ftcarol")
        ids["held"] = c.sbatch("--gres=gpu:1", "-H", "-t", "10", "-J", "held", "--wrap",
                               "sleep 1", user="ftdave")
        ids["dep"] = c.sbatch("--gres=gpu:1", f"--dependency=afterok:{ids['big']}", "-t", "10",
                              "-J", "after-big", "--wrap", "sleep 1", user="ftdave")
        # the scheduler has given each pending job its reason
        _until(lambda: "None" not in c.run("squeue", "-h", "-t", "PD", "-o", "%r").stdout,
               "reasons for the pending jobs", 30)
        c.ids = ids  # type: ignore[attr-defined]
        c.devices = _devices(tmp_path_factory.mktemp("fleet"), ids)  # type: ignore[attr-defined]
        yield c
    finally:
        c.stop()


def _devices(where: Path, ids: dict[str, str]) -> Path:
    devs = []
    for i in range(4):  # gn1: nobody's GPUs, all idle; GPU 3 labelled with a finished job
        labels = {"device": f"nvidia{i}"}
        if i == 3:
            labels["hpc_job"] = ids["gpu_done"]
        devs.append({"node": "gn1", "index": i, "labels": labels, "util_pct": 0,
                     "idle_fraction": 1, "observed_s": 60, "usd_per_hour": 2.0, "primary": "idle"})
    for i in range(4):  # gn2: NVML index i is minor 3 - i; minors 0-1 busy, 2-3 idle
        minor = 3 - i
        labels = {"device": f"nvidia{minor}"}
        if minor == 0:
            labels["hpc_job"] = ids["cpu_only"]  # stale: Slurm gives this GPU to the array
        busy = minor < 2
        devs.append({"node": "gn2", "index": i, "labels": labels, "util_pct": 80 if busy else 0,
                     "idle_fraction": 0 if busy else 1, "observed_s": 60, "usd_per_hour": 2.0,
                     "primary": "healthy_compute" if busy else "idle"})
    path = where / "devices.json"
    path.write_text(json.dumps({"devices": devs}))
    return path


def _tool(c, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fleet_tui", "jobs", "--slurm", *args],
                          capture_output=True, text=True, env=c.env, timeout=120, check=False)


def _doc(c, *args: str) -> dict:
    out = _tool(c, "--devices", str(c.devices), "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _squeue(c, state: str, fmt: str) -> list[list[str]]:
    out = c.run("squeue", "-h", "-t", state, "-o", fmt).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


def _sacct(c, *args: str, fmt: str) -> list[list[str]]:
    out = c.run("sacct", "-X", "-P", "-n", *args, "--format=" + fmt.replace("|", ",")).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


def _gres_idx(c, job: str) -> tuple[int, ...]:
    text = c.run("scontrol", "-d", "show", "job", job).stdout
    m = re.search(r"\bGRES=gpu[^\s(]*\(IDX:(\d+)(?:-(\d+))?\)", text)  # Nodes=gn2 ... GRES=gpu:2(IDX:0-1)
    assert m, text
    return tuple(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))


def test_running_jobs_hold_exactly_their_allocated_gpus(cluster):
    c = cluster
    doc = _doc(c)
    running = {r[0]: r for r in _squeue(c, "R", "%i|%u|%a|%P|%j|%b|%N|%l")}
    gpu_jobs = {j for j, r in running.items() if "gpu" in r[5]}
    shown = {j["job"]: j for j in doc["jobs"]}
    # the array's tasks as squeue names them; alice's CPU-only job holds no GPU, so is not listed
    assert set(shown) == gpu_jobs == {f"{c.ids['array']}_0", f"{c.ids['array']}_1"}
    assert c.ids["cpu_only"] in running and c.ids["cpu_only"] not in shown
    for jid, j in shown.items():
        r = running[jid]
        assert (j["user"], j["account"], j["partition"], j["name"]) == (r[1], r[2], r[3], r[4])
        assert j["state"] == "RUNNING" and j["nodes"] == [r[6]]
        assert j["devices"] == int(r[5].rsplit(":", 1)[1])  # gres:gpu:2
        assert j["time_limit_s"] == 600
    # joined by minor number: task 0 holds minors 0-1 (busy), task 1 minors 2-3 (idle)
    for task, util in ((0, 80.0), (1, 0.0)):
        jid = f"{c.ids['array']}_{task}"
        report = json.loads(_tool(c, "--devices", str(c.devices), "--json", "report",
                                  jid).stdout)
        minors = sorted(3 - d["index"] for d in report["device_list"])
        assert tuple(minors) == _gres_idx(c, jid)
        assert report["util_pct"] == util
    # gn1's four GPUs belong to nobody: not billed to alice
    assert doc["unattributed"]["devices"] == 4 and doc["unattributed"]["idle_devices"] == 4
    assert "ftalice" not in {row["user"] for row in doc["chargeback"]}


def test_stale_labels_lose_to_slurm_and_are_shown(cluster):
    c = cluster
    doc = _doc(c)
    conflicts = {(x["node"], x["label_job"]): x["slurm_job"] for x in doc["conflicts"]}
    assert conflicts == {("gn2", c.ids["cpu_only"]): f"{c.ids['array']}_0",
                         ("gn1", c.ids["gpu_done"]): ""}
    text = _tool(c, "--devices", str(c.devices)).stdout
    assert f"label says job {c.ids['cpu_only']}, Slurm allocates it to job {c.ids['array']}_0" \
        in text


def test_pending_jobs_with_reasons_and_demand(cluster):
    c = cluster
    doc = _doc(c)
    pending = {r[0]: r for r in _squeue(c, "PD", "%i|%u|%a|%P|%r|%b|%D")}
    shown = {p["job"]: p for p in doc["pending"]}
    assert set(shown) == set(pending) == {c.ids["big"], c.ids["held"], c.ids["dep"]}
    for jid, p in shown.items():
        r = pending[jid]
        assert (p["user"], p["account"], p["partition"], p["reason"]) == (r[1], r[2], r[3], r[4])
        assert p["gpus"] == int(r[5].rsplit(":", 1)[1]) * int(r[6])
        assert p["age_s"] is not None and p["age_s"] >= 0
    assert shown[c.ids["held"]]["reason"] == "JobHeldUser"
    assert shown[c.ids["dep"]]["reason"] == "Dependency"
    (gpu,) = [p for p in doc["partitions"] if p["partition"] == "gpu"]
    alloc = c.run("sinfo", "-h", "-p", "gpu", "-N", "-O", "NodeList:10,GresUsed:40").stdout
    used = sum(int(line.split("gpu:")[1].split("(")[0]) for line in alloc.splitlines()
               if "gpu:" in line)
    assert (gpu["gpus"], gpu["gpus_free"]) == (8, 8 - used) == (8, 4)
    assert gpu["gpus_pending"] == 8 + 1 + 1 and gpu["short_gpus"] == 6
    assert gpu["gpus_idle_allocated"] == 2  # task 1's two idle GPUs


def test_finished_jobs_match_sacct_and_sreport(cluster):
    c = cluster
    doc = _doc(c)
    finished = {f["job"]: f for f in doc["finished"]}
    rows = {r[0]: r for r in _sacct(c, "-a", fmt="JobID|User|Account|State|ExitCode|AllocTRES|"
                                                 "ElapsedRaw|NodeList")}
    # never started: sacct lists it with no nodes; the tool does not count it
    assert rows[c.ids["cancelled"]][3].startswith("CANCELLED")
    assert rows[c.ids["cancelled"]][7] == "None assigned"
    assert c.ids["cancelled"] not in finished
    # the CPU-only job held no GPU: no GPU-hours, not a finished GPU job
    assert "gres/gpu" not in rows[c.ids["cpu_done"]][5] and c.ids["cpu_done"] not in finished
    gpu_done = finished[c.ids["gpu_done"]]
    r = rows[c.ids["gpu_done"]]
    assert (gpu_done["user"], gpu_done["account"], gpu_done["state"], gpu_done["exit_code"]) == \
        (r[1], r[2], r[3], r[4]) == ("ftdave", "bio", "FAILED", "3:0")
    gpus = int(r[5].split("gres/gpu=")[1].split(",")[0])
    assert gpu_done["devices"] == gpus == 1
    assert gpu_done["gpu_hours"] == pytest.approx(gpus * int(r[6]) / 3600, abs=1e-3)
    # sreport's job report (from the job records) gives the same GPU-seconds per account
    out = c.run("sreport", "-n", "-P", "-t", "seconds", "--tres=gres/gpu", "job",
                "SizesByAccount", "FlatView", "start=now-1days", "end=now+1days",
                "grouping=1000").stdout
    by_account = {line.split("|")[1]: int(line.split("|")[2]) for line in out.splitlines()
                  if line.count("|") >= 3}
    assert by_account["bio"] == gpu_done["devices"] * gpu_done["runtime_s"]
    # physics: alice's finished CPU-only job adds 0; bob's running array what it has run so far
    # (read a few seconds apart, 4 GPUs)
    (bob,) = [row for row in doc["chargeback"] if row["account"] == "physics"]
    assert bob["user"] == "ftbob" and bob["jobs"] == 2
    assert bob["gpu_hours"] * 3600 == pytest.approx(by_account["physics"], abs=4 * 5)


def test_user_and_account_filters_are_applied_by_the_tool(cluster):
    c = cluster
    raw = json.loads(c.run("sacct", "--json", "--user", "ftdave").stdout)
    others = {j["user"] for j in raw["jobs"]} - {"ftdave"}
    doc = _doc(c, "--user", "ftdave")
    truth = {r[0] for r in _sacct(c, "--user", "ftdave", fmt="JobID|User")}
    assert {f["job"] for f in doc["finished"]} <= truth
    assert all(f["user"] == "ftdave" for f in doc["finished"])
    assert {p["job"] for p in doc["pending"]} == {c.ids["held"], c.ids["dep"]}
    assert doc["jobs"] == [] and {row["user"] for row in doc["chargeback"]} <= {"ftdave"}
    if others:  # Slurm 22.05: sacct --json --user does not filter; the tool must
        assert not others & {f["user"] for f in doc["finished"]}
    doc = _doc(c, "--account", "physics")
    assert {j["job"] for j in doc["jobs"]} == {f"{c.ids['array']}_0", f"{c.ids['array']}_1"}
    assert doc["pending"] == [] and all(f["account"] == "physics" for f in doc["finished"])


def test_report_by_array_id_and_raw_id(cluster):
    c = cluster
    task = f"{c.ids['array']}_0"
    raw = c.run("squeue", "-h", "-j", task, "-o", "%A").stdout.strip()
    by_task = _tool(c, "--devices", str(c.devices), "report", task)
    assert by_task.returncode == 0, by_task.stderr
    assert by_task.stdout.startswith(f"Job {task}  user ftbob")
    by_raw = _tool(c, "--devices", str(c.devices), "report", raw)
    assert by_raw.returncode == 0 and by_raw.stdout == by_task.stdout
