"""Hourly device demand of a whole fleet from the Prometheus that scrapes it, for the portfolio plan.

One range query at a one-hour step: for every hour, the number of devices whose utilization reached
``busy_util_pct`` at some scrape in that hour (``max_over_time(...[1h])``), the same definition as
``portfolio.demand_from_rows`` uses for a ``record`` history. Devices are NVIDIA (dcgm-exporter
``DCGM_FI_DEV_GPU_UTIL``) and AMD (device-metrics-exporter ``gpu_gfx_activity``) GPUs, one series
each after ``max by`` their device labels. Hours before the first answer are left out; an hour with
no busy device inside the answered span counts as zero demand (Prometheus returns no sample for an
empty ``count``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.sources.prometheus.metrics import JOB_CARRIERS

HOUR_S = 3600.0
# labels naming one device (DCGM and AMD); other labels (job, pod, driver) must not split a GPU
_DEVICE_BY = "Hostname, hostname, instance, gpu, gpu_id, UUID, gpu_uuid, GPU_I_ID"
# a range query may return at most 11,000 points per series (Prometheus' limit)
MAX_HOURS = 11_000


def demand_query(busy_util_pct: float = 1.0) -> str:
    util = '{__name__=~"%s"}' % "|".join(JOB_CARRIERS)  # every GPU's utilization series
    return (f"count(max by ({_DEVICE_BY}) (max_over_time({util}[1h])) >= {busy_util_pct:g})")


def demand_from_matrix(matrix: Iterable[Mapping[str, Any]], start: float, end: float) -> list[float]:
    """A range answer of :func:`demand_query` at a one-hour step -> devices busy per hour."""
    by_step: dict[int, float] = {}
    for series in matrix:
        for pair in series.get("values") or []:
            try:
                ts, value = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                continue
            if math.isfinite(value):
                by_step[round((ts - start) / HOUR_S)] = value
    if not by_step:
        return []
    last = int((end - start) // HOUR_S)
    return [by_step.get(i, 0.0) for i in range(min(by_step), last + 1)]


def read_demand(source: Any, *, days: float, now: float, busy_util_pct: float = 1.0) -> list[float]:
    """Hourly demand over the last ``days`` from a Prometheus source (``query_range``)."""
    query_range = getattr(source, "query_range", None)
    if query_range is None:
        raise UserError("plan --source: only a prometheus:URL source has a history to plan from")
    hours = int(days * 24)
    if not 1 <= hours <= MAX_HOURS:
        raise UserError(f"--days {days:g}: must cover 1 hour to {MAX_HOURS // 24} days")
    # steps end at ``now``: each point counts the hour before it, the last one the hour up to now
    start = now - (hours - 1) * HOUR_S
    try:
        matrix = query_range(demand_query(busy_util_pct), start, now, HOUR_S)
    except Exception as exc:  # noqa: BLE001 - HTTP, timeouts and bad answers: one sentence
        raise UserError(f"--source {getattr(source, 'spec', source)}: demand not read ({exc})") from None
    return demand_from_matrix(matrix, start, now)
