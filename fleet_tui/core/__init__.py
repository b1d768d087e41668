"""The fleet-tui engine: pure Python + pydantic, no Textual or Rich.

One facade for the CLI, the app, the exporter and scripts::

    from fleet_tui.core import load_catalog, Workload, size_workload, recommend

    cat = load_catalog()
    w = Workload(kind="lora", model=cat.model("llama-3.1-70b"), batch=4, seq_len=2048)
    print(size_workload(w, cat.accelerator("L40S"), gpus=2).fit)
    print(recommend(w, cat, top=5).offers[0])

Names are imported lazily so ``import fleet_tui.core`` (done by every CLI command) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the checker sees each name's own type; at run time __getattr__ loads it
    from fleet_tui.core.catalog import Catalog, Instance, load_catalog
    from fleet_tui.core.catalog.query import parse_filter, query_instances
    from fleet_tui.core.errors import CatalogError, UserError
    from fleet_tui.core.fleet import FleetView, fleet_json
    from fleet_tui.core.modelconfig import load_model_config
    from fleet_tui.core.modelspec import ModelArch, param_count
    from fleet_tui.core.monitor.analysis import analyze_trace
    from fleet_tui.core.monitor.engine import MonitorEngine
    from fleet_tui.core.monitor.rightsize import rightsize
    from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
    from fleet_tui.core.monitor.sources import open_source
    from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
    from fleet_tui.core.monitor.trace import iter_trace
    from fleet_tui.core.perf import estimate_throughput, training_run
    from fleet_tui.core.pricing import Schedule
    from fleet_tui.core.ranking import recommend
    from fleet_tui.core.ranking.explanation import explain
    from fleet_tui.core.ranking.migration import migration_report
    from fleet_tui.core.scenarios import run_scenario, run_set
    from fleet_tui.core.sizing import check_fit, estimate_memory, kv_capacity
    from fleet_tui.core.sizing.overview import size_workload
    from fleet_tui.core.specs import Accelerator
    from fleet_tui.core.workload import Workload

_EXPORTS = {
    # catalog
    "load_catalog": "fleet_tui.core.catalog",
    "Catalog": "fleet_tui.core.catalog",
    "Instance": "fleet_tui.core.catalog",
    "query_instances": "fleet_tui.core.catalog.query",
    "parse_filter": "fleet_tui.core.catalog.query",
    "Accelerator": "fleet_tui.core.specs",
    "ModelArch": "fleet_tui.core.modelspec",
    "load_model_config": "fleet_tui.core.modelconfig",
    # sizing and speed
    "Workload": "fleet_tui.core.workload",
    "estimate_memory": "fleet_tui.core.sizing",
    "check_fit": "fleet_tui.core.sizing",
    "kv_capacity": "fleet_tui.core.sizing",
    "param_count": "fleet_tui.core.modelspec",
    "size_workload": "fleet_tui.core.sizing.overview",
    "estimate_throughput": "fleet_tui.core.perf",
    "training_run": "fleet_tui.core.perf",
    # pricing and recommendations
    "Schedule": "fleet_tui.core.pricing",
    "recommend": "fleet_tui.core.ranking",
    "explain": "fleet_tui.core.ranking.explanation",
    "migration_report": "fleet_tui.core.ranking.migration",
    "run_scenario": "fleet_tui.core.scenarios",
    "run_set": "fleet_tui.core.scenarios",
    # monitoring
    "open_source": "fleet_tui.core.monitor.sources",
    "iter_trace": "fleet_tui.core.monitor.trace",
    "MonitorEngine": "fleet_tui.core.monitor.engine",
    "Snapshot": "fleet_tui.core.monitor.snapshot",
    "DeviceSnapshot": "fleet_tui.core.monitor.snapshot",
    "analyze_trace": "fleet_tui.core.monitor.analysis",
    "rightsize": "fleet_tui.core.monitor.rightsize",
    # fleets
    "PrometheusSource": "fleet_tui.core.monitor.sources.prometheus",
    "FleetView": "fleet_tui.core.fleet",
    "fleet_json": "fleet_tui.core.fleet",
    # errors
    "UserError": "fleet_tui.core.errors",
    "CatalogError": "fleet_tui.core.errors",
}

# the names _EXPORTS maps, spelled out for the checker (tests/test_facade.py keeps them equal)
__all__ = [
    "Accelerator", "Catalog", "CatalogError", "DeviceSnapshot", "FleetView", "Instance",
    "ModelArch", "MonitorEngine", "PrometheusSource", "Schedule", "Snapshot", "UserError",
    "Workload", "analyze_trace", "check_fit", "estimate_memory", "estimate_throughput", "explain",
    "fleet_json", "iter_trace", "kv_capacity", "load_catalog", "load_model_config",
    "migration_report", "open_source", "param_count", "parse_filter", "query_instances",
    "recommend", "rightsize", "run_scenario", "run_set", "size_workload", "training_run",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fleet_tui.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
