"""Fit of the vLLM KV-pool constants on the TUNE rows of kv_capacity.toml only.

    .venv/bin/python bench/fit_kv.py

Grid search over two engine-level constants with physical meaning: the sampler's vocabulary-sized
buffers per profiled sequence (profile_run.SAMPLER_COPIES) and the memory each tensor-parallel rank
on an NVLink-class fabric keeps outside the pool beyond NCCL's buffers (the vLLM profile's
tp_reserve_bytes). Objective: mean capped |log error| of the tune rows, each public report weighing
the same (``report_of``); as bench/fit_serving.py, not a median (a median fit packs rows just
inside the median). Prints the best values, which are then written into
fleet_tui/core/perf/ by hand with this script named as their source. Holdout rows are never read.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation_rows as vr  # noqa: E402

from fleet_tui.core import calibration as cal  # noqa: E402
from fleet_tui.core.perf import engines, profile_run  # noqa: E402

TUNE = [r for r in vr.rows("kv_capacity.toml", "capacity") if r["split"] == "tune" and r["engine"] == "vllm"]
LOG_CAP = math.log(2.0)


def report_of(row: dict) -> str:
    """The public report a row comes from: a GitHub issue or PR, else the repository. One report's
    sweep (llm-d-planner's nine start-ups of two 8B models) is one experiment, not nine: each
    report weighs the same in the objective, so a sweep cannot outvote the other reports."""
    parts = row["source"].split("://", 1)[-1].split("/")
    if len(parts) > 4 and parts[3] in ("issues", "pull"):
        return "/".join(parts[1:5])
    return "/".join(parts[1:3])


def score() -> tuple[float, float]:
    res = [vr.predict_kv(r) for r in TUNE]
    by_report: dict[str, list[float]] = {}
    for r, x in zip(TUNE, res):
        log = min(LOG_CAP, abs(math.log(x.predicted / x.measured))) if x.predicted else LOG_CAP
        by_report.setdefault(report_of(r), []).append(log)
    return (statistics.fmean(statistics.fmean(v) for v in by_report.values()),
            statistics.median(abs(x.error) for x in res))


def main() -> None:
    base = engines.ENGINES["vllm"]
    best = None
    for copies in [c / 10 for c in range(20, 61, 2)]:
        profile_run.SAMPLER_COPIES = copies
        for reserve in [g / 10 for g in range(0, 61, 2)]:
            engines.ENGINES["vllm"] = dataclasses.replace(base, tp_reserve_bytes=int(reserve * cal.GiB))
            obj, med = score()
            if best is None or obj < best[0] - 1e-4:
                best = (obj, med, copies, reserve)
    engines.ENGINES["vllm"] = base
    obj, med, copies, reserve = best
    print(f"tune vLLM rows: {len(TUNE)}; best mean capped |log| {obj:.4f} (median |error| {med:.1%}) at "
          f"SAMPLER_COPIES {copies}, tp_reserve {reserve} GiB")


if __name__ == "__main__":
    main()
