"""Record monitor samples to SQLite (stdlib, WAL) with retention and downsampling.

* Each tick is one transaction: a crash (even SIGKILL) loses at most the tick being written, and
  WAL keeps the database consistent (``PRAGMA integrity_check`` = ok).
* ``synchronous=NORMAL`` in WAL mode: a committed tick survives a process crash; only a power loss
  can drop the last commits (never corrupts).
* Raw samples are kept for ``raw_retention_s`` (default 24 h); older ones are folded into one-minute
  means (``samples_1m``, with their sample count) kept for ``rollup_retention_s`` (default 30 d).
  Maintenance runs every ``maintain_every_s`` in its own transaction.
* A write that fails (a full disk, a file system gone read-only) is rolled back and raises
  ``RecordingStopped``, a user error that says which ticks are kept; nothing committed is lost.
* Readers open the file read-only, and immutable where SQLite cannot create the WAL's ``-shm`` file
  (a read-only file system): a history copied off a node can be read where it lies.
"""

from __future__ import annotations

import math
import operator
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.records import record

SCHEMA_VERSION = 1
RAW_RETENTION_S = 24 * 3600.0
ROLLUP_RETENTION_S = 30 * 86400.0
ROLLUP_S = 60.0
MAINTAIN_EVERY_S = 60.0

# (column, DeviceSnapshot attribute or derived name)
METRIC_COLUMNS = (
    "gpu_util_pct", "mem_util_pct", "mem_used_bytes", "mem_total_bytes", "temp_c", "power_w",
    "power_limit_w", "sm_clock_mhz", "sm_active_pct", "tensor_active_pct", "dram_active_pct",
    "pcie_rx_bytes_s", "pcie_tx_bytes_s",
)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS devices (
    device_key TEXT PRIMARY KEY, device_index INTEGER, name TEXT, uuid TEXT, node TEXT,
    source TEXT, first_ts REAL, last_ts REAL);
CREATE TABLE IF NOT EXISTS samples (
    ts REAL NOT NULL, device_key TEXT NOT NULL, primary_kind TEXT,
    {", ".join(f"{c} REAL" for c in METRIC_COLUMNS)});
CREATE INDEX IF NOT EXISTS samples_ts ON samples (ts);
CREATE INDEX IF NOT EXISTS samples_dev_ts ON samples (device_key, ts);
CREATE TABLE IF NOT EXISTS samples_1m (
    ts REAL NOT NULL, device_key TEXT NOT NULL, n INTEGER NOT NULL,
    {", ".join(f"{c} REAL" for c in METRIC_COLUMNS)},
    PRIMARY KEY (device_key, ts));
CREATE INDEX IF NOT EXISTS samples_1m_ts ON samples_1m (ts);
"""


@record
class RecordedRow:
    ts: float
    device_key: str
    weight: int  # 1 for a raw sample, n for a one-minute mean of n samples
    values: tuple[tuple[str, float | None], ...]

    def get(self, column: str) -> float | None:
        for k, v in self.values:
            if k == column:
                return v
        return None


class RecordingStopped(UserError):
    """Writing a tick failed (a full disk, a file system gone read-only): the tick was rolled back,
    every tick before it is committed, and the message says so."""


def _write_problem(exc: sqlite3.Error) -> str:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    text = str(exc).lower()
    if code == sqlite3.SQLITE_FULL or "disk is full" in text:
        return "the disk is full"
    if "readonly" in text or "read-only" in text:
        return "the database or its file system is read-only"
    return f"cannot write to it ({exc})"


def _readonly_uri(p: Path, *, immutable: bool) -> str:
    # quote the path: '?' or '#' in a file name would otherwise start the URI's query
    return f"file:{quote(str(p.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


def _open_readonly(p: Path, shown: str) -> sqlite3.Connection:
    """Open for reading without writing anything next to the file. A WAL database needs its -shm
    file, which a read-only file system (or directory) cannot create: then open it immutable, which
    is right because no writer can be appending to a file on a read-only file system."""
    last: sqlite3.Error | None = None
    for immutable in (False, True):
        conn = sqlite3.connect(_readonly_uri(p, immutable=immutable), uri=True, timeout=5.0,
                               check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:  # "unable to open", "readonly": try immutable
            conn.close()
            last = exc
        except sqlite3.DatabaseError as exc:  # "file is not a database": immutable will not help
            conn.close()
            raise UserError(f"--db {shown}: not a fleet-tui history database ({exc})") from None
    raise UserError(f"--db {shown}: cannot open the history database for reading ({last})")


def connect(path: str | Path, *, readonly: bool = False) -> sqlite3.Connection:
    p = Path(path).expanduser()
    if readonly:
        if not p.is_file():
            raise UserError(f"--db {str(path)!r}: no such history database (record one with "
                            f"'fleet-tui record --db PATH')")
        conn = _open_readonly(p, repr(str(path)))
    else:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(p), timeout=5.0, check_same_thread=False,
                                   isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"--db {str(path)!r}: cannot open the history database ({exc})") from None
    try:
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise UserError(f"--db {str(path)!r}: not a fleet-tui history database ({exc})") from None
    return conn


class Recorder:
    """Writes snapshots (and optionally each device's primary diagnosis) to SQLite."""

    def __init__(self, path: str | Path, *, raw_retention_s: float = RAW_RETENTION_S,
                 rollup_retention_s: float = ROLLUP_RETENTION_S,
                 maintain_every_s: float = MAINTAIN_EVERY_S):
        self.path = Path(path).expanduser()
        self.raw_retention_s = raw_retention_s
        self.rollup_retention_s = rollup_retention_s
        self.maintain_every_s = maintain_every_s
        self._lock = threading.Lock()
        existed = self.path.is_file() and self.path.stat().st_size > 0
        self._conn = connect(self.path)
        self._last_maintain: float | None = None
        if existed:
            self._refuse_corrupt(path)
        try:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                    self._conn.execute(stmt)
                self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                                   (str(SCHEMA_VERSION),))
                self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            self._rollback()
            self._conn.close()
            if isinstance(exc, sqlite3.OperationalError):  # full disk, read-only file system
                raise UserError(f"--db {str(path)!r}: {_write_problem(exc)}; nothing recorded") from None
            raise UserError(f"--db {str(path)!r}: not a fleet-tui history database ({exc})") from None
        self.ticks_written = 0
        self._pending: list[tuple[Snapshot, Mapping[str, str] | None]] = []
        self._pending_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._first_ts: float | None = None  # this run's first and last committed tick
        self._last_ts: float | None = None

    def _refuse_corrupt(self, path: str | Path) -> None:
        """``PRAGMA quick_check`` (every page and index entry, not the slower cross-checks of
        ``integrity_check``) before a run appends: rows added to a corrupt file could be lost
        with it, and the damage only grows. A corrupt history is a ``UserError``, nothing
        written."""
        try:
            found = [row[0] for row in self._conn.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
        if found != ["ok"]:
            self._conn.close()
            shown = " ".join("; ".join(found).split())[:300]
            raise UserError(f"--db {str(path)!r}: the history database is damaged (SQLite "
                            f"quick_check: {shown}); nothing appended. Keep it "
                            "aside (sqlite3 .recover may save its rows) and record to a new file")

    def set_retention(self, raw_retention_s: float, rollup_retention_s: float) -> None:
        """Change the retention (the app's session history follows the device count and
        interval); maintenance runs at least ten times per raw retention so the file stays near
        its cap."""
        self.raw_retention_s = raw_retention_s
        self.rollup_retention_s = rollup_retention_s
        self.maintain_every_s = min(MAINTAIN_EVERY_S, max(raw_retention_s / 10, 5.0))

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock: committed whole, or rolled back whole, a failed
        write (full disk, read-only file system) reported as :class:`RecordingStopped`."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                self._rollback()
                raise self._stopped(exc) from None
            except BaseException:
                self._rollback()
                raise

    def write(self, snapshot: Snapshot, primaries: Mapping[str, str] | None = None) -> int:
        """Write one tick in one transaction; returns the number of device rows written."""
        return self._write_ticks([(snapshot, primaries)])

    # The engine hands each tick to ``accept`` on its event loop (cheap, no I/O) and runs ``flush``
    # in a thread only when ``accept`` says so. This recorder commits every tick (a crash loses at
    # most the tick being written); the app's session history batches (session.py).
    def accept(self, snapshot: Snapshot, primaries: Mapping[str, str] | None = None) -> bool:
        """Take a tick to write; True when ``flush`` should run now."""
        with self._pending_lock:
            self._pending.append((snapshot, primaries))
        return True

    def flush(self) -> int:
        """Write the ticks taken since the last flush in one transaction; device rows written.
        Any thread may call it (a reader that wants the newest rows on disk)."""
        with self._flush_lock:  # one flush at a time: batches land in the order they were taken
            with self._pending_lock:  # held only to swap: accept() never waits on a write
                pending, self._pending = self._pending, []
            return self._write_ticks(pending) if pending else 0

    def _write_ticks(self, ticks: list[tuple[Snapshot, Mapping[str, str] | None]]) -> int:
        rows = []
        devices: dict[str, list] = {}  # key -> [device, source, first ts, last ts] in this batch
        for snapshot, primaries in ticks:
            for d in snapshot.devices:
                ts = d.timestamp or snapshot.timestamp
                rows.append((ts, d.key, (primaries or {}).get(d.key), *_metric_values(d)))
                seen = devices.get(d.key)
                if seen is None:
                    devices[d.key] = [d, snapshot.source, ts, ts]
                else:
                    seen[0], seen[1], seen[3] = d, snapshot.source, ts
        placeholders = ",".join("?" * (3 + len(METRIC_COLUMNS)))
        with self._transaction() as conn:
            if rows:
                conn.executemany(
                    f"INSERT INTO samples (ts, device_key, primary_kind, "
                    f"{', '.join(METRIC_COLUMNS)}) VALUES ({placeholders})", rows)
            conn.executemany(
                "INSERT INTO devices VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(device_key) DO "
                "UPDATE SET last_ts=excluded.last_ts, device_index=excluded.device_index,"
                " name=excluded.name",
                [(d.key, d.index, d.name, d.uuid, d.node, source, first, last)
                 for d, source, first, last in devices.values()])
        self.ticks_written += len(ticks)
        if self._first_ts is None:
            self._first_ts = ticks[0][0].timestamp
        self._last_ts = now = ticks[-1][0].timestamp
        if self._last_maintain is None:
            self._last_maintain = now
        elif now - self._last_maintain >= self.maintain_every_s:
            self.maintain(now)
        return len(rows)

    def maintain(self, now: float | None = None) -> tuple[int, int]:
        """Fold raw samples older than the raw retention into one-minute means; drop expired
        rollups. Returns (raw rows folded, rollup rows deleted)."""
        now = time.time() if now is None else now
        self._last_maintain = now
        cutoff = math.floor((now - self.raw_retention_s) / ROLLUP_S) * ROLLUP_S  # whole minutes
        means = ", ".join(f"avg({c})" for c in METRIC_COLUMNS)
        cols = ", ".join(METRIC_COLUMNS)
        with self._transaction() as conn:
            # merge with a rollup row of the same minute (samples arriving late) by weight
            cur = conn.execute(
                f"SELECT CAST(ts / {ROLLUP_S} AS INTEGER) * {ROLLUP_S} AS b, device_key, "
                f"count(*), {means} FROM samples WHERE ts < ? GROUP BY b, device_key",
                (cutoff,))
            folded = 0
            for b, key, n, *vals in cur.fetchall():
                old = conn.execute(
                    f"SELECT n, {cols} FROM samples_1m WHERE device_key=? AND ts=?",
                    (key, b)).fetchone()
                if old is not None:
                    on = old[0]
                    vals = [_wmean(ov, on, nv, n) for ov, nv in zip(old[1:], vals)]
                    n = n + on
                conn.execute(
                    f"INSERT OR REPLACE INTO samples_1m (ts, device_key, n, {cols}) "
                    f"VALUES ({','.join('?' * (3 + len(METRIC_COLUMNS)))})", (b, key, n, *vals))
                folded += n if old is None else n - old[0]
            conn.execute("DELETE FROM samples WHERE ts < ?", (cutoff,))
            dropped = conn.execute("DELETE FROM samples_1m WHERE ts < ?",
                                   (now - self.rollup_retention_s,)).rowcount
        return folded, dropped

    def _stopped(self, exc: sqlite3.OperationalError) -> RecordingStopped:
        """The plain account of a failed write: why, and exactly what is kept."""
        if self.ticks_written:
            span = " to ".join(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
                               for t in (self._first_ts, self._last_ts))
            kept = (f"kept: the {self.ticks_written} tick(s) this run recorded ({span}) and "
                    "everything recorded before")
        else:
            kept = "this run recorded nothing; what was recorded before is kept"
        problem = _write_problem(exc)
        again = "free some space and record" if problem == "the disk is full" else "record"
        return RecordingStopped(
            f"--db {str(self.path)!r}: {problem}, so recording stopped; {kept}. The write that "
            f"failed was rolled back and the database is consistent; {again} again to the same "
            "file to go on (it appends).")

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_METRICS = operator.attrgetter(*METRIC_COLUMNS)
_PLAIN_TYPES = frozenset((float, int, type(None)))


def _metric_values(d) -> tuple:
    """A device's METRIC_COLUMNS as stored: each through ``_num``, or, when they are all plain
    finite numbers or None (every reading of a working source), as they are: the columns are
    REAL, so SQLite stores an int as ``_num``'s float would be. Per value, ``_num`` cost ~4 us a
    device, a quarter of writing the row (64 devices: 0.27 of 0.95 ms a tick)."""
    values = _METRICS(d)
    if _PLAIN_TYPES.issuperset(map(type, values)):  # no bool, no str
        try:
            if math.isfinite(sum([v for v in values if v is not None])):  # no NaN or infinity
                return values
        except OverflowError:  # an int too large for a float: _num's answer
            pass
    return tuple(_num(v) for v in values)


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
        return None
    return f if math.isfinite(f) else None


def _wmean(a: float | None, na: int, b: float | None, nb: int) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return (a * na + b * nb) / (na + nb)


def read_rows(path: str | Path, *, since: float | None = None,
              columns: Iterable[str] = METRIC_COLUMNS) -> tuple[list[RecordedRow], dict[str, dict]]:
    """Raw samples and one-minute means since ``since`` (epoch s), plus device info by key."""
    cols = [c for c in columns if c in METRIC_COLUMNS]
    conn = connect(path, readonly=True)
    try:
        since = -math.inf if since is None else since
        rows: list[RecordedRow] = []
        sel = ", ".join(cols)
        try:
            for ts, key, *vals in conn.execute(
                    f"SELECT ts, device_key, {sel} FROM samples WHERE ts >= ? ORDER BY ts", (since,)):
                rows.append(RecordedRow(ts, key, 1, tuple(zip(cols, vals))))
            for ts, key, n, *vals in conn.execute(
                    f"SELECT ts, device_key, n, {sel} FROM samples_1m WHERE ts >= ? ORDER BY ts",
                    (since,)):
                rows.append(RecordedRow(ts, key, int(n), tuple(zip(cols, vals))))
            devices = {r[0]: {"device_key": r[0], "index": r[1], "name": r[2], "uuid": r[3],
                              "node": r[4], "source": r[5], "first_ts": r[6], "last_ts": r[7]}
                       for r in conn.execute("SELECT * FROM devices")}
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {str(path)!r}: not a fleet-tui history database ({exc})") from None
    finally:
        conn.close()
    rows.sort(key=lambda r: r.ts)
    return rows, devices

