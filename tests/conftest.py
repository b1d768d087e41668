"""Session-wide checks.

The fleet tests drive a real Prometheus server and the end-to-end tests drive the real app in tmux;
on a developer machine without those programs they are skipped with a message. In CI (``CI`` set)
a skip would hide a missing install step in ``.ci/run``, so the run stops instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

REQUIRED_IN_CI = ("prometheus", "tmux", "slurmctld", "slurmd", "munged")


_XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")
_BASE = pytest.StashKey[tuple]()  # (the session's XDG base dir, the variables' values before it)


def pytest_configure(config: pytest.Config) -> None:
    """Module- and session-scoped fixtures (a loaded catalog) run before the per-test fixture
    below, and a test module may define its own fixture of that name: the whole session gets
    throw-away XDG dirs too, so nothing a test does writes the developer's ``~/.cache/fleet-tui``
    (three modules once shadowed the fixture and left a compiled catalog there per test)."""
    base = tempfile.mkdtemp(prefix="fleet-tui-tests-")
    config.stash[_BASE] = (base, {var: os.environ.get(var) for var in _XDG})
    for var in _XDG:
        os.environ[var] = os.path.join(base, var.lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(_BASE, None)
    if saved is None:
        return
    base, before = saved
    for var, value in before.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    shutil.rmtree(base, ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not os.environ.get("CI"):
        return
    missing = [tool for tool in REQUIRED_IN_CI if shutil.which(tool) is None]
    if missing:
        raise pytest.UsageError(
            f"CI is set but {', '.join(missing)} is not installed: .ci/run must install it "
            "(apt-get install prometheus tmux slurm-wlm munge) so the fleet, end-to-end and Slurm "
            "tests run instead of skipping"
        )


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path_factory, monkeypatch):
    """Tests never read or write the developer's own ``~/.config/fleet-tui`` (user catalogs,
    themes, alert rules), ``~/.local/share/fleet-tui`` or ``~/.cache/fleet-tui`` (the compiled
    catalog): a personal catalog entry would change rankings under the tests' feet. Tests that
    exercise user data set these again themselves."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))


@pytest.fixture
def zombie():
    """A child process that has exited and is not reaped yet (the test is its parent): its pid
    exists in state Z. Reaped after the test. Needs Linux /proc."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    yield child
    child.wait()
