"""The recorder and history readers against real file-system trouble: a disk that fills up while
recording (a real, tiny tmpfs), a history database on a read-only file system, and a machine with no
device. Mounting needs root (CAP_SYS_ADMIN); elsewhere those tests skip and say why."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_tui.core.monitor.recorder import Recorder, read_rows
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from tests.paths import REPO

REPO = REPO


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {exc}")


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "512k")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False, capture_output=True, timeout=10)


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fleet_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _ticks(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute("SELECT count(DISTINCT ts) FROM samples").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("command", [
    ("record", "--db", "DB", "--source", "sim:8", "--interval", "0.01"),
    ("monitor", "--headless", "--json", "--record", "DB", "--source", "sim:8", "--interval", "0.25"),
], ids=["record", "monitor-record"])
def test_a_full_disk_stops_recording_with_a_plain_message_and_keeps_every_committed_tick(small_disk,
                                                                                        command):
    db = small_disk / "history.db"
    run = _cli(*(str(db) if a == "DB" else a for a in command), cwd=small_disk.parent, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    msg = run.stderr.strip().splitlines()[-1]
    assert "the disk is full, so recording stopped" in msg, msg
    kept = re.search(r"kept: the (\d+) tick\(s\) this run recorded", msg)
    assert kept, msg
    assert "database is consistent" in msg and "free some space" in msg and "it appends" in msg, msg
    # every tick the message counts is in the file, and the file is sound
    assert _ticks(db) == int(kept.group(1)) > 0


def _snap(t: float) -> Snapshot:
    devs = tuple(DeviceSnapshot(index=i, name="G", uuid=f"U{i}", timestamp=t, gpu_util_pct=40.0 + i,
                                mem_used_bytes=2**30, mem_total_bytes=80 * 2**30) for i in range(2))
    return Snapshot(timestamp=t, source="sim:2", source_kind="simulated", devices=devs)


_LEAVE_WAL = """
import os, sys
from fleet_tui.core.monitor.recorder import Recorder
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
rec = Recorder(sys.argv[1])
for t in range(20):
    devs = (DeviceSnapshot(index=0, name="G", uuid="U0", timestamp=1e9 + t, gpu_util_pct=50.0,
                           mem_used_bytes=2**30, mem_total_bytes=80 * 2**30),)
    rec.write(Snapshot(timestamp=1e9 + t, source="sim:1", source_kind="simulated", devices=devs))
os._exit(0)  # like a SIGKILL: the -wal and -shm files stay, the WAL is not checkpointed
"""


@pytest.mark.parametrize("closed", [True, False], ids=["closed-cleanly", "killed-wal-left"])
def test_a_wal_history_on_a_read_only_file_system_is_read(tmp_path, closed):
    ro = tmp_path / "ro"
    _mount_tmpfs(ro, "4m")
    try:
        db = ro / "history.db"
        if closed:
            with Recorder(db) as rec:
                for t in range(20):
                    rec.write(_snap(1e9 + t))
            expect_rows = 40
        else:
            subprocess.run([sys.executable, "-c", _LEAVE_WAL, str(db)], check=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
            assert (ro / "history.db-wal").exists()
            expect_rows = 20
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True, capture_output=True,
                       timeout=10)
        rows, devices = read_rows(db)
        assert len(rows) == expect_rows and devices
        run = _cli("rightsize", "--db", str(db), "--json", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert "not a fleet-tui history database" not in run.stderr
        assert sorted(os.listdir(ro)) == sorted(["history.db"] + ([] if closed else
                                                                   ["history.db-shm", "history.db-wal"]))
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False, capture_output=True, timeout=10)


def test_a_file_that_is_not_a_database_is_still_named_so(tmp_path):
    bad = tmp_path / "history.db"
    bad.write_bytes(b"not sqlite at all" * 100)
    run = _cli("rightsize", "--db", str(bad), cwd=tmp_path)
    assert run.returncode == 2 and "not a fleet-tui history database" in run.stderr, run.stderr


def test_record_with_no_device_says_so_and_exits_2_leaving_no_file(tmp_path):
    # a Prometheus port nothing listens on: a source with no device, on any machine
    run = _cli("record", "--db", "history.db", "--source", "prometheus:http://127.0.0.1:9",
               cwd=tmp_path, timeout=60)
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("fleet-tui: error: --source prometheus:http://127.0.0.1:9: "), last
    assert "Traceback" not in run.stderr and "recording nothing" not in run.stderr
    assert not list(tmp_path.iterdir())  # no empty database left behind
    # the same situation, the same words as `fleet`
    fleet = _cli("fleet", "--source", "prometheus:http://127.0.0.1:9", cwd=tmp_path, timeout=60)
    assert fleet.returncode == 2
    assert fleet.stderr.strip().splitlines()[-1].split(":")[:4] == last.split(":")[:4]
