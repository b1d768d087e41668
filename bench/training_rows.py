"""The training-speed validation rows (tests/fixtures/validation/training_speed.toml) as workloads,
fabrics and predictions; shared by bench/bench_training.py and tests/core/sizing/test_training_scale.py.

Each row becomes the workload its source describes (layout, precision, checkpointing, framework
preset) and the fabric it ran on (the row's network per node, or one node / one TPU slice); the
prediction is :func:`fleet_tui.core.perf.estimate_throughput`, the one the CLI prints. A row whose
layout is not stated (``layout_stated = false``) gets the layout :func:`auto_layout` searches.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any, NamedTuple

import tomllib

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.interconnects import Fabric, default_fabric
from fleet_tui.core.perf import estimate_throughput
from fleet_tui.core.sizing.layout import auto_layout
from fleet_tui.core.workload import Workload, parse_workload

FILE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "validation" / "training_speed.toml"
#: llm-foundry is PyTorch FSDP under Composer (flash attention, fused kernels): torchtitan's preset.
FRAMEWORK_OF = {"llm-foundry": "torchtitan"}
_FIELDS = ("model", "params", "seq_len", "gpus", "batch", "micro_batch", "tp", "pp", "cp", "vpp", "zero",
           "precision", "master_weights", "grad_checkpointing", "selective_checkpointing", "compile",
           "sequence_parallel", "offload")


class Result(NamedTuple):
    id: str
    split: str
    metric: str
    measured: float
    predicted: float | None
    gpus: int
    accelerator: str
    fabric: str
    layout: str

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured - 1


def rows() -> list[dict[str, Any]]:
    return tomllib.loads(FILE.read_text())["run"]


def workload(row: dict[str, Any], catalog) -> Workload:
    d = {k: row[k] for k in _FIELDS if k in row}
    d["workload"] = row.get("kind", "training")
    d["framework"] = FRAMEWORK_OF.get(row["framework"], row["framework"])
    if d.get("zero") == 3 and "tp" not in d:
        d["sharding"] = "fsdp"
    if not row.get("layout_stated", True):
        for k in ("tp", "pp", "zero", "micro_batch"):
            d.pop(k, None)
    return parse_workload(d, catalog)


def fabric(row: dict[str, Any], acc) -> Fabric:
    base = default_fabric(acc.id, acc.software_stack)
    if row.get("slice_chips"):
        return dataclasses.replace(base, node_devices=int(row["slice_chips"]))
    if not row.get("network_gbps"):
        return dataclasses.replace(base, node_devices=max(base.node_devices, int(row["gpus"])))
    return dataclasses.replace(base, inter_link=row["network"], inter_gbps=float(row["network_gbps"]),
                               inter_known=True, inter_source="the row's network")


def predict(row: dict[str, Any], catalog) -> Result:
    acc = catalog.accelerator(row["accelerator"])
    w = workload(row, catalog)
    fab = fabric(row, acc)
    if not row.get("layout_stated", True):
        w = auto_layout(w, acc, w.gpus, fab)
    thr = estimate_throughput(w, acc, w.gpus, fab)
    value: float | None
    if row["metric"] == "mfu":
        value = thr.mfu
    else:
        value = thr.tokens_per_s / w.gpus if thr.tokens_per_s else None
    from fleet_tui.core.footprint import parallel_layout

    return Result(row["id"], row["split"], row["metric"], float(row["value"]), value, w.gpus, acc.id,
                  row.get("network", ""), parallel_layout(w, w.gpus).label())


def results() -> list[Result]:
    catalog = load_catalog([])
    return [predict(r, catalog) for r in rows()]


def summary(rs: list[Result]) -> tuple[int, float | None, float | None, float | None]:
    """(rows, median |error|, share within 25 %, max |error|) of the rows that got a number."""
    errs = [abs(r.error) for r in rs if r.error is not None]
    if not errs:
        return len(rs), None, None, None
    return len(rs), statistics.median(errs), sum(e <= 0.25 for e in errs) / len(errs), max(errs)
