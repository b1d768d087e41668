"""Session-wide checks.

The fleet tests drive a real Prometheus server and the end-to-end tests drive the real app in tmux;
on a developer machine without those programs they are skipped with a message. In CI (``CI`` set)
a skip would hide a missing install step in ``.ci/run``, so the run stops instead.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRED_IN_CI = ("prometheus", "tmux")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not os.environ.get("CI"):
        return
    missing = [tool for tool in REQUIRED_IN_CI if shutil.which(tool) is None]
    if missing:
        raise pytest.UsageError(
            f"CI is set but {', '.join(missing)} is not installed: .ci/run must install it "
            "(apt-get install prometheus tmux) so the fleet and end-to-end tests run instead of skipping"
        )
