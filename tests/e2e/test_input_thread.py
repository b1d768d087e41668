"""The terminal driver's input thread sleeps while no key comes (``ui.textual_fixes``), and the
app still reads keys, a lone escape included, and quits at once.

The real app runs in tmux under a launcher that only counts the ``select`` calls each thread
makes (the standard library's ``SelectSelector.select``, which Textual's input thread waits in)
and writes the counts to a file at two moments; everything else is the app's own code path.
"""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import time

import pytest

from tests.e2e import test_tmux
from tests.e2e.test_tmux import ROOT, Tmux

pytestmark = test_tmux.pytestmark  # tmux, skipped where tmux is not installed

LAUNCHER = textwrap.dedent("""
    import json, selectors, sys, threading, time
    calls = {}
    select = selectors.SelectSelector.select
    def counting(self, timeout=None):
        name = threading.current_thread().name
        calls[name] = calls.get(name, 0) + 1
        return select(self, timeout)
    selectors.SelectSelector.select = counting
    def report(path):
        for moment in ("early", "late"):
            time.sleep(3.0 if moment == "early" else 5.0)
            with open(f"{path}.{moment}", "w") as f:
                json.dump(calls, f)
    threading.Thread(target=report, args=(sys.argv[1],), daemon=True).start()
    from fleet_tui.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.fixture
def tmux(tmp_path):
    session = Tmux(tmp_path)
    yield session
    session.run("kill-server")


def _counts(path, moment: str, timeout: float = 30.0) -> dict:
    target = path.with_name(f"{path.name}.{moment}")
    deadline = time.monotonic() + timeout
    while not target.exists():
        assert time.monotonic() < deadline, f"the launcher never wrote {target}"
        time.sleep(0.2)
    time.sleep(0.1)  # written in one call; let it land
    return json.loads(target.read_text())


def test_input_thread_sleeps_while_idle_and_keys_still_work(tmux, tmp_path):
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    counts = tmp_path / "counts"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(ROOT)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} "
               f"{shlex.quote(sys.executable)} {shlex.quote(str(launcher))} "
               f"{shlex.quote(str(counts))} --source sim:2 --interval 1; "
               f"echo FLEET_EXIT=$?; sleep 60")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", "120", "-y", "40", command)
    tmux.wait_for("SIMULATED", "2 devices")
    early, late = _counts(counts, "early"), _counts(counts, "late")
    woken = late.get("textual-input", 0) - early.get("textual-input", 0)
    assert early.get("textual-input", 0) >= 1  # it does wait in select
    assert woken <= 2, (early, late)  # Textual's own loop: ~50 in these 5 s (0.1 s timeout)

    tmux.keys("?")
    tmux.wait_for("fleet-tui keys")
    tmux.escape(gone="fleet-tui keys")  # a lone escape: released by the parser's own deadline
    started = time.monotonic()
    tmux.keys("q")
    screen = tmux.wait_for("FLEET_EXIT=")
    assert "FLEET_EXIT=0" in screen and "Traceback" not in screen
    assert time.monotonic() - started < 10  # the stop wakes the thread: no wait on a timeout
