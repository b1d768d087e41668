"""Read a whole fleet from the Prometheus that already scrapes its exporters.

Instant queries (``/api/v1/query``) fetch every moving metric fleet-tui maps, from
NVIDIA's dcgm-exporter (``DCGM_FI_*``), Intel's Gaudi exporter (``habanalabs_*``) and AWS
neuron-monitor's Prometheus script (``neuroncore_utilization_ratio``), plus ``up`` for target
health and the sample timestamp of one metric per device for its age; ``max by`` keeps only the
labels that identify a GPU, which halves the answer. Between full reads a refresh asks only for
what changed: every GPU's sample time, then the metrics of the GPUs scraped since the last refresh
(``delta``; at 4,096 GPUs scraped every 15 s, ~1/7 of the series). A query once a minute reads what
rarely changes (limits, maxima, ECC counters, model names) and is cached per device. Range queries
(``/api/v1/query_range``) backfill history. Metric names, units and labels:
NVIDIA/dcgm-exporter ``etc/default-counters.csv`` and
``internal/pkg/rendermetrics/render_metrics.go`` (DCGM); docs.habana.ai
``Orchestration/Prometheus_Metric_Exporter`` (Gaudi); AWS Neuron's
``neuron-monitor-user-guide`` (Neuron); HTTP API:
prometheus.io/docs/prometheus/latest/querying/api. Cost for 1,024 GPUs: bench/bench_fleet.py.

Robustness, because the UI loop calls this every refresh:
- HTTP runs in a worker thread (``asyncio.to_thread``) with one deadline for all the requests of a
  refresh (or of a one-shot command), enforced to the last byte, so a slow, hung or trickling
  server never blocks the event loop or a command; credentials go only to the configured origin;
- ``sample()`` never raises: a down, slow or garbled Prometheus becomes ``Snapshot.errors``, the last
  good readings are kept with their age, and retries back off exponentially;
- DCGM's blank sentinels (int64 values near 9.2e18) and NaN become ``None``;
- a device whose series vanished (its exporter died: Prometheus writes staleness markers after a
  failed scrape) stays on screen as ``unavailable`` with the age of its last reading, until
  ``forget_after_s``.

The package: ``metrics`` (metric names -> fields, per exporter), ``queries`` (PromQL),
``client`` (HTTP), ``parse`` (answers -> per-device groups), ``fastparse`` (the hot path's
split-based parser), ``delta`` (what a changed-only refresh keeps), ``devices`` (groups ->
``DeviceSnapshot``), ``source`` (``PrometheusSource``: caching, staleness, back-off, backfill).
"""

from __future__ import annotations

from fleet_tui.core.monitor.sources.prometheus.client import PrometheusClient
from fleet_tui.core.monitor.sources.prometheus.devices import device_from_acc, devices_from_groups
from fleet_tui.core.monitor.sources.prometheus.fastparse import split_classified
from fleet_tui.core.monitor.sources.prometheus.metrics import (
                                                              DCGM_FIELDS,
                                                              DYNAMIC_NAMES,
                                                              HABANA_FIELDS,
                                                              PROBE_LABEL,
                                                              STATIC_NAMES,
)
from fleet_tui.core.monitor.sources.prometheus.parse import (
                                                              PrometheusResponseError,
                                                              classify_series,
                                                              decoded_rows,
                                                              group_classified,
                                                              group_series,
                                                              parse_envelope,
                                                              parse_value,
)
from fleet_tui.core.monitor.sources.prometheus.queries import build_query, build_static_query
from fleet_tui.core.monitor.sources.prometheus.source import PrometheusSource

__all__ = ["DCGM_FIELDS", "DYNAMIC_NAMES", "HABANA_FIELDS", "PROBE_LABEL", "STATIC_NAMES",
           "PrometheusClient", "PrometheusResponseError", "PrometheusSource", "build_query",
           "build_static_query", "classify_series", "decoded_rows", "device_from_acc",
           "devices_from_groups", "group_classified", "group_series", "parse_envelope",
           "parse_value", "split_classified"]
