"""Bounded per-device history."""

from __future__ import annotations

import pytest

from fleet_tui.core.monitor.history import History, metric_value
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, Snapshot


def _snap(t: float, n: int = 2) -> Snapshot:
    devs = tuple(DeviceSnapshot(index=i, name="G", uuid=f"U{i}", timestamp=t, gpu_util_pct=float(t % 100),
                                mem_used_bytes=int(t) * 10, mem_total_bytes=1000,
                                power_w=None if t % 2 else 100.0, power_limit_w=400.0,
                                extra=(("custom", 1.5),))
                 for i in range(n))
    return Snapshot(timestamp=t, source="t", source_kind="replay", devices=devs,
                    host=HostSnapshot(cpu_pct=float(t)))


def test_history_is_bounded_and_keeps_newest():
    h = History(seconds=10, interval_s=1)
    for t in range(1000):
        h.add(_snap(float(t)))
    assert h.devices() == ["/U0", "/U1"]
    s = h.samples("/U0")
    assert len(s) == h.maxlen == 11
    assert s[-1].timestamp == 999 and s[0].timestamp == 989
    assert len(h) == 22
    assert len(h.host_series("cpu_pct")) == 11


def test_a_device_read_less_often_than_the_interval_is_kept_for_the_seconds_only():
    # a fleet refreshed every 2 s whose nodes are scraped every 15 s: only new scrapes are added
    h = History(seconds=600, interval_s=2)
    assert h.maxlen == 301
    for k in range(300):  # 75 minutes of scrapes
        h.add(_snap(1000.0 + 15 * k, n=1))
    kept = h.samples("/U0")
    assert len(kept) == 41 and kept[-1].timestamp - kept[0].timestamp == 600  # not 301 = 75 min


def test_series_windows_skips_na_and_derives_metrics():
    h = History(seconds=60, interval_s=1)
    for t in range(20):
        h.add(_snap(float(t)))
    assert h.series("/U1", "gpu_util_pct", seconds=5) == [15.0, 16.0, 17.0, 18.0, 19.0]
    power = h.series("/U1", "power_w")
    assert power == [100.0] * 10  # odd ticks were N/A and are skipped
    assert h.series("/U0", "mem_used_pct")[-1] == pytest.approx(19.0)
    assert h.series("/U0", "custom")[-1] == 1.5
    assert h.timed_series("/U0", "gpu_util_pct", 2) == [(18.0, 18.0), (19.0, 19.0)]
    assert h.series("/nope", "gpu_util_pct") == []
    assert h.latest("/U0").timestamp == 19


def test_interval_change_resizes_and_keeps_recent():
    h = History(seconds=10, interval_s=1)
    for t in range(30):
        h.add(_snap(float(t)))
    h.set_interval(0.25)
    assert h.maxlen == 41
    assert [d.timestamp for d in h.samples("/U0")][-3:] == [27.0, 28.0, 29.0]
    h.set_interval(5)
    assert len(h.samples("/U0")) == h.maxlen == 3


def test_metric_value_ignores_non_numeric():
    d = DeviceSnapshot(index=0, name="x")
    assert metric_value(d, "name") is None and metric_value(d, "gpu_util_pct") is None
