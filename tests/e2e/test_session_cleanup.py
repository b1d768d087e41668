"""The app's temporary session history: removed when the terminal closes (SIGHUP) or
the app is killed (SIGTERM) as on ``q``, and a crashed run's folder is cleaned at the next start.
Real ``fleet-tui`` in tmux, with TMPDIR pointing into the test's folder."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.bench_app import process_exited
from tests.e2e.test_tmux import ROOT, tmux  # noqa: F401 - the fixture

pytestmark = [pytest.mark.tmux]


def _start(tmux, tmp_path: Path, source: str = "sim:2") -> Path:  # noqa: F811
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} "
               f"{shlex.quote(sys.executable)} -m fleet_tui --source {source}; echo FLEET_EXIT=$?; sleep 30")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "100", "-y", "30", command)
    return tmpdir


def _wait(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _sessions(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob("fleet-tui-session-*"))


def _db_written(tmpdir: Path) -> bool:
    return any((d / "session.db").exists() for d in _sessions(tmpdir))


def test_closed_terminal_removes_the_session(tmux, tmp_path):  # noqa: F811
    tmpdir = _start(tmux, tmp_path)
    _wait(lambda: _db_written(tmpdir), "the session history")
    pid = int((_sessions(tmpdir)[0] / "pid").read_text())
    tmux.run("kill-pane", "-t", tmux.name)  # the terminal goes away: SIGHUP
    _wait(lambda: not _sessions(tmpdir), "the session folder removed after SIGHUP")
    _wait(lambda: process_exited(pid), "the app's process to end after SIGHUP")


def test_sigterm_removes_the_session(tmux, tmp_path):  # noqa: F811
    tmpdir = _start(tmux, tmp_path)
    _wait(lambda: _db_written(tmpdir), "the session history")
    pid = int((_sessions(tmpdir)[0] / "pid").read_text())
    os.kill(pid, signal.SIGTERM)
    _wait(lambda: not _sessions(tmpdir), "the session folder removed after SIGTERM")


def test_stale_session_of_a_crashed_run_is_cleaned(tmux, tmp_path):  # noqa: F811
    tmpdir = tmp_path / "tmp"
    stale = tmpdir / "fleet-tui-session-crashed"
    stale.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is gone now
    (stale / "pid").write_text(f"{dead.pid}\n")
    (stale / "session.db").write_bytes(b"x" * 1000)
    _start(tmux, tmp_path)
    _wait(lambda: not stale.exists(), "the crashed run's folder removed")
    _wait(lambda: _db_written(tmpdir), "this run's own session")
    tmux.keys("q")
    _wait(lambda: not _sessions(tmpdir), "this run's folder removed on q")
