"""Bounded per-device history of snapshots, kept by the core so panes can come and go.

Each device has a ``deque(maxlen=N)`` where N covers ``seconds`` at the sampling interval, and
readings older than ``seconds`` before the newest are dropped (a device read less often than the
interval), so memory stays flat however long the monitor runs. Changing the interval re-sizes the
deques (keeping the newest samples). Series accessors return plain floats for graphs.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, Snapshot

DEFAULT_SECONDS = 600.0
MAX_POINTS_PER_DEVICE = 100_000  # hard cap whatever seconds/interval say
MAX_DEVICES = 4096  # a fleet view; devices unseen longest are dropped beyond this


def metric_value(d: DeviceSnapshot, metric: str) -> float | None:
    """A numeric metric of a device snapshot: a field, ``mem_used_pct``, or an ``extra`` key."""
    if metric == "mem_used_pct":
        frac = d.mem_used_frac
        return None if frac is None else frac * 100.0
    if metric == "power_pct":
        return None if not d.power_w or not d.power_limit_w else 100.0 * d.power_w / d.power_limit_w
    if metric == "pcie_bytes_s":
        if d.pcie_rx_bytes_s is None and d.pcie_tx_bytes_s is None:
            return None
        return (d.pcie_rx_bytes_s or 0.0) + (d.pcie_tx_bytes_s or 0.0)
    value: Any = getattr(d, metric, None)
    if value is None:
        for k, v in d.extra:
            if k == metric:
                return float(v)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class History:
    """Recent snapshots per device key (``DeviceSnapshot.key``) and of the host."""

    def __init__(self, seconds: float = DEFAULT_SECONDS, interval_s: float = 1.0):
        if seconds <= 0 or interval_s <= 0:
            raise ValueError("history seconds and interval must be positive")
        self.seconds = float(seconds)
        self.interval_s = float(interval_s)
        self._maxlen = self._points(self.seconds, self.interval_s)
        self._devices: dict[str, deque[DeviceSnapshot]] = {}
        self._host: deque[tuple[float, HostSnapshot]] = deque(maxlen=self._maxlen)
        self._last_seen: dict[str, float] = {}

    @staticmethod
    def _points(seconds: float, interval_s: float) -> int:
        return max(2, min(MAX_POINTS_PER_DEVICE, math.ceil(seconds / interval_s) + 1))

    @property
    def maxlen(self) -> int:
        return self._maxlen

    def set_interval(self, interval_s: float) -> None:
        """Re-size the deques so they still cover ``seconds`` at the new interval."""
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.interval_s = float(interval_s)
        new = self._points(self.seconds, self.interval_s)
        if new == self._maxlen:
            return
        self._maxlen = new
        self._devices = {k: deque(v, maxlen=new) for k, v in self._devices.items()}
        self._host = deque(self._host, maxlen=new)

    def add(self, snapshot: Snapshot, keys: list[str] | None = None) -> None:
        """``keys``: the devices' keys when the caller has them (saves recomputing them)."""
        for d, key in zip(snapshot.devices, keys or [d.key for d in snapshot.devices]):
            q = self._devices.get(key)
            if q is None:
                if len(self._devices) >= MAX_DEVICES:
                    oldest = min(self._last_seen, key=self._last_seen.__getitem__)
                    self._devices.pop(oldest, None)
                    self._last_seen.pop(oldest, None)
                q = self._devices[key] = deque(maxlen=self._maxlen)
            if d.timestamp == 0.0 and snapshot.timestamp:
                from dataclasses import replace

                d = replace(d, timestamp=snapshot.timestamp)
            q.append(d)
            # by time as well as by count: where readings come slower than the interval (a fleet
            # scraped every 15 s, refreshed every 2 s, keeps only new scrapes) the count alone held
            # 301 scrapes, 75 minutes, growing all that time
            cutoff = d.timestamp - self.seconds
            while q[0].timestamp < cutoff:
                q.popleft()
            self._last_seen[key] = snapshot.timestamp
        if snapshot.host is not None:
            self._host.append((snapshot.timestamp, snapshot.host))

    def clear(self) -> None:
        self._devices.clear()
        self._host.clear()
        self._last_seen.clear()

    # ---- reading ----
    def devices(self) -> list[str]:
        return list(self._devices)

    def __len__(self) -> int:
        return sum(len(q) for q in self._devices.values())

    def latest(self, key: str) -> DeviceSnapshot | None:
        q = self._devices.get(key)
        return q[-1] if q else None

    def count(self, key: str) -> int:
        """How many samples of one device are held."""
        q = self._devices.get(key)
        return len(q) if q is not None else 0

    def tail(self, key: str) -> tuple[DeviceSnapshot | None, int]:
        """(newest sample, how many are held) of one device."""
        q = self._devices.get(key)
        return (q[-1], len(q)) if q else (None, 0)

    def samples(self, key: str, seconds: float | None = None) -> list[DeviceSnapshot]:
        """Samples of one device, oldest first; only the last ``seconds`` if given."""
        q = self._devices.get(key)
        if not q:
            return []
        if seconds is None:
            return list(q)
        cutoff = q[-1].timestamp - seconds
        out: list[DeviceSnapshot] = []
        for d in reversed(q):
            if d.timestamp <= cutoff:
                break
            out.append(d)
        out.reverse()
        return out

    def iter_samples(self, key: str) -> Iterator[DeviceSnapshot]:
        return iter(self._devices.get(key, ()))

    def series(self, key: str, metric: str, seconds: float | None = None) -> list[float]:
        """Values of ``metric`` for one device, oldest first, N/A readings skipped (for graphs)."""
        out = []
        for d in self.samples(key, seconds):
            v = metric_value(d, metric)
            if v is not None:
                out.append(v)
        return out

    def timed_series(self, key: str, metric: str,
                     seconds: float | None = None) -> list[tuple[float, float]]:
        """(timestamp, value) pairs of ``metric``, N/A readings skipped."""
        out = []
        for d in self.samples(key, seconds):
            v = metric_value(d, metric)
            if v is not None:
                out.append((d.timestamp, v))
        return out

    def host_series(self, field: str, seconds: float | None = None) -> list[float]:
        if not self._host:
            return []
        cutoff = self._host[-1][0] - seconds if seconds is not None else -math.inf
        out = []
        for ts, h in self._host:
            v = getattr(h, field, None)
            if ts > cutoff and isinstance(v, (int, float)):
                out.append(float(v))
        return out
