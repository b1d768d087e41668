"""Grid search of the serving engines' physical constants on the TUNE rows only (serving.toml).

    .venv/bin/python bench/fit_serving.py

Prints the median |error| on tune throughput rows for each candidate and the best; the chosen
values are then written into fleet_tui/core/perf/engines.py by hand (with this script named as
their source). Holdout rows are never read here.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation_rows as vr  # noqa: E402
from fleet_tui.core.perf import engines  # noqa: E402

TUNE = [r for r in vr.rows("serving.toml", "measurement")
        if r["split"] == "tune" and r["metric"] not in vr.LATENCY_METRICS]


def score() -> float:
    errs = [abs(res.error) for res in map(vr.predict_serving, TUNE) if res.error is not None]
    return statistics.median(errs)


def main() -> int:
    base = dict(engines.ENGINES)
    best = None
    grid = dict(dec=(0.6, 0.7, 0.8), seq=(0.0, 1e-5, 2e-5, 4e-5), trt_seqs=(512, 1024, 2048),
                ar=(0.3, 0.5, 0.8), moe=(0.5, 0.7, 1.0))
    for dec, seq, trt_seqs, ar, moe in itertools.product(*grid.values()):
        engines.ALLREDUCE_EFFICIENCY["fabric"] = ar
        for k, e in base.items():
            if k == "hf":
                continue
            engines.ENGINES[k] = dataclasses.replace(
                e, decode_bandwidth_efficiency=dec, seq_overhead_s=seq, moe_prefill_efficiency=moe,
                max_seqs=trt_seqs if k == "trtllm" else e.max_seqs)
        s = score()
        if best is None or s < best[0]:
            best = (s, dict(dec=dec, seq=seq, trt_seqs=trt_seqs, ar=ar, moe=moe))
            print(f"{s:.3f} {best[1]}", flush=True)
    print("best", best)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
