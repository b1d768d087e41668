"""Drive the real ``fleet-tui`` in a real terminal (tmux): switch panes, type, read the screen, quit.

Polls ``capture-pane`` (a real terminal has no "wait for workers" hook); every wait is bounded.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.tmux,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Tmux:
    def __init__(self, tmp_path: Path) -> None:
        self.name = f"fleet-tui-e2e-{uuid.uuid4().hex[:8]}"
        self.socket = str(tmp_path / "tmux.sock")

    def run(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-S", self.socket, "-f", os.devnull, *args], capture_output=True, text=True,
                              timeout=20)
        return proc.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.name, "-l", text)

    def escape(self) -> None:
        # Alone, then a pause longer than the terminal's escape delay: ESC followed at once by a
        # key reads as alt+key.
        self.keys("Escape")
        time.sleep(0.3)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; screen was:\n{screen}")


@pytest.fixture
def tmux(tmp_path):
    session = Tmux(tmp_path)
    yield session
    session.run("kill-server")


def test_real_terminal_session(tmux, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "PYTHONPATH": str(ROOT)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # -u COLUMNS/LINES: pytest's own values would override the real terminal size
    command = (f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} "
               f"{shlex.quote(sys.executable)} "
               f"-m fleet_tui --source sim:4 --interval 0.5; echo FLEET_EXIT=$?; sleep 60")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "120", "-y", "40", command)
    tmux.run("resize-window", "-t", tmux.name, "-x", "120", "-y", "40")  # no client attached

    # Monitor first (a source was given): four simulated cards, labelled as simulated.
    screen = tmux.wait_for("SIMULATED")
    tmux.wait_for("4 devices")
    assert "LIVE" not in tmux.screen()

    tmux.keys("1")
    screen = tmux.wait_for("refine filters")
    assert "$/GPU-h" in screen

    tmux.keys("2")
    tmux.wait_for("params (e.g. 7B)")
    time.sleep(0.5)  # let the pane take focus before tabbing through it
    tmux.keys("Tab")  # workload -> model preset
    time.sleep(0.2)
    tmux.keys("Tab")  # -> params
    time.sleep(0.2)
    tmux.type("70B")
    screen = tmux.wait_for("weights")
    assert "Memory per device" in screen and "70B" in screen

    tmux.escape()
    tmux.keys("4")
    tmux.wait_for("fitting offers")

    tmux.keys("?")
    tmux.wait_for("fleet-tui keys")
    tmux.escape()

    tmux.keys("q")
    screen = tmux.wait_for("FLEET_EXIT=")
    assert "FLEET_EXIT=0" in screen
    assert "Traceback" not in screen and "Error" not in screen
