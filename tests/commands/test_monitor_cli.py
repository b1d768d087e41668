"""CLI contract of monitor, analyze, record and rightsize (through fleet_tui.cli.main)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from fleet_tui.cli import main


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def test_analyze_demo_json_covers_the_trace(capsys):
    assert main(["analyze", "demo", "--window", "5", "--json"]) == 0
    windows = json.loads(capsys.readouterr().out)
    assert len(windows) >= 30
    for w in windows:
        assert {"start", "end", "phase", "device", "primary", "risks", "diagnoses"} <= set(w)
        assert w["end"] - w["start"] == pytest.approx(5.0)
        for d in w["diagnoses"]:
            assert {"kind", "confidence", "evidence", "action"} <= set(d)
            assert isinstance(d["evidence"], dict)
    assert windows[0]["phase"] == "idle" and windows[0]["primary"] == "idle"
    kinds = {w["primary"] for w in windows}
    assert {"healthy_compute", "memory_bandwidth_bound", "input_starved", "launch_bound",
            "host_transfer_bound", "memory_capacity_pressure", "idle"} <= kinds


def test_analyze_default_is_phases_that_tile_the_trace(capsys):
    assert main(["analyze", "demo", "--json"]) == 0
    phases = json.loads(capsys.readouterr().out)
    assert 8 <= len(phases) <= 60
    for a, b in zip(phases, phases[1:]):
        assert b["start"] == pytest.approx(a["end"])  # back to back, no gap, no overlap
    assert [p["primary"] for p in phases[:8]] == [
        "idle", "healthy_compute", "memory_bandwidth_bound", "input_starved", "launch_bound",
        "host_transfer_bound", "memory_capacity_pressure", "idle"]


def test_analyze_table_and_window_flag(capsys):
    assert main(["analyze", "demo", "--window", "10"]) == 0
    out = capsys.readouterr().out
    assert "primary" in out.splitlines()[0] and "host transfer bound" in out  # words, as the app
    assert "host_transfer_bound" not in out
    assert main(["analyze", "demo", "--window", "10", "--json"]) == 0
    w = json.loads(capsys.readouterr().out)
    assert "host_transfer_bound" in {x["primary"] for x in w}  # JSON keeps the kinds
    assert w[0]["end"] - w[0]["start"] == pytest.approx(10.0)


def test_analyze_user_errors(capsys, tmp_path):
    assert main(["analyze", str(tmp_path / "missing.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["analyze", "demo", "--window", "0"]) == 2
    assert "--window" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["analyze", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


def test_monitor_once_json_with_top_level_source(capsys):
    assert main(["--source", "sim:2", "monitor", "--once", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source_kind"] == "simulated" and len(out["devices"]) == 2
    for dev in out["devices"]:
        assert dev["diagnosis"]["primary"]
        assert "gpu_util_pct" in dev
    assert "cost" in out and "alerts" in out


def test_monitor_once_on_nvml_spans_an_interval_so_gpm_activity_is_filled(capsys, monkeypatch):
    import sys
    import threading
    import time

    from tests.fakes.fake_pynvml import FakeNvml

    fake = FakeNvml.h200(devices=1)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    done = threading.Event()

    def clock() -> None:  # the GPU's counters move on while the command waits
        while not done.wait(0.02):
            fake.advance()

    ticker = threading.Thread(target=clock, daemon=True)
    ticker.start()
    started = time.monotonic()
    try:
        assert main(["monitor", "--once", "--json", "--source", "nvml", "--interval", "0.25"]) == 0
    finally:
        done.set()
        ticker.join()
    took = time.monotonic() - started
    dev = json.loads(capsys.readouterr().out)["devices"][0]
    assert took >= 0.25  # one interval between the two GPM samples
    for field in ("sm_active_pct", "tensor_active_pct", "dram_active_pct"):
        assert isinstance(dev[field], float), field
    assert fake.count("nvmlGpmSampleGet") == 2 and fake.count("nvmlGpmMetricsGet") == 1


def test_monitor_headless_json_lines(capsys):
    assert main(["monitor", "--headless", "--source", "sim:3", "--interval", "0.25", "--count", "3",
                 "--json", "--instance", "p5.48xlarge"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    ticks = [json.loads(line) for line in lines]
    assert ticks[1]["timestamp"] > ticks[0]["timestamp"]
    assert ticks[-1]["cost"]["instance"] == "p5.48xlarge"
    assert ticks[-1]["cost"]["usd_so_far"] > 0
    assert all(len(t["devices"]) == 3 for t in ticks)


def test_monitor_alerts_as_json_lines(capsys, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "any-util"\nmetric = "gpu_util_pct"\nop = ">="\n'
                     'threshold = 0\nduration = 0\ncooldown = "1h"\nseverity = "info"\n')
    assert main(["monitor", "--alerts", "--source", "sim:2", "--interval", "0.25", "--count", "2",
                 "--rules", str(rules)]) == 0
    alerts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [a["rule"] for a in alerts] == ["any-util", "any-util"]  # one per device, deduplicated
    assert {a["device"] for a in alerts} == {0, 1}


def test_monitor_text_and_errors(capsys, tmp_path):
    assert main(["monitor", "--once", "--source", "sim:1"]) == 0
    out = capsys.readouterr().out
    assert "simulated" in out and "diagnosis" in out
    assert main(["monitor", "--once", "--source", "sim:1", "--interval", "0.1"]) == 2
    assert "0.25" in capsys.readouterr().err
    assert main(["monitor", "--once", "--source", "sim:1", "--instance", "p5.48xlarg"]) == 2
    assert "p5.48xlarge" in capsys.readouterr().err  # suggestion
    bad = tmp_path / "r.toml"
    bad.write_text('[[rule]]\nname = "x"\nmetric = "nope"\nthreshold = 1\n')
    assert main(["monitor", "--once", "--source", "sim:1", "--rules", str(bad)]) == 2
    assert f"{bad}:3" in capsys.readouterr().err


def test_monitor_once_without_accelerator_exits_2(capsys):
    rc = main(["monitor", "--once", "--json", "--source", "auto"])
    captured = capsys.readouterr()
    if rc == 0:  # this machine has an accelerator
        assert json.loads(captured.out)["devices"]
    else:  # the rest of the table: tests/test_exit_codes.py
        assert rc == 2 and "no accelerator found" in captured.err and not captured.out


def test_record_then_rightsize(capsys, tmp_path):
    db = tmp_path / "h.db"
    assert main(["record", "--source", "sim:2", "--interval", "0.05", "--duration", "0.6",
                 "--db", str(db), "--json"]) == 0
    ticks = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(ticks) >= 3
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 2 * len(ticks)
    conn.close()
    assert main(["rightsize", "--db", str(db), "--instance", "p5.48xlarge", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert len(rep["devices"]) == 2 and rep["current"]["instance"] == "p5.48xlarge"
    assert rep["devices"][0]["gpu_util_pct"]["p99"] is not None
    for c in rep["candidates"]:
        assert c["savings_usd_per_month"] > 0
    assert main(["rightsize", "--db", str(db)]) == 0
    assert "p99" in capsys.readouterr().out
    assert main(["rightsize", "--db", str(tmp_path / "nope.db")]) == 2
    assert main(["rightsize", "--db", str(db), "--since", "soon"]) == 2
    assert "--since" in capsys.readouterr().err
