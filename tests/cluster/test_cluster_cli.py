"""The jobs, queue and plan commands as a user runs them: JSON contracts, exit codes, no tracebacks."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from fleet_tui.core.cluster.joblists import swf_line


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hand_swf(tmp_path):
    p = tmp_path / "hand.swf"
    p.write_text("; the hand-computed case of test_queue.py\n" + "\n".join([
        swf_line(1, 0, 10, 2, 10, 1), swf_line(2, 1, 5, 4, 5, 2), swf_line(3, 2, 3, 2, 3, 1),
        swf_line(4, 3, 4, 1, 4, 3), swf_line(5, 4, 2, 2, 6, 2)]) + "\n")
    return p


def test_queue_simulate_json_contract(capsys, hand_swf):
    code, out, _ = run(capsys, "queue", "simulate", str(hand_swf), "--nodes", "1",
                       "--gpus-per-node", "4", "--policy", "fifo,backfill", "--json")
    assert code == 0
    doc = json.loads(out)
    fifo, bf = doc["policies"]["fifo"], doc["policies"]["backfill"]
    assert [(j["job"], j["start_s"], j["end_s"]) for j in fifo["jobs"]] == [
        ("1", 0, 10), ("2", 10, 15), ("3", 15, 18), ("4", 15, 19), ("5", 18, 20)]
    assert [(j["job"], j["start_s"], j["end_s"]) for j in bf["jobs"]] == [
        ("1", 0, 10), ("2", 10, 15), ("3", 2, 5), ("4", 5, 9), ("5", 15, 17)]
    assert (fifo["mean_wait_s"], fifo["p95_wait_s"], fifo["makespan_s"]) == (9.6, 14, 20)
    assert (bf["mean_wait_s"], bf["p95_wait_s"], bf["makespan_s"]) == (4.4, 11, 17)


def test_queue_errors_exit_2_with_file_and_line(capsys, hand_swf, tmp_path):
    code, out, _ = run(capsys, "queue", "simulate", str(hand_swf), "--nodes", "1",
                       "--gpus-per-node", "2", "--policy", "backfill")
    assert code == 0 and "1 jobs ask for more than 2 GPUs and could never start: skipped (e.g. 2)" \
        in out and "backfill scans the whole queue" in out
    code, out, _ = run(capsys, "queue", "simulate", str(hand_swf), "--nodes", "1",
                       "--gpus-per-node", "4", "--backfill-depth", "500", "--json")
    doc = json.loads(out)
    assert doc["backfill_depth"] == 500 and doc["policies"]["backfill"]["backfill_depth"] == 500
    with pytest.raises(SystemExit) as exc:
        run(capsys, "queue", "simulate", str(hand_swf), "--nodes", "1", "--gpus-per-node", "4",
            "--backfill-depth", "0")
    assert exc.value.code == 2 and "--backfill-depth: 0" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("job,user,submit_s,run_s,gpus\na,u,0,10,1\nb,u,x,1,1\n")
    code, _, err = run(capsys, "queue", "simulate", str(bad), "--nodes", "1", "--gpus-per-node", "2")
    assert code == 2 and f"{bad}:3:" in err and "Traceback" not in err
    code, _, err = run(capsys, "queue", "simulate", str(hand_swf), "--nodes", "1",
                       "--gpus-per-node", "4", "--policy", "lifo")
    assert code == 2 and "--policy 'lifo' is not a policy" in err


def test_jobs_from_device_records(capsys, tmp_path):
    devs = tmp_path / "devices.json"
    devs.write_text(json.dumps({"devices": [
        {"node": f"node-{n}", "index": i, "labels": {"hpc_job": "77", "user": "ana"},
         "util_pct": 0 if (n, i) == ("b", 1) else 80, "idle_fraction": 1 if (n, i) == ("b", 1) else 0,
         "observed_s": 1800, "usd_per_hour": 2.0, "primary": "idle" if (n, i) == ("b", 1) else "healthy_compute"}
        for n in "ab" for i in range(2)] + [
        {"node": "node-c", "index": 0, "util_pct": 0, "idle_fraction": 1, "observed_s": 1800,
         "usd_per_hour": 2.0, "primary": "idle"}]}))
    code, out, _ = run(capsys, "jobs", "--devices", str(devs), "--json")
    assert code == 0
    doc = json.loads(out)
    (job,) = doc["jobs"]
    assert (job["job"], job["user"], job["nodes"], job["devices"]) == ("77", "ana", ["node-a", "node-b"], 4)
    assert job["util_pct"] == 60.0 and job["idle_device_hours"] == 0.5 and job["usd_idle"] == 1.0
    assert doc["unattributed"]["devices"] == 1
    code, out, _ = run(capsys, "jobs", "report", "77", "--devices", str(devs))
    assert code == 0 and "Job 77" in out and "What to change" in out
    code, _, err = run(capsys, "jobs", "report", "78", "--devices", str(devs))
    assert code == 2 and "no job '78'" in err
    code, _, err = run(capsys, "jobs", "--json")
    assert code == 2 and "--source" in err


def test_jobs_on_a_simulated_source(capsys):
    code, out, _ = run(capsys, "jobs", "--source", "sim:3", "--window", "0", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["jobs"] == [] and doc["unattributed"]["devices"] == 3


def test_plan_json(capsys, tmp_path):
    demand = tmp_path / "day.txt"
    demand.write_text("\n".join(["2"] * 16 + ["6"] * 8) + "\n")
    code, out, _ = run(capsys, "plan", "--demand", str(demand), "--on-demand-price", "10",
                       "--reserved-3y-price", "4", "--reserved-1y-price", "6", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["plan"]["reserved_instances"] == 0 and "no commitment" in \
        doc["plan"]["no_commitment_reason"]
    code, out, _ = run(capsys, "plan", "--demand", str(demand), "--on-demand-price", "10",
                       "--reserved-3y-price", "4", "--min-history-days", "1")
    assert code == 0 and "plan: 2 × reserved-3y" in out and "next reservation" in out
    code, out, _ = run(capsys, "plan", "--demand", str(demand), "--on-demand-price", "10",
                       "--reserved-3y-price", "4", "--reserved-1y-price", "6")
    assert code == 0 and "no commitment is recommended below 7 days" in out
    code, _, err = run(capsys, "plan", "--demand", str(demand))
    assert code == 2 and "--instance" in err
    code, _, err = run(capsys, "plan", "--demand", str(demand), "--on-demand-price", "10",
                       "--spot-share", "3")
    assert code == 2 and "--spot-share must be 0-1" in err
