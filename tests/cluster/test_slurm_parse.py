"""Slurm hostlists, GRES strings and both JSON generations, without a Slurm."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.cluster.slurm import (
    SlurmError,
    SlurmReader,
    expand_hostlist,
    parse_gres_detail,
    parse_jobs_json,
)


def test_hostlists():
    assert expand_hostlist("gpu[01-03,07]") == ("gpu01", "gpu02", "gpu03", "gpu07")
    assert expand_hostlist("gpu[8-10],login1") == ("gpu8", "gpu9", "gpu10", "login1")
    assert expand_hostlist("r[1-2]-n[1-2]") == ("r1-n1", "r1-n2", "r2-n1", "r2-n2")
    assert expand_hostlist("node007") == ("node007",)
    assert expand_hostlist("") == ()
    for bad in ("gpu[01-03", "gpu[a-b]", "gpu[5-3]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


def test_gres_detail():
    assert parse_gres_detail("gpu:4(IDX:0-3)") == (4, (0, 1, 2, 3))
    assert parse_gres_detail("gpu:a100:2(IDX:0,2)") == (2, (0, 2))
    assert parse_gres_detail("gpu:h100:3(IDX:0-1,5),nic:1") == (3, (0, 1, 5))
    assert parse_gres_detail("nic:1") == (0, ())


def test_v0038_and_v0040_shapes_read_the_same():
    old = {"jobs": [{"job_id": 12, "user_name": "ana", "job_state": "RUNNING",
                     "nodes": "gpu[01-02]", "gres_detail": ["gpu:8(IDX:0-7)", "gpu:2(IDX:6-7)"],
                     "submit_time": 1000, "start_time": 1010, "end_time": 4610, "time_limit": 60,
                     "priority": 5, "partition": "p", "name": "train"}]}
    new = {"jobs": [{"job_id": 12, "user_name": "ana", "job_state": ["RUNNING"],
                     "nodes": "gpu[01-02]", "gres_detail": ["gpu:8(IDX:0-7)", "gpu:2(IDX:6-7)"],
                     "submit_time": {"set": True, "infinite": False, "number": 1000},
                     "start_time": {"set": True, "infinite": False, "number": 1010},
                     "end_time": {"set": True, "infinite": False, "number": 4610},
                     "time_limit": {"set": True, "infinite": False, "number": 60},
                     "priority": {"set": True, "infinite": False, "number": 5},
                     "partition": "p", "name": "train"}]}
    a, b = (parse_jobs_json(json.dumps(d))[0] for d in (old, new))
    assert a == b
    assert a.nodes == ("gpu01", "gpu02") and a.gpus == 10
    assert a.gpu_indices == {"gpu01": tuple(range(8)), "gpu02": (6, 7)}
    assert a.time_limit_s == 3600 and a.runtime_s(now=2010) == 1000


def test_errors_are_user_errors(tmp_path):
    with pytest.raises(SlurmError, match="not JSON"):
        parse_jobs_json("squeue: error: x")
    with pytest.raises(SlurmError, match="not found on PATH"):
        SlurmReader(bindir=str(tmp_path)).squeue()
