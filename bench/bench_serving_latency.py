"""Simulated serving latency and throughput against published measurements.

Every published serving row whose scenario the scheduler simulation can replay (a burst of N
requests, a closed loop of C clients, a Poisson rate) is replayed through
``core.perf.sim_plan.simulate_replica`` on the row's model, GPU, engine and precision, with its
request lengths (fixed, or the ShareGPT-like mix for ShareGPT runs at the run's mean lengths):

* ``serving_latency.toml``: median and P99 time to first token and time per output token (the
  percentiles ``vllm bench serve`` prints; the simulated p95 is printed beside them), the runs'
  means and output throughput;
* ``serving.toml`` / ``serving_bursts.toml``: their latency means (online and burst rows) and the
  throughput of their bursts and closed loops, beside the analytic model's figure
  (``bench/validation_rows.py``), to show what simulating the scheduler changes under memory and
  prefill pressure.

Tune and holdout rows are reported apart (nothing in the simulator is fitted on either: its
constants are the engine profiles', fitted on the throughput tune rows before it existed).

Run: ``.venv/bin/python bench/bench_serving_latency.py [--rows]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from validation_rows import (
    catalog,
    kv_dtype_of,
    model,
    precision_of,
    predict_serving_analytic,
    rows,
    superseded,
)

from fleet_tui.core.errors import UserError
from fleet_tui.core.perf.arrivals import Arrivals, burst, closed_loop, poisson
from fleet_tui.core.perf.serving_sim import SimResult
from fleet_tui.core.perf.sim_plan import FRONTEND, simulate_replica
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

#: TensorRT-LLM 0.14's online table: "with 500 requests" (serving.toml's row notes)
ONLINE_REQUESTS = 500


@dataclass(frozen=True)
class Replayed:
    file: str
    id: str
    split: str
    metric: str
    measured: float
    simulated: float | None
    analytic: float | None
    p95: float | None = None  # the simulated p95 of a percentile row's quantity
    reason: str = ""
    superseded: bool = False  # an engine release the profiles no longer describe (validation_rows)

    @property
    def error(self) -> float | None:
        return None if self.simulated is None else (self.simulated - self.measured) / self.measured


def _arrivals(r: dict, inp: int, out: int, replicas: int) -> Arrivals | None:
    mix = str(r.get("length_mix") or "fixed")
    n = int(r.get("requests") or r.get("max_concurrency") or ONLINE_REQUESTS)
    per = max(1, -(-n // replicas))
    if r["scenario"] == "burst_all_at_once" or r.get("request_rate") == "inf":
        return burst(per, inp, out, mix)
    if r["scenario"] == "online_max_concurrency":
        return closed_loop(max(1, int(r["max_concurrency"]) // replicas), per, inp, out, mix)
    if isinstance(r.get("request_rate"), (int, float)):
        return poisson(float(r["request_rate"]) / replicas, per, inp, out, mix)
    return None


def _value(sim: SimResult, metric: str, replicas: int, inp: int, out: int) -> tuple[float | None, float | None]:
    """(the row's metric, the simulated p95 of its quantity) from one replica's simulation."""
    if metric.startswith("ttft_ms"):
        p95 = sim.ttft.p95 * 1e3
        got = {"ttft_ms_mean": sim.ttft.mean, "ttft_ms_p50": sim.ttft.p50, "ttft_ms_p99": sim.ttft.p99}[metric]
        return got * 1e3, p95
    if metric.startswith(("tpot_ms", "itl_ms")):
        p95 = sim.tpot.p95 * 1e3
        got = {"tpot_ms_mean": sim.tpot.mean, "itl_ms_mean": sim.tpot.mean, "tpot_ms_p50": sim.tpot.p50,
               "tpot_ms_p99": sim.tpot.p99}[metric]
        return got * 1e3, p95
    tok = sim.output_tokens_per_s * replicas
    return {"output_tokens_per_s": tok, "total_tokens_per_s": tok * (inp + out) / out}.get(metric), None


_RUNS: dict[tuple, SimResult | None] = {}


def _simulate(w: Workload, acc: Accelerator, tp: int, arrivals: Arrivals, frontend: object) -> SimResult | None:
    """One replay per run (a run's rows share it), per front-end setting (bench/fit_frontend.py)."""
    key = (w, acc.id, tp, arrivals, frontend)
    if key not in _RUNS:
        _RUNS[key] = simulate_replica(w, acc, tp, arrivals)
    return _RUNS[key]


def replay(name: str, r: dict) -> Replayed:
    base = {"file": name.removesuffix(".toml"), "id": r["id"], "split": r["split"], "metric": r["metric"],
            "measured": float(r["value"]), "superseded": bool(superseded(r))}
    analytic = None
    if r["metric"] in ("output_tokens_per_s", "total_tokens_per_s"):
        analytic = predict_serving_analytic(r).predicted
    arch = model(r["model"])
    if arch is None or r.get("input_len") is None or r.get("output_len") is None:
        return Replayed(**base, simulated=None, analytic=analytic, reason="no model shape or lengths")
    try:
        acc = catalog().accelerator(r["gpu"])
    except UserError:
        return Replayed(**base, simulated=None, analytic=analytic, reason=f"{r['gpu']} not in the catalog")
    gpus, tp = int(r["gpu_count"]), int(r.get("tp") or r["gpu_count"])
    ep = str(r.get("parallelism") or "").startswith("DEP")
    prec = precision_of(r.get("weight_precision", ""), r["model"])
    w = Workload(kind="inference", model=arch, precision=prec, batch=1, gpus=tp, engine=r["engine"],
                 sharding="tensor" if tp > 1 and not ep else "data", expert_parallel=ep,
                 kv_cache_dtype=kv_dtype_of(r.get("kv_cache_dtype", "auto")))
    inp, out = int(r["input_len"]), int(r["output_len"])
    replicas = max(1, gpus // tp)
    arrivals = _arrivals(r, inp, out, replicas)
    if arrivals is None:
        return Replayed(**base, simulated=None, analytic=analytic, reason=f"scenario {r['scenario']} not replayed")
    sim = _simulate(w, acc, tp, arrivals, FRONTEND.get(w.engine))
    if sim is None or not sim.completed:
        return Replayed(**base, simulated=None, analytic=analytic, reason="cannot be simulated here")
    got, p95 = _value(sim, r["metric"], replicas, inp, out)
    if got is not None and r.get("scope") == "per_gpu":
        got /= gpus
    return Replayed(**base, simulated=got, analytic=analytic, p95=p95)


def replay_all() -> list[Replayed]:
    out = [replay("serving_latency.toml", r) for r in rows("serving_latency.toml", "measurement")]
    for name in ("serving.toml", "serving_bursts.toml"):
        for r in rows(name, "measurement"):
            if r["scenario"] in ("burst_all_at_once", "online_max_concurrency", "online_server"):
                out.append(replay(name, r))
    return out


COLUMNS = (("TTFT p50 ms", "ttft_ms_p50"), ("TTFT p99 ms", "ttft_ms_p99"), ("TPOT p50 ms", "tpot_ms_p50"),
           ("TPOT p99 ms", "tpot_ms_p99"), ("output tok/s", "output_tokens_per_s"))


def markdown(res: list[Replayed], split: str) -> str:
    """One line per serving_latency.toml run: 'published / simulated' in the cells of ``split``."""
    runs: dict[str, dict[str, Replayed]] = {}
    for x in res:
        if x.file == "serving_latency":
            runs.setdefault(x.id.rsplit("-", 1)[0], {})[x.metric] = x
    head = "| run | " + " | ".join(c for c, _ in COLUMNS) + " |"
    lines = [f"{split} rows (published / simulated):", "", head, "|---|" + "---:|" * len(COLUMNS)]
    for run, cells in runs.items():
        out = []
        for _, metric in COLUMNS:
            x = cells.get(metric)
            if x is None or x.split != split or x.simulated is None:
                out.append("")
            else:
                fmt = ",.0f" if x.measured >= 100 else ",.1f"
                out.append(f"{x.measured:{fmt}} / {x.simulated:{fmt}}")
        if any(out):
            lines.append(f"| {run.removeprefix('gpustack-')} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def _summary(sel: list[Replayed], attr: str = "simulated") -> str:
    errs = [abs(getattr(x, attr) - x.measured) / x.measured for x in sel if getattr(x, attr) is not None]
    if not errs:
        return "-"
    return f"median {statistics.median(errs):.0%}, max {max(errs):.0%} ({len(errs)} rows)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--markdown", action="store_true",
                    help="the per-run tables of docs/serving.md (tune and holdout cells apart)")
    args = ap.parse_args()
    res = replay_all()
    if args.markdown:
        for split in ("tune", "holdout"):
            print(markdown(res, split))
        return 0
    if args.rows:
        print(f"{'row':78} {'split':7} {'published':>11} {'simulated':>11} {'err':>6} {'sim p95':>10} {'analytic':>10}")
        for x in res:
            sim = f"{x.simulated:11.1f}" if x.simulated is not None else f"{'-':>11}"
            err = f"{x.error:+6.0%}" if x.error is not None else f"{'':>6}"
            p95 = f"{x.p95:10.1f}" if x.p95 is not None else f"{'':>10}"
            ana = f"{x.analytic:10.1f}" if x.analytic is not None else f"{'':>10}"
            print(f"{x.file[:8] + ':' + x.id[:69]:78} {x.split:7} {x.measured:11.1f} {sim} {err} {p95} {ana}"
                  + (f"  ({x.reason})" if x.reason else ""))
        print()
    groups = {
        "TTFT p50": lambda x: x.metric == "ttft_ms_p50", "TTFT p99": lambda x: x.metric == "ttft_ms_p99",
        "TPOT p50": lambda x: x.metric == "tpot_ms_p50", "TPOT p99": lambda x: x.metric == "tpot_ms_p99",
        "TTFT mean": lambda x: x.metric == "ttft_ms_mean", "TPOT/ITL mean": lambda x: x.metric in ("tpot_ms_mean",
                                                                                                     "itl_ms_mean"),
    }
    print("Latency, serving_latency.toml (vllm bench serve percentiles):")
    for split in ("tune", "holdout"):
        for label, pick in groups.items():
            sel = [x for x in res if x.file == "serving_latency" and x.split == split and pick(x)]
            if sel:
                print(f"  {split:7} {label:14} {_summary(sel)}")
    print("Latency means, serving.toml + serving_bursts.toml (bursts, closed loops, online rates):")
    for split in ("tune", "holdout"):
        sel = [x for x in res if x.file != "serving_latency" and x.split == split
               and x.metric.startswith(("ttft", "itl", "tpot"))]
        current = [x for x in sel if not x.superseded]
        print(f"  {split:7} {_summary(sel)}; current releases only {_summary(current)}")
    print("Throughput of bursts, closed loops and online rates, every file (simulated vs the analytic model):")
    for split in ("tune", "holdout"):
        sel = [x for x in res if x.split == split and x.metric in ("output_tokens_per_s", "total_tokens_per_s")]
        print(f"  {split:7} simulated {_summary(sel)}; analytic {_summary(sel, 'analytic')}")
        sel = [x for x in sel if not x.superseded]
        print(f"  {split:7} current releases only: simulated {_summary(sel)}; analytic {_summary(sel, 'analytic')}")
    skipped = [x for x in res if x.simulated is None]
    if skipped:
        print(f"{len(skipped)} rows not replayed: " + "; ".join(sorted({x.reason for x in skipped})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
