"""A newcomer's first five minutes, in a real terminal (tmux) with the installed ``fleet-tui``:

* run without a terminal (stdin from /dev/null, as a script or cron would), it exits 2 at once
  with a line naming the headless commands, instead of spinning;
* ``monitor --once`` on a machine without a device exits 2;
* GPU names as nvidia-smi, the Monitor and the catalogs write them resolve to one device;
* at 80×24, ``?`` shows the Monitor's own keys (↑↓ and Enter included) on its first screen, and
  the footer keeps ``? Help`` and ``q Quit``, also once a replay has ended.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.test_tmux import tmux  # noqa: F401 - the fixture

pytestmark = [pytest.mark.tmux,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

FLEET_TUI = Path(sys.executable).with_name("fleet-tui")  # the console script pip installed


def _shell(tmux, tmp_path, command: str, size=(80, 24)) -> None:  # noqa: F811
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "TMPDIR": str(tmp_path)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", str(size[0]), "-y", str(size[1]),
             f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} {command}; "
             "sleep 60")
    tmux.run("resize-window", "-t", tmux.name, "-x", str(size[0]), "-y", str(size[1]))


def _has_device() -> bool:
    import subprocess

    run = subprocess.run([str(FLEET_TUI), "monitor", "--once", "--json"], capture_output=True,
                         text=True, timeout=120)
    return run.returncode == 0


def test_without_a_terminal_it_exits_2_at_once(tmux, tmp_path):  # noqa: F811
    # stdout is the tmux terminal, stdin is not: a script's or cron's situation. A spinning app
    # would never print the exit line (the wait below is bounded, and is no speed measurement).
    _shell(tmux, tmp_path, f"{shlex.quote(str(FLEET_TUI))} < /dev/null; echo FLEET_EXIT=$?")
    screen = tmux.wait_for("FLEET_EXIT=", timeout=30)
    assert "FLEET_EXIT=2" in screen, screen
    assert "needs a terminal" in screen and "fleet-tui monitor --once" in screen


def test_monitor_once_without_a_device_exits_2(tmux, tmp_path):  # noqa: F811
    if _has_device():
        pytest.skip("this machine has an accelerator")
    _shell(tmux, tmp_path, f"{shlex.quote(str(FLEET_TUI))} monitor --once; echo FLEET_EXIT=$?",
           size=(200, 40))
    screen = tmux.wait_for("FLEET_EXIT=", timeout=120)
    assert "FLEET_EXIT=2" in screen and "no accelerator found" in screen, screen
    assert "--source sim:8" in screen


@pytest.mark.parametrize("spelling", ["NVIDIA H100 80GB HBM3", "H100 80GB", "h100_sxm"])
def test_gpu_names_as_people_copy_them(tmp_path, spelling):
    import subprocess

    run = subprocess.run([str(FLEET_TUI), "size", "--model", "llama-3.1-8b", "--gpu", spelling,
                          "--json"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["accelerator"] == "H100"


def test_help_and_footer_at_80x24(tmux, tmp_path):  # noqa: F811
    _shell(tmux, tmp_path, f"{shlex.quote(str(FLEET_TUI))} --source replay:demo@100 --interval 0.25;"
           " echo FLEET_EXIT=$?")
    tmux.wait_for("REPLAY", timeout=60)
    tmux.keys("?")
    screen = tmux.wait_for("fleet-tui keys", "Monitor (this pane)")
    for key, what in (("↑ ↓", "choose a device"), ("enter", "the device's card"),
                      ("p", "Pause/resume"), ("q", "Quit")):
        assert any(key in line and what in line for line in screen.splitlines()), (key, screen)
    assert "Everywhere" in screen
    tmux.escape(gone="fleet-tui keys")
    screen = tmux.wait_for("ENDED", timeout=120)  # the replay at 100× ends in a few seconds
    footer = screen.rstrip("\n").splitlines()[-1]
    assert "? Help" in footer and "q Quit" in footer, footer
    tmux.keys("q")
    assert "FLEET_EXIT=0" in tmux.wait_for("FLEET_EXIT=")
