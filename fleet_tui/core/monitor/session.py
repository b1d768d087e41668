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

from fleet_tui.core.monitor.recorder import RAW_RETENTION_S, ROLLUP_RETENTION_S, ROLLUP_S, Recorder

# Bytes one device-sample takes on disk in the recorder's schema (row with its primary diagnosis,
# two indexes, WAL checkpointed): 219 B measured over 96,000 sim:64 samples; 240 leaves margin.
SESSION_PREFIX = "fleet-tui-session-"
SESSION_CAP_BYTES = 64 * 1024 * 1024
SAMPLE_BYTES = 240
_PID_FILE = "pid"
_STARTED_FILE = "started"  # the process's start time (/proc), against pid reuse


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
    """A new session folder holding this process's pid and, where /proc gives it, its start
    time, so a later run can tell a crashed run's folder (pid gone, or taken by another process
    since) from a running one's."""
    path = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=parent))
    pid = os.getpid()
    started = _proc_stat(pid)
    if started is not None:
        (path / _STARTED_FILE).write_text(f"{started[1]}\n", encoding="ascii")
    (path / _PID_FILE).write_text(f"{pid}\n", encoding="ascii")
    return path


def remove_session_dir(path: str | Path | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of ``pid`` from /proc/<pid>/stat, or None
    where it cannot be read (no such process, or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # fields 3 (state) and 22 (starttime) of proc(5)


def process_running(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` is a running process: not gone, not a zombie (ended, its parent has not
    reaped it yet: a run killed under a shell that waits, or reparented to an init that reaps
    late), and, given ``started`` (its /proc start time when it made its folder), not another
    process that has been given the same pid since."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    except OSError:
        return False
    stat = _proc_stat(pid)
    if stat is None:  # reaped meanwhile; or no /proc here, and then kill's answer stands
        return not Path("/proc/self/stat").exists()
    state, start = stat
    if state in ("Z", "X"):
        return False
    return started is None or start == started


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
            pid = int((path / _PID_FILE).read_text(encoding="ascii").strip())
            try:
                started = (path / _STARTED_FILE).read_text(encoding="ascii").strip() or None
            except FileNotFoundError:  # a folder made where /proc was not readable
                started = None
            stale = not process_running(pid, started)
        except FileNotFoundError:
            stale = time.time() - info.st_mtime > STALE_WITHOUT_PID_S
        except (OSError, ValueError):
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
