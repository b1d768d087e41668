"""scripts/live_replay.py: a recorded trace through the live engine, tick by tick."""

from __future__ import annotations

import importlib.util

from tests.paths import REPO

ROOT = REPO


def _script():
    spec = importlib.util.spec_from_file_location("live_replay", ROOT / "scripts" / "live_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prints_each_change_of_the_primary_diagnosis_in_order(capsys):
    assert _script().main(["demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    kinds = [line.split()[-1] for line in lines[:-1]]
    # the bundled H200 trace starts idle and runs labelled phases in this order
    assert kinds[0] == "idle"
    order = ["healthy_compute", "memory_bandwidth_bound", "input_starved", "launch_bound",
             "host_transfer_bound"]
    assert [k for k in kinds if k in order][:len(order)] == order
    assert all(a != b for a, b in zip(kinds, kinds[1:]))  # only changes are printed
    seconds = [float(line.split()[0]) for line in lines]
    assert seconds == sorted(seconds) and "end of trace" in lines[-1]


def test_a_missing_trace_is_a_clear_error(capsys, tmp_path):
    assert _script().main([str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "none.jsonl" in err and "not found" in err
