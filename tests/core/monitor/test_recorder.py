"""SQLite recorder: one transaction per tick, rollups, retention, and SIGKILL safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet_tui.core.monitor.recorder import Recorder, read_rows
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from tests.paths import REPO

REPO = REPO


def _snap(t: float, util: float = 50.0) -> Snapshot:
    devs = tuple(DeviceSnapshot(index=i, name="G", uuid=f"U{i}", timestamp=t, gpu_util_pct=util + i,
                                mem_used_bytes=1000 + i, mem_total_bytes=4000)
                 for i in range(2))
    return Snapshot(timestamp=t, source="sim:2", source_kind="simulated", devices=devs)


def test_write_read_and_wal(tmp_path):
    db = tmp_path / "h.db"
    with Recorder(db) as rec:
        for t in range(5):
            assert rec.write(_snap(1000.0 + t), {"/U0": "idle"}) == 2
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT count(*) FROM samples WHERE primary_kind='idle'").fetchone()[0] == 5
    conn.close()
    rows, devices = read_rows(db)
    assert len(rows) == 10 and set(devices) == {"/U0", "/U1"}
    assert rows[0].get("gpu_util_pct") == 50.0


def test_downsampling_to_minute_means_and_retention(tmp_path):
    db = tmp_path / "h.db"
    rec = Recorder(db, raw_retention_s=3600, rollup_retention_s=86400, maintain_every_s=1e9)
    base = 1_000_000 * 60.0  # minute aligned
    for k in range(180):  # 3 minutes at 1 Hz, util = minute index * 10
        rec.write(_snap(base + k, util=10.0 * (k // 60)))
    folded, dropped = rec.maintain(now=base + 3600 + 120)  # first 2 minutes are past raw retention
    assert folded == 240 and dropped == 0
    rows, _ = read_rows(db)
    rollups = [r for r in rows if r.weight > 1]
    assert sorted((r.ts - base, r.device_key, r.weight, r.get("gpu_util_pct")) for r in rollups) == [
        (0.0, "/U0", 60, 0.0), (0.0, "/U1", 60, 1.0), (60.0, "/U0", 60, 10.0), (60.0, "/U1", 60, 11.0)]
    assert sum(1 for r in rows if r.weight == 1) == 120  # the third minute is still raw
    # rollups expire after their own retention
    folded, dropped = rec.maintain(now=base + 86400 + 3600 + 200)
    assert dropped >= 4
    rec.close()
    rows, _ = read_rows(db)
    assert all(r.ts >= base + 120 for r in rows)


def test_maintenance_runs_by_itself(tmp_path):
    rec = Recorder(tmp_path / "h.db", raw_retention_s=60, maintain_every_s=30)
    for k in range(400):
        rec.write(_snap(6000.0 + k))
    rec.close()
    rows, _ = read_rows(tmp_path / "h.db")
    assert any(r.weight > 1 for r in rows)
    assert min(r.ts for r in rows if r.weight == 1) >= 6000 + 399 - 60 - 60 - 30


def _count_ticks(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(DISTINCT ts) FROM samples").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.timeout(120)
def test_sigkill_loses_at_most_the_last_interval_and_never_corrupts(tmp_path):
    db = tmp_path / "kill.db"
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    printed = 0
    runs = 4
    for run in range(runs):
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet_tui", "record", "--source", "sim:2", "--interval", "0.05",
             "--db", str(db), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, env=env, text=True)
        try:
            seen = 0
            deadline = time.monotonic() + 30
            while seen < 5 + run * 3 and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                seen += 1
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            rest = proc.stdout.read()
            seen += sum(1 for line in rest.splitlines() if line.strip())
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        assert seen >= 5, "the recorder never committed a tick"
        printed += seen
        ticks = _count_ticks(db)
        # every tick reported as committed is there; at most the one in flight is extra
        assert printed <= ticks <= printed + run + 1
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
        assert rows == 2 * _count_ticks(db)  # both devices of every tick: no half-written tick
    finally:
        conn.close()


@pytest.mark.parametrize("value, stored", [
    (512.5, 512.5), (7, 7.0), (None, None), (float("nan"), None), (float("inf"), None),
    (True, None), ("12", 12.0), ("n/a", None), (10**400, None)])
def test_a_reading_is_stored_as_a_number_or_null_whatever_its_type(tmp_path, value, stored):
    """Plain numbers are written as they are and anything else through the per-value check:
    the database holds the same REAL or NULL either way (an int or a numeric text as a float; a bool, other text, NaN,
    an infinity or an int beyond a float's range as NULL, never an error)."""
    plain = DeviceSnapshot(index=0, name="G", uuid="U0", timestamp=1000.0, gpu_util_pct=40.0,
                           power_w=value)
    db = tmp_path / "h.db"
    with Recorder(db) as rec:
        assert rec.write(Snapshot(timestamp=1000.0, source="t", source_kind="simulated",
                                  devices=(plain,))) == 1
    conn = sqlite3.connect(db)
    power, util = conn.execute("SELECT power_w, gpu_util_pct FROM samples").fetchone()
    conn.close()
    assert (power, util) == (stored, 40.0)
    assert power is None or type(power) is float
