"""The app's temporary session history is bounded by size."""

from __future__ import annotations

import os

import pytest

from fleet_tui.core.monitor.recorder import RAW_RETENTION_S, ROLLUP_RETENTION_S
from fleet_tui.core.monitor.session import (
    SAMPLE_BYTES,
    SESSION_CAP_BYTES,
    SESSION_MIN_PERIOD_S,
    clean_stale_sessions,
    create_session_dir,
    session_retention,
)
from tests.ui.conftest import wait_for


def test_retention_fits_the_cap():
    for devices, interval in ((1, 1.0), (8, 1.0), (8, 0.25), (64, 0.25), (4096, 1.0)):
        raw, rollup = session_retention(devices, interval)
        raw_bytes = devices * SAMPLE_BYTES * raw / max(interval, SESSION_MIN_PERIOD_S)
        rollup_bytes = devices * SAMPLE_BYTES * rollup / 60
        assert raw_bytes + rollup_bytes <= SESSION_CAP_BYTES * 1.01 or raw == RAW_RETENTION_S
        assert raw <= RAW_RETENTION_S and rollup <= ROLLUP_RETENTION_S and rollup >= raw
    assert session_retention(1, 1.0)[0] == RAW_RETENTION_S  # one device keeps the full day
    assert session_retention(64, 0.25)[0] < 3 * 3600  # 64 devices: hours, not a day, of raw samples


def test_stale_folders_go_live_ones_stay(tmp_path):
    live = create_session_dir(tmp_path)
    stale = tmp_path / "fleet-tui-session-old"
    stale.mkdir()
    (stale / "pid").write_text("999999999\n")
    other = tmp_path / "unrelated"
    other.mkdir()
    assert clean_stale_sessions(tmp_path) == [stale]
    assert live.exists() and other.exists() and (live / "pid").read_text().strip() == str(os.getpid())


async def test_app_session_retention_follows_devices_and_interval(make_app, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    app = make_app(source="sim:8", interval=0.25)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.monitor.recorder is not None
                       and app.monitor.latest is not None, "recording")
        await wait_for(pilot, lambda: app.monitor._retention_shape is not None, "retention set")
        assert app.monitor.recorder.raw_retention_s == session_retention(8, 0.25)[0]
        session = app.monitor.session_dir
        assert session and session.startswith(str(tmp_path))
    assert not os.path.exists(session)  # removed on exit


def test_session_recorder_writes_at_most_once_a_second(tmp_path):
    import dataclasses

    from fleet_tui.core.monitor.session import SessionRecorder
    from fleet_tui.core.monitor.snapshot import Snapshot

    recorder = SessionRecorder(tmp_path / "s.db")
    base = Snapshot(timestamp=1000.0, source="sim:0", source_kind="simulated")
    [recorder.write(dataclasses.replace(base, timestamp=1000.0 + 0.25 * i))
               for i in range(9)]
    recorder.close()
    assert recorder.ticks_written == 3  # t = 0, 1, 2 s


def test_session_recorder_batches_a_flush_every_few_seconds(tmp_path):
    """The engine hands every tick to ``accept`` on its loop; a thread hop and a commit happen
    only when a batch of ``SESSION_FLUSH_S`` is due, and the batch lands whole (devices' first
    and last seen from the batch's first and last tick)."""
    from fleet_tui.core.monitor.recorder import read_rows
    from fleet_tui.core.monitor.session import SESSION_FLUSH_S, SessionRecorder
    from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot

    recorder = SessionRecorder(tmp_path / "s.db")
    due = []
    for i in range(40):  # 10 s at 0.25 s
        ts = 1000.0 + 0.25 * i
        tick = Snapshot(timestamp=ts, source="sim:2", source_kind="simulated", devices=tuple(
            DeviceSnapshot(index=k, name="GPU", uuid=f"GPU-{k}", timestamp=ts, power_w=100.0 + i)
            for k in range(2)))
        if recorder.accept(tick):
            due.append(tick.timestamp)
            recorder.flush()
    assert due == [1000.0 + SESSION_FLUSH_S]  # one flush: ticks of 0..5 s, one a second
    rows, devices = read_rows(tmp_path / "s.db")
    assert len(rows) == 2 * 6 and len(devices) == 2
    assert recorder.ticks_written == 6
    assert recorder.flush() == 2 * 4  # 6..9 s were taken, not yet written
    rows, devices = read_rows(tmp_path / "s.db")
    recorder.close()
    assert len(rows) == 2 * 10
    assert {(d["first_ts"], d["last_ts"]) for d in devices.values()} == {(1000.0, 1009.0)}


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_a_crashed_runs_folder_is_stale_while_its_pid_is_a_zombie_or_taken(tmp_path, zombie):
    """A run killed under a parent that has not reaped it yet leaves a zombie with its pid; a
    pid can also be given to another process since. Both folders are stale; a live run's stays."""
    live = create_session_dir(tmp_path)
    assert (live / "started").read_text().strip()  # this run's start time, from /proc
    dead = tmp_path / "fleet-tui-session-zombie"
    dead.mkdir()
    (dead / "pid").write_text(f"{zombie.pid}\n")
    reused = tmp_path / "fleet-tui-session-reused"
    reused.mkdir()
    (reused / "pid").write_text(f"{os.getpid()}\n")  # a live pid ...
    (reused / "started").write_text("1\n")  # ... that another process had when it started
    assert sorted(clean_stale_sessions(tmp_path)) == sorted([dead, reused])
    assert live.exists()
