"""Speed of the sizing engine: µs per size_workload call, cold and cached.

Run: .venv/bin/python bench/bench_sizing.py
"Cold" clears every sizing/perf cache before each call; "cached" repeats a call already made.
"catalog sweep" sizes one workload on every bundled accelerator × (1, 2, 4, 8) GPUs from cold
caches, which is what ranking a whole catalog costs (recommend sizes once per distinct pair).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet_tui.core import caches  # noqa: E402
from fleet_tui.core.catalog import load_catalog  # noqa: E402
from fleet_tui.core.sizing.overview import size_workload  # noqa: E402
from fleet_tui.core.workload import Workload  # noqa: E402

#: The memos of sizing and speed (model shapes' parameter counts stay cached, as they always did here).
SIZING_CACHES = ("sizing.memory", "sizing.fit", "sizing.size_workload", "perf.throughput")


def clear() -> None:
    for name in SIZING_CACHES:
        caches.memo(name).clear()


def time_us(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def main() -> None:
    cat = load_catalog()
    h100 = cat.accelerator("H100")
    workloads = {
        "inference 8B prefill": Workload(kind="inference", model=cat.model("llama-3.1-8b"), batch=8, seq_len=2048),
        "generation 70B": Workload(kind="inference", model=cat.model("llama-3.1-70b"), batch=32,
                                   prompt_len=1024, gen_len=256),
        "finetune 70B (no fit: suggestions)": Workload(kind="finetune", model=cat.model("llama-3.1-70b"),
                                                       batch=8, seq_len=4096),
        "lora MoE 235B": Workload(kind="lora", model=cat.model("qwen3-235b-a22b"), batch=4, seq_len=2048,
                                  master_weights="none"),
    }
    print(f"{'workload':<36} {'cold µs (median)':>17} {'cached µs (median)':>19}")
    for name, w in workloads.items():
        def cold(w=w):
            clear()
            size_workload(w, h100, 1)
        cold_t = time_us(cold, 30)
        size_workload(w, h100, 1)
        warm_t = time_us(lambda w=w: size_workload(w, h100, 1), 2000)
        print(f"{name:<36} {statistics.median(cold_t):>17.0f} {statistics.median(warm_t):>19.2f}")

    accs = list(cat.accelerators.values())
    w = workloads["generation 70B"]
    sweeps = []
    for _ in range(20):
        clear()
        t0 = time.perf_counter()
        for acc in accs:
            for n in (1, 2, 4, 8):
                size_workload(w.model_copy(update={"gpus": n, "sharding": "tensor"}), acc, n)
        sweeps.append((time.perf_counter() - t0) * 1e3)
    pairs = len(accs) * 4
    print(f"catalog sweep: {pairs} (accelerator, count) pairs from cold caches: "
          f"median {statistics.median(sweeps):.1f} ms ({statistics.median(sweeps) * 1e3 / pairs:.0f} µs/pair)")


if __name__ == "__main__":
    main()
