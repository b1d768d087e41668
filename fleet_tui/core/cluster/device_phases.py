"""A device over its recorded history, for the jobs view: mean utilization and SM activity, peak
memory, idle share, and its diagnosis per window — the phases of the job that held it.

The diagnosis is the single-device analysis the monitor uses (``analyze_device_window``) run on
consecutive windows of ``window_s`` (default 5 minutes: long enough for the rules' minimum samples
at a 15-30 s scrape, short enough to separate a data-loading phase from training); equal neighbours
are merged. *Idle* per sample is the fleet view's fallback test (utilization and SM activity under
``IDLE_UTIL_MAX_PCT``), so an idle share needs no diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleet_tui.core.cluster.jobs import DeviceUsage
from fleet_tui.core.fleet import IDLE_UTIL_MAX_PCT
from fleet_tui.core.monitor.analysis import analyze_device_window
from fleet_tui.core.monitor.snapshot import DeviceSnapshot

DEFAULT_WINDOW_S = 300.0


def _idle(d: DeviceSnapshot) -> bool:
    return (d.gpu_util_pct is not None and d.gpu_util_pct < IDLE_UTIL_MAX_PCT
            and (d.sm_active_pct is None or d.sm_active_pct < IDLE_UTIL_MAX_PCT))


def phases_of(samples: Sequence[DeviceSnapshot], window_s: float = DEFAULT_WINDOW_S
              ) -> tuple[tuple[float, float, str], ...]:
    out: list[tuple[float, float, str]] = []
    i = 0
    while i < len(samples):
        start = samples[i].timestamp
        j = i
        while j < len(samples) and samples[j].timestamp < start + window_s:
            j += 1
        window = samples[i:j]
        end = samples[j].timestamp if j < len(samples) else window[-1].timestamp
        kind = analyze_device_window(window).primary
        if out and out[-1][2] == kind:
            out[-1] = (out[-1][0], end, kind)
        else:
            out.append((start, end, kind))
        i = j
    return tuple(out)


def usage_from_samples(samples: Sequence[DeviceSnapshot], *,
                       labels: Mapping[str, str] | None = None, usd_per_hour: float | None = None,
                       window_s: float = DEFAULT_WINDOW_S) -> DeviceUsage:
    """One device's history (oldest first, one device) as a :class:`DeviceUsage` with phases."""
    if not samples:
        raise ValueError("usage_from_samples needs at least one sample")
    first, last = samples[0], samples[-1]
    utils = [d.gpu_util_pct for d in samples if d.gpu_util_pct is not None]
    sms = [d.sm_active_pct for d in samples if d.sm_active_pct is not None]
    mems = [d.mem_used_bytes for d in samples if d.mem_used_bytes is not None]
    phases = phases_of(samples, window_s)
    span: dict[str, float] = {}
    for a, b, k in phases:
        span[k] = span.get(k, 0.0) + (b - a)
    primary = max(span, key=lambda k: (span[k], k)) if span else "unknown"
    return DeviceUsage(
        node=last.node, index=last.index, labels=tuple(sorted((labels or {}).items())),
        util_pct=sum(utils) / len(utils) if utils else None,
        sm_active_pct=sum(sms) / len(sms) if sms else None,
        mem_peak_bytes=max(mems) if mems else None, mem_total_bytes=last.mem_total_bytes,
        idle_fraction=sum(1 for d in samples if _idle(d)) / len(samples),
        observed_s=last.timestamp - first.timestamp, usd_per_hour=usd_per_hour,
        primary=primary, phases=phases)
