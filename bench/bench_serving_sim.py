"""How fast is the scheduler simulation? Prints CPU seconds to simulate 10,000 requests on one replica.

Cases: Llama-3.1-8B on one H100 under each engine's policy (vLLM, SGLang, TensorRT-LLM), a burst
of 10,000 requests and a Poisson rate the replica keeps up with, fixed 1,024 + 256 lengths and
the ShareGPT-like mix; and a KV pool of a few sequences (Llama-3.1-70B fp8 on two H100s, 8,192 +
512 tokens) where preemption does most of the work. The trace is drawn before timing (a capacity
search reuses it; ``arrivals.draw`` caches it). Target: ≤ 1 s per 10,000 requests on one core.

``--clock cpu`` (default) times the process' CPU time: on the shared development machine wall time
measures the neighbours.

Run: ``.venv/bin/python bench/bench_serving_sim.py [--requests N] [--clock wall|cpu]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.perf.arrivals import Arrivals, burst, draw, poisson
from fleet_tui.core.perf.serving_sim import simulate
from fleet_tui.core.perf.sim_plan import replica_config
from fleet_tui.core.workload import Workload


def cases(n: int) -> list[tuple[str, Workload, str, int, Arrivals]]:
    cat = load_catalog(include_user=False)
    out = []
    for engine in ("vllm", "sglang", "trtllm"):
        w = Workload(kind="inference", model=cat.model("llama-3.1-8b"), batch=1, engine=engine)
        out += [
            (f"8B {engine:6} burst, 1024+256", w, "H100", 1, burst(n, 1024, 256)),
            (f"8B {engine:6} 20 req/s, 1024+256", w, "H100", 1, poisson(20, n, 1024, 256)),
            (f"8B {engine:6} burst, sharegpt", w, "H100", 1, burst(n, 217, 202, mix="sharegpt")),
            (f"8B {engine:6} 30 req/s, sharegpt", w, "H100", 1, poisson(30, n, 217, 202, mix="sharegpt")),
        ]
    big = Workload(kind="inference", model=cat.model("llama-3.1-70b"), batch=1, gpus=2, sharding="tensor",
                   precision="fp8")
    out.append(("70B fp8 vllm TP2 burst, 8192+512", big, "H100", 2, burst(n, 8192, 512)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    cat = load_catalog(include_user=False)
    print(f"clock: {args.clock} time; {args.requests:,} requests per case")
    print(f"{'case':36} {'seconds':>8} {'iterations':>10} {'preempted':>9} {'out tok/s':>10} {'TTFT p95 s':>10}")
    worst = 0.0
    for name, w, gpu, gpus, arrivals in cases(args.requests):
        acc = cat.accelerator(gpu)
        cfg = replica_config(w, acc, gpus, arrivals.prompt_tokens + arrivals.gen_tokens)
        assert cfg is not None
        draw(arrivals)  # drawn once, as a capacity search does
        t0 = clock()
        r = simulate(cfg, arrivals)
        dt = clock() - t0
        worst = max(worst, dt)
        print(f"{name:36} {dt:8.3f} {r.iterations:10,} {r.preemptions:9,} {r.output_tokens_per_s:10,.0f} "
              f"{r.ttft.p95:10.2f}")
    print(f"worst {worst:.3f} s per {args.requests:,} requests (target 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
