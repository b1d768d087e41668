"""Without a terminal the app does not start: ``fleet-tui`` exits 2 at once with a line naming the
headless commands; and the terminal driver's input thread ends when its input does, instead of
waking on a descriptor that stays readable at end of file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from textual.drivers.linux_driver import LinuxDriver
from textual.events import Key

from fleet_tui.cli import main
from fleet_tui.core.errors import UserError
from fleet_tui.ui import textual_fixes
from fleet_tui.ui.launch import check_terminal

FLEET_TUI = Path(sys.executable).with_name("fleet-tui")


def test_no_terminal_exits_2_naming_the_headless_commands():
    run = subprocess.run([str(FLEET_TUI)], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "needs a terminal" in run.stderr and "fleet-tui monitor --once" in run.stderr
    assert "Traceback" not in run.stderr and not run.stdout


def test_flags_and_no_terminal_in_process(capsys):
    assert main(["--source", "sim:2"]) == 2  # pytest's stdin is no terminal
    assert "stdin" in capsys.readouterr().err


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("stdin", "stdout", "named"), [
    (False, True, "stdin is not"), (True, False, "stdout is not"),
    (False, False, "stdin and stdout are not")])
def test_check_terminal_names_what_is_missing(stdin, stdout, named):
    with pytest.raises(UserError, match=named):
        check_terminal(_Stream(stdin), _Stream(stdout))
    check_terminal(_Stream(True), _Stream(True))


class _Driver:
    """What ``run_input_thread`` uses of a driver: its input descriptor, exit event and sink."""

    def __init__(self, fileno: int) -> None:
        self.fileno = fileno
        self._debug = False
        self.exit_event = textual_fixes.WakingEvent()
        self.messages: list = []

    def process_message(self, message) -> None:
        self.messages.append(message)


def test_input_thread_reads_the_last_keys_then_stops_at_end_of_input():
    textual_fixes.install()
    read, write = os.pipe()
    driver = _Driver(read)
    thread = threading.Thread(target=LinuxDriver.run_input_thread, args=(driver,), daemon=True)
    try:
        thread.start()
        os.write(write, b"q")
        os.close(write)
        write = -1
        thread.join(timeout=30)
        assert not thread.is_alive(), "the input thread kept waiting after its input ended"
        assert [m.key for m in driver.messages if isinstance(m, Key)] == ["q"]
    finally:
        if thread.is_alive():
            driver.exit_event.set()
            thread.join(timeout=30)
        os.close(read)
        if write >= 0:
            os.close(write)
