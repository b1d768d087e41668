"""``fleet-tui jobs --slurm`` against a real multi-node Slurm with accounting (slurmdbd on a private
MariaDB; tests/cluster/slurm_accounting.py), four users in two accounts. What the tool shows is
checked against ``squeue``, ``sacct``, ``scontrol``, ``sinfo`` and ``sreport`` of the same cluster.
``sreport`` has only hours that have ended: the finished jobs are moved back two hours in the
accounting database (one of them onto an hour boundary) and the usage is rolled up, so it reports
them whole.

The cluster, set up once for the module (users ftalice, ftbob, ftcarol and ftdave, each with this
run's own suffix):

- a finished GPU job (ftdave, 1 GPU, burns one CPU for 2 s, exits 3), a finished CPU-only one
  (ftalice), ftbob's finished 2-GPU job that crosses an hour boundary and ftcarol's finished
  2-node × 1-GPU job;
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
import shutil
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
                                   "sleep 1", user="ftalice")
        _until(lambda: c.run("squeue", "-h", "-j", ids["gpu_done"], "-o", "%T").stdout.strip()
               == "RUNNING", "the GPU job to start")
        # waits for gn1's GPU that the burning job holds, and is cancelled before it gets it
        ids["cancelled"] = c.sbatch("--gres=gpu:4", "-w", "gn1", "-t", "2", "-J", "never",
                                    "--wrap", "true", user="ftcarol")
        c.run("scancel", ids["cancelled"])
        ids["train"] = c.sbatch("--gres=gpu:2", "-w", "gn2", "-t", "2", "-J", "train", "--wrap",
                                "sleep 2", user="ftbob")
        ids["wide"] = c.sbatch("-N", "2", "--gres=gpu:1", "-t", "2", "-J", "wide", "--wrap",
                               "sleep 1", user="ftcarol")
        done = {ids[k] for k in ("gpu_done", "cpu_done", "cancelled", "train", "wide")}
        _until(lambda: not done & set(c.run("squeue", "-h", "-o", "%i").stdout.split()),
               "the short jobs to end")
        _until(lambda: len(_sacct(c, "-a", "-j", ",".join(sorted(done)), fmt="JobID|End")) == 5
               and "Unknown" not in c.run("sacct", "-X", "-n", "-a", "-j", ",".join(done), "-o",
                                          "End").stdout, "accounting to record their ends")
        c.hours = _move_into_ended_hours(c, ids)  # type: ignore[attr-defined]
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


def _epoch(c, when: str) -> int:
    return int(c.run("date", "-d", when, "+%s").stdout)


def _move_into_ended_hours(c, ids: dict[str, str]) -> tuple[int, int, int]:
    """Move the finished jobs two hours back, and bob's ``train`` onto the boundary B between
    the two hours before this one (it starts 1 s before B), then roll the usage up: ``sreport``
    has whole ended hours of them. Returns ``(H0, B, H1)``: the first hour they touch, B, and
    the start of this hour."""
    now = time.time()
    h1 = int(now // 3600 * 3600)
    b = h1 - 3600
    (row,) = _sacct(c, "-j", ids["train"], fmt="Start")
    shifts = {ids[k]: 7200 for k in ("gpu_done", "cpu_done", "cancelled", "wide")}
    shifts[ids["train"]] = _epoch(c, row[0]) - (b - 1)
    c.move_jobs(shifts)
    starts = [_epoch(c, r[0]) for r in _sacct(c, "-a", "-j", ",".join(shifts), fmt="Start")
              if r[0] != "Unknown"]
    h0 = min(starts) // 3600 * 3600
    c.roll(_iso(h0), _iso(h1))
    return h0, b, h1


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


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
    assert c.users["ftalice"] not in {row["user"] for row in doc["chargeback"]}


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


def test_finished_jobs_match_sacct(cluster):
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
        (r[1], r[2], r[3], r[4]) == (c.users["ftdave"], "bio", "FAILED", "3:0")
    gpus = int(r[5].split("gres/gpu=")[1].split(",")[0])
    assert gpu_done["devices"] == gpus == 1
    assert gpu_done["gpu_hours"] == pytest.approx(gpus * int(r[6]) / 3600, abs=1e-3)
    (bob,) = [row for row in doc["chargeback"] if row["account"] == "physics"]
    assert bob["user"] == c.users["ftbob"]
    assert bob["jobs"] == 3  # the running array's two tasks and the finished train


def _sreport(c, start: int, end: int) -> dict[tuple[str, str], int]:
    """GPU-seconds per (user, account) (user "" for the account's own row) from ``sreport
    cluster AccountUtilizationByUser`` over ``[start, end)``."""
    out = c.run("sreport", "-t", "seconds", "--tres=gres/gpu", "-P", "-n", "cluster",
                "AccountUtilizationByUser", f"start={_iso(start)}", f"end={_iso(end)}",
                "format=Account,Login,Used").stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {(login, account): int(used) for account, login, used in rows}


def _summary(c, start: int, end: int) -> dict:
    out = _tool(c, "--json", "--since", _iso(start), "--until", _iso(end), "summary")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_summary_gpu_hours_match_sreport(cluster):
    """``jobs summary`` of a period gives per user and account the GPU-seconds ``sreport`` has
    for it: the two whole hours the finished jobs ran in, and each hour alone, with bob's job
    that crosses the hour between them split as sreport splits it."""
    c = cluster
    h0, b, h1 = c.hours
    sums = {}
    for start, end in ((h0, h1), (h0, b), (b, h1)):
        truth = _sreport(c, start, end)
        digest = _summary(c, start, end)
        shown = {(r["user"], r["account"]): r["gpu_hours"] * 3600
                 for r in digest["by_user_account"]}
        users = {k: v for k, v in truth.items() if k[0] and v}
        assert set(shown) == set(users), (start, end, truth, digest)
        for key, seconds in users.items():
            assert shown[key] == pytest.approx(seconds, abs=0.2), (start, end, key)
        for account in {a for _, a in shown}:  # the account's own row: its users' sum
            assert sum(v for (_, a), v in shown.items() if a == account) == pytest.approx(
                truth[("", account)], abs=0.4)
        assert digest["gpu_hours"] * 3600 == pytest.approx(truth[("", "root")], abs=0.5)
        sums[(start, end)] = truth
    bob = (c.users["ftbob"], "physics")
    # bob's train ran on both sides of B: each hour has its part, and the parts make the whole
    assert sums[(h0, b)][bob] > 0 and sums[(b, h1)][bob] > 0
    assert sums[(h0, b)][bob] + sums[(b, h1)][bob] == sums[(h0, h1)][bob]
    # alice's job used CPUs only: sreport charges her no GPU-second, the digest has no row
    alice = (c.users["ftalice"], "physics")
    assert sums[(h0, h1)].get(alice, 0) == 0
    cpu = c.run("sreport", "-t", "seconds", "--tres=cpu", "-P", "-n", "cluster",
                "AccountUtilizationByUser", f"start={_iso(h0)}", f"end={_iso(h1)}",
                "format=Account,Login,Used").stdout
    assert f"physics|{alice[0]}|" in cpu and f"physics|{alice[0]}|0" not in cpu
    # carol's job that never started costs nothing; her 2-node job is charged both nodes' GPUs
    (wide,) = _sacct(c, "-j", c.ids["wide"], fmt="AllocTRES|ElapsedRaw")
    carol = (c.users["ftcarol"], "bio")
    assert "gres/gpu=2" in wide[0]
    assert sums[(h0, h1)][carol] == 2 * int(wide[1])


def test_user_and_account_filters_are_applied_by_the_tool(cluster):
    c = cluster
    raw = json.loads(c.run("sacct", "--json", "--user", c.users["ftdave"]).stdout)
    others = {j["user"] for j in raw["jobs"]} - {c.users["ftdave"]}
    doc = _doc(c, "--user", c.users["ftdave"])
    truth = {r[0] for r in _sacct(c, "--user", c.users["ftdave"], fmt="JobID|User")}
    assert {f["job"] for f in doc["finished"]} <= truth
    assert all(f["user"] == c.users["ftdave"] for f in doc["finished"])
    assert {p["job"] for p in doc["pending"]} == {c.ids["held"], c.ids["dep"]}
    assert doc["jobs"] == [] and {row["user"] for row in doc["chargeback"]} <= {c.users["ftdave"]}
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
    assert by_task.stdout.startswith(f"Job {task}  user {c.users['ftbob']}")
    by_raw = _tool(c, "--devices", str(c.devices), "report", raw)
    assert by_raw.returncode == 0 and by_raw.stdout == by_task.stdout


def _backfilled_prometheus(where: Path, raw_job: str, start: int, end: int):
    """A real Prometheus whose history (written by ``promtool tsdb create-blocks-from
    openmetrics``) holds gn1's four GPUs over the finished job's life: GPU 0 busy and labelled
    with the job (as dcgm-exporter's HPC job mapping does), the others idle without a job. It
    holds nothing from the last two hours: the fleet reads as empty now, and a finished job's
    report needs only its history."""
    from tests.fleet.promserver import PROMETHEUS, PrometheusServer

    if PROMETHEUS is None or shutil.which("promtool") is None:
        missing_or_skip()  # fails under CI, skips elsewhere, for the cluster's programs
        pytest.skip("prometheus/promtool not installed")
    values = {"DCGM_FI_DEV_GPU_UTIL": (93, 0), "DCGM_FI_DEV_FB_USED": (30000, 0),
              "DCGM_FI_DEV_FB_FREE": (51000, 81000), "DCGM_FI_DEV_POWER_USAGE": (400, 60)}
    lines = []
    for name, (busy, idle) in values.items():
        lines.append(f"# TYPE {name} gauge")
        for gpu in range(4):
            job = f',hpc_job="{raw_job}"' if gpu == 0 else ""
            for t in range(start - 5, end + 6):
                inside = start <= t <= end
                lines.append(f'{name}{{Hostname="gn1",gpu="{gpu}",UUID="GPU-gn1-{gpu}",'
                             f'device="nvidia{gpu}"{job if inside else ""}}} '
                             f'{busy if gpu == 0 and inside else idle} {t}')
    lines.append("# EOF")
    (where / "history.om").write_text("\n".join(lines) + "\n")
    (where / "data").mkdir()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    str(where / "history.om"), str(where / "data")], check=True,
                   capture_output=True, timeout=60)
    return PrometheusServer([], workdir=str(where), retention="1d").start()  # hours-old jobs


def test_finished_job_report_from_sacct_and_prometheus_history(cluster, tmp_path):
    c = cluster
    jid = c.ids["gpu_done"]
    (row,) = _sacct(c, "-j", jid, fmt="JobIDRaw|Start|End|TotalCPU|AllocTRES|ElapsedRaw")
    start = int(c.run("date", "-d", row[1], "+%s").stdout)
    end = int(c.run("date", "-d", row[2], "+%s").stdout)
    prom = _backfilled_prometheus(tmp_path, row[0], start, end)
    try:
        out = _tool(c, "--source", f"prometheus:{prom.url}", "--json", "report", jid)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        text = _tool(c, "--source", f"prometheus:{prom.url}", "report", jid).stdout
        summary = _tool(c, "--source", f"prometheus:{prom.url}", "--node-price", "8", "--json",
                        "--since", "1d", "summary")
        assert summary.returncode == 0, summary.stderr
        digest = json.loads(summary.stdout)
        summary_text = _tool(c, "--since", "1d", "summary").stdout
    finally:
        prom.stop()
    # GPUs: the labelled GPU over the job's life, not gn1's idle others
    assert doc["job"] == jid and doc["devices"] == 1 and doc["util_pct"] == 93.0
    assert [d["index"] for d in doc["device_list"]] == [0]
    assert doc["history"]["power_w"] == 400 and doc["history"]["samples"] >= 2
    assert doc["mem_peak_bytes"] == 30000 * 2**20
    # CPU and host memory from sacct: TotalCPU over elapsed × CPUs
    eff = doc["efficiency"]
    # the job's TotalCPU as seff reads it: the job line without -X, which sums its steps (with -X
    # it is the allocation's own, 0 for a batch job)
    out = c.run("sacct", "-P", "-n", "-j", jid, "--format=JobIDRaw,TotalCPU").stdout
    cpu = {line.split("|")[0]: line.split("|")[1] for line in out.splitlines() if "|" in line}
    row = [row[0], row[1], row[2], cpu[jid], *row[4:]]
    h, m, sec = (["0", "0"] + row[3].replace(".", ":").split(":")[:-1])[-3:]
    total_cpu = int(h) * 3600 + int(m) * 60 + int(sec)
    assert int(eff["total_cpu_s"]) == total_cpu
    cpus = int(row[4].split("cpu=")[1].split(",")[0])
    assert eff["cpu_efficiency_pct"] == pytest.approx(
        100 * eff["total_cpu_s"] / (cpus * int(row[5])), rel=0.01)
    assert eff["total_cpu_s"] > 0  # it burned a CPU (as much as 2 cores shared allow)
    assert doc["slurm"]["exit_code"] == "3:0" and doc["slurm"]["state"] == "FAILED"
    assert text.startswith(f"Job {jid}  user {c.users['ftdave']}") and "CPU efficiency" in text
    assert "over its life from Prometheus" in text

    # the digest: per user/account GPU-hours as sacct's AllocTRES × Elapsed, idle hours from the
    # history (the finished job's GPU was busy: 0 idle), dollars at the node's price per GPU
    rows = _sacct(c, "-a", "-S", "now-1days", fmt="JobID|User|Account|AllocTRES|ElapsedRaw|NodeList")
    truth: dict = {}
    for r in rows:
        if "gres/gpu=" in r[3] and r[5] != "None assigned":
            g = int(r[3].split("gres/gpu=")[1].split(",")[0])
            truth[(r[1], r[2])] = truth.get((r[1], r[2]), 0.0) + g * int(r[4]) / 3600
    shown = {(x["user"], x["account"]): x for x in digest["by_user_account"]}
    dave_bio = (c.users["ftdave"], "bio")
    carol_bio = (c.users["ftcarol"], "bio")
    assert set(shown) == set(truth) == {dave_bio, carol_bio, (c.users["ftbob"], "physics")}
    for finished in (dave_bio, carol_bio):
        assert shown[finished]["gpu_hours"] == pytest.approx(truth[finished], abs=2e-4)
    dave = next(w for w in digest["worst_jobs"] if w["job"] == jid)
    assert dave["idle_gpu_hours"] == 0 and dave["util_pct"] == 93.0
    assert digest["usd_per_gpu_hour"] == 2.0  # $8 per 4-GPU node
    assert c.users["ftdave"] in summary_text and "worst jobs:" in summary_text
    assert "idle hours need --source prometheus:URL" in summary_text
