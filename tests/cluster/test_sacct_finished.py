"""Finished jobs from ``sacct --json``: the parser on published output of two Slurm generations
(tests/cluster/data/README.md), and ``jobs --slurm`` listing them — or saying why not when
accounting is off (what the real single-node Slurm of tests/cluster/conftest.py prints)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet_tui.cli import main
from fleet_tui.core.cluster.slurm import finished_gpu_jobs, parse_jobs_json

DATA = Path(__file__).parent / "data"


def test_sacct_22_05_failed_multinode_gpu_job():
    (job,) = parse_jobs_json((DATA / "sacct_slurm_22_05_9.json").read_text(), "sacct --json")
    # task 100 of array 20247445: the array's own id is also the task's raw id
    assert (job.job, job.user, job.state, job.gpus) == ("20247445_100", "hudson", "FAILED", 16)
    assert job.ids == ("20247445_100", "20247445")
    assert job.nodes == ("ng30103", "ng30203", "ng30706", "ng30707")
    assert (job.submit_s, job.start_s, job.end_s) == (1692160813, 1693740641, 1693865044)
    assert job.time_limit_s == 2880 * 60 and job.partition == "gpubase_bynode_b4"
    (done,) = finished_gpu_jobs([job], now=1.8e9)
    assert done["runtime_s"] == 124403 and done["gpu_hours"] == pytest.approx(16 * 124403 / 3600, abs=1e-3)


def test_sacct_23_11_running_job_is_not_finished():
    (job,) = parse_jobs_json((DATA / "sacct_slurm_23_11_5.json").read_text(), "sacct --json")
    assert (job.job, job.user, job.state, job.gpus, job.nodes) == ("4", "masterkohga", "RUNNING", 2,
                                                                   ("mila02",))
    assert job.time_limit_s == 7200 * 60 and job.priority == 499522 and job.end_s is None
    assert finished_gpu_jobs([job], now=1.7e9) == []


def _fake_slurm(tmp_path, monkeypatch, sacct_body: str):
    for name, body in (("scontrol", 'echo \'{"jobs": []}\''), ("squeue", 'echo \'{"jobs": []}\''),
                       ("sacct", sacct_body)):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    devices = tmp_path / "devices.json"
    devices.write_text(json.dumps({"devices": [{"node": "ng30103", "index": 0, "util_pct": 0,
                                                "idle_fraction": 1, "primary": "idle"}]}))
    return devices


def test_jobs_slurm_lists_finished_jobs(tmp_path, monkeypatch, capsys):
    devices = _fake_slurm(tmp_path, monkeypatch, f"cat {DATA / 'sacct_slurm_22_05_9.json'}")
    assert main(["jobs", "--devices", str(devices), "--slurm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["job"] for f in doc["finished"]] == ["20247445_100"] and doc["finished_note"] is None
    assert doc["finished"][0]["devices"] == 16 and doc["finished"][0]["state"] == "FAILED"
    assert main(["jobs", "--devices", str(devices), "--slurm"]) == 0
    out = capsys.readouterr().out
    assert "finished since now-1days" in out and "20247445_100  hudson" in out


def test_jobs_slurm_without_accounting_says_so(tmp_path, monkeypatch, capsys):
    # what sacct prints with AccountingStorageType=accounting_storage/none (status 0, not JSON)
    devices = _fake_slurm(tmp_path, monkeypatch, 'echo "Slurm accounting storage is disabled"')
    assert main(["jobs", "--devices", str(devices), "--slurm", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["finished"] is None and "accounting storage is disabled" in doc["finished_note"]
    assert "finished jobs not listed" in captured.err


def test_jobs_summary_without_slurm_accounting_says_where_it_runs(tmp_path, monkeypatch, capsys):
    # what sacct prints on a machine with the Slurm client but no configuration (status 1)
    _fake_slurm(tmp_path, monkeypatch, 'echo "sacct: fatal: Could not establish a configuration source" >&2; exit 1')
    assert main(["jobs", "summary", "--since", "7d"]) == 2
    err = capsys.readouterr().err
    assert "jobs summary reads Slurm's job accounting" in err and "Could not establish" in err
    assert "Traceback" not in err and "Slurm head node" in err
