"""Session-wide checks.

The fleet tests drive a real Prometheus server and the end-to-end tests drive the real app in tmux;
on a developer machine without those programs they are skipped with a message. In CI (``CI`` set)
a skip would hide a missing install step in ``.ci/run``, so the run stops instead.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRED_IN_CI = ("prometheus", "tmux", "slurmctld", "slurmd", "munged")


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
