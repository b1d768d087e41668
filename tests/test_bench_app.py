"""bench/bench_app.py's check that an app it ran is gone: a zombie (exited, not yet reaped by its
parent) has ended; a running process has not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_app import process_exited

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_a_running_process_has_not_exited():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not process_exited(child.pid)
    finally:
        child.kill()
        child.wait()


def test_a_zombie_has_exited_and_so_has_a_reaped_pid(zombie):
    assert process_exited(zombie.pid)
    zombie.wait()
    assert process_exited(zombie.pid)
