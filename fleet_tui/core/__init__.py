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
from typing import Any

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fleet_tui.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
