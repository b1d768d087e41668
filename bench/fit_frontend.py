"""Fit the API-server constants of the scheduler simulation (``core.perf.sim_plan.FRONTEND``) for
SGLang and TensorRT-LLM: a serial time per request and a latency on its first token, by grid search
on the *tune* rows the simulation replays (bench/bench_serving_latency.py), minimising the median
|error| of that engine's tune rows (latency and throughput); a larger value wins only by
``MIN_GAIN``. Holdout rows are never read. Prints the grid's best.

vLLM's front end is not fitted: its per-request and per-output-token costs come from published
single-API-server ceilings (``sim_plan.FRONTEND``'s comment); this prints the error of every vLLM
row (tune and holdout) under that pair, under the pair this grid would fit, and under none.

Run: ``.venv/bin/python bench/fit_frontend.py``
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_serving_latency import replay
from validation_rows import rows, superseded

from fleet_tui.core.perf import sim_plan

SERIAL_MS = (0, 5, 10, 15, 20, 25, 30, 40)
LATENCY_MS = (0, 10, 20, 30, 40, 50, 60)
#: a larger value must gain this much over a smaller one (the median moves by single rows: a flat
#: objective otherwise drifts to the grid's edge)
MIN_GAIN = 0.01
FILES = ("serving_latency.toml", "serving.toml", "serving_bursts.toml")
SCENARIOS = ("burst_all_at_once", "online_max_concurrency", "online_server")


def tune_rows(engine: str) -> list[tuple[str, dict]]:
    return [(name, r) for name in FILES for r in rows(name, "measurement")
            if r["split"] == "tune" and r["engine"] == engine and r["scenario"] in SCENARIOS and not superseded(r)]


def objective(engine: str, sel: list[tuple[str, dict]]) -> float:
    errs = [abs(x.error) for x in (replay(name, r) for name, r in sel) if x.error is not None]
    return statistics.median(errs) if errs else float("inf")


def all_rows(engine: str, split: str) -> list[tuple[str, dict]]:
    return [(name, r) for name in FILES for r in rows(name, "measurement")
            if r["split"] == split and r["engine"] == engine and r["scenario"] in SCENARIOS and not superseded(r)]


def vllm_check() -> None:
    published = sim_plan.FRONTEND["vllm"]
    for label, fe in (("published ceilings", published), ("fitted 30 ms serial", sim_plan.Frontend(0.030, 0.0)),
                      ("no front end", sim_plan.Frontend(0.0, 0.0))):
        sim_plan.FRONTEND["vllm"] = fe
        cells = [f"{split} {objective('vllm', all_rows('vllm', split)):.1%}" for split in ("tune", "holdout")]
        print(f"vllm    {label:22s} median |error| {', '.join(cells)}")
    sim_plan.FRONTEND["vllm"] = published


def main() -> int:
    vllm_check()
    for engine in ("sglang", "trtllm"):
        sel = tune_rows(engine)
        best = None
        for s in SERIAL_MS:
            for lat in LATENCY_MS:
                sim_plan.FRONTEND[engine] = sim_plan.Frontend(s / 1e3, lat / 1e3)
                got = objective(engine, sel)
                if best is None or got < best[0] - MIN_GAIN:
                    best = (got, s, lat)
        sim_plan.FRONTEND[engine] = sim_plan.Frontend(0.0, 0.0)
        base = objective(engine, sel)
        assert best is not None
        print(f"{engine:7} {len(sel):3} tune rows: median |error| {base:.1%} without a front end -> "
              f"{best[0]:.1%} at {best[1]} ms serial, {best[2]} ms latency")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
