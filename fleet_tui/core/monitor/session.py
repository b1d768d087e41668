"""The app's temporary session history: bounded by size, removed on exit, cleaned after a crash.

The app records what it monitors to a temporary SQLite database (the core's ``Recorder``) so the
Recommendations pane can right-size from what was observed. Unlike ``record --db`` (the user's own
file: 24 h of raw samples, 30 d of one-minute means), this one is bounded by size: half of
``SESSION_CAP_BYTES`` for raw samples and half for one-minute means, so the retention follows the
device count and interval (``session_retention``). Its folder holds the pid of the run that made it;
a later run removes folders whose process is gone (``clean_stale_sessions``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from fleet_tui.core.monitor.recorder import (RAW_RETENTION_S, ROLLUP_RETENTION_S, ROLLUP_S,
                                             Recorder)

# Bytes one device-sample takes on disk in the recorder's schema (row with its primary diagnosis,
# two indexes, WAL checkpointed): 219 B measured over 96,000 sim:64 samples; 240 leaves margin.
SESSION_PREFIX = "fleet-tui-session-"
SESSION_CAP_BYTES = 64 * 1024 * 1024
SAMPLE_BYTES = 240
_PID_FILE = "pid"


def session_retention(device_count: int, interval_s: float,
                      cap_bytes: int = SESSION_CAP_BYTES) -> tuple[float, float]:
    """(raw retention s, rollup retention s) that keep a session history of ``device_count``
    devices sampled every ``interval_s`` under ``cap_bytes``; never longer than the recorder's
    defaults (24 h raw, 30 d of one-minute means)."""
    devices = max(int(device_count), 1)
    interval = max(float(interval_s), SESSION_MIN_PERIOD_S)  # SessionRecorder writes no faster
    half = cap_bytes / 2
    raw_bytes_per_s = devices * SAMPLE_BYTES / interval
    rollup_bytes_per_s = devices * SAMPLE_BYTES / ROLLUP_S
    raw = min(RAW_RETENTION_S, half / raw_bytes_per_s)
    rollup = min(ROLLUP_RETENTION_S, half / rollup_bytes_per_s)
    return raw, max(rollup, raw)


# Right-sizing reads percentiles over minutes; one sample a second is plenty. Writing every 0.25 s
# tick cost 1.4 ms a tick at 64 devices (SQLite inserts), ~0.6 % of a core on its own.
SESSION_MIN_PERIOD_S = 1.0
# The samples of this many seconds go to SQLite in one transaction, from one worker thread hop: a
# hop and a commit per tick cost ~0.5-1 ms each (bench/bench_monitor_cpu.py). Nothing is lost that
# matters: the file is removed on exit, and right-sizing reads minutes.
SESSION_FLUSH_S = 5.0


class SessionRecorder(Recorder):
    """The app's session history: keeps at most one tick per ``SESSION_MIN_PERIOD_S`` and writes
    them ``SESSION_FLUSH_S`` at a time."""

    _last_taken: float | None = None

    def _take(self, snapshot, primaries) -> bool | None:
        """None: not taken (too soon after the last); else whether a flush is due."""
        now = snapshot.timestamp
        if self._last_taken is not None and 0 <= now - self._last_taken < SESSION_MIN_PERIOD_S:
            return None
        self._last_taken = now
        with self._pending_lock:
            self._pending.append((snapshot, primaries))
            first = self._pending[0][0].timestamp
        return not 0 <= now - first < SESSION_FLUSH_S

    def accept(self, snapshot, primaries=None) -> bool:
        return bool(self._take(snapshot, primaries))

    def write(self, snapshot, primaries=None) -> int:
        """Write now (what was taken before included), unless a tick was taken less than
        ``SESSION_MIN_PERIOD_S`` ago."""
        return 0 if self._take(snapshot, primaries) is None else self.flush()


def create_session_dir(parent: str | Path | None = None) -> Path:
    """A new session folder holding this process's pid, so a later run can tell a crashed
    run's folder (pid gone) from a running one's."""
    path = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=parent))
    (path / _PID_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
    return path


def remove_session_dir(path: str | Path | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OSError:
        return False
    return True


STALE_WITHOUT_PID_S = 24 * 3600.0  # a folder from before pid files: stale once a day old


def clean_stale_sessions(parent: str | Path | None = None) -> list[Path]:
    """Remove this user's session folders whose process is gone (a crashed or killed run);
    returns what was removed."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    removed = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        candidates = list(base.glob(f"{SESSION_PREFIX}*"))
    except OSError:
        return removed
    for path in candidates:
        try:
            info = path.stat()
        except OSError:
            continue
        if not path.is_dir() or (uid is not None and info.st_uid != uid):
            continue
        try:
            stale = not _pid_alive(int((path / _PID_FILE).read_text(encoding="ascii").strip()))
        except FileNotFoundError:
            stale = time.time() - info.st_mtime > STALE_WITHOUT_PID_S
        except (OSError, ValueError):
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
