"""How fast is ranking? Prints median milliseconds.

Every number is a *full* ranking unless a column says otherwise: every fitting offer ordered, with
its cost per unit of work (``recommend(..., top=None)``), under every pricing option
(``pricing="any"``). Ranking orders columns of floats (``core/ranking/table.py``); the rich
``RankedOffer`` objects are built only when read (``rec.offers[i]``), so "+ all objects" also times
building every one of them, which a caller showing a page never does.

* bundled catalog, per workload: "first" = the first ranking of a workload in the process (its
  sizing and speed not memoised: median over distinct workloads, the batch changed each time; the
  catalog index is built once beforehand, timed separately); "repeat" = the same workload again,
  as when the app re-ranks after a constraint or pricing change; "top10" = repeat with ``top=10``.
* "plan chat llama-3.1-8b (20 req/s, SLOs)": ranked by the serving capacity plan
  (``demand=``, issue 9 item 2) with the simulator off (``Demand(simulate=False)``: the analytic
  operating point): every device group planned over its replica sizes. Its "first" changes the
  generation length each time (the plan ignores the batch), so no replica capacity is memoised
  for it. "plan simulated": the same demand with the scheduler simulation on (the default of
  ``recommend --rate``): each device group's replica count from ``perf.sim_plan.plan_capacity``;
  target 2 s for a first ranking.
* a synthetic catalog of 100,000 offers (25,000 instance rows × 4 pricing options) built from the
  bundled accelerators with random prices and device counts: the same columns.

Targets (issue 2, section 8): bundled ≤ 20 ms median, 100k offers ≤ 500 ms. Since issue 9 every
ranking includes the parallel-layout search per device group (``core/sizing/layout.py``), the
collectives on each instance's links and the folding of regions into one row per instance type.

``--clock cpu`` times with the process' CPU time instead of wall time: on the shared 2-core
development machine (load average often 5-11) wall time measures the neighbours; CPU time of this
single-threaded loop is what the ranking itself costs.

Run: ``.venv/bin/python bench/bench_recommend.py [--repeat N] [--clock wall|cpu] [--bundled-only]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet_tui.core.catalog import Catalog, Instance, load_catalog  # noqa: E402
from fleet_tui.core.perf.serving_plan import Demand  # noqa: E402
from fleet_tui.core.ranking import recommend  # noqa: E402
from fleet_tui.core.workload import Workload  # noqa: E402


def workloads(cat):
    m = cat.model
    return {
        "chat llama-3.1-8b (interactive)": Workload(
            kind="inference", model=m("llama-3.1-8b"), batch=16, prompt_len=1024, gen_len=256),
        "batch llama-3.1-70b (1M tokens)": Workload(
            kind="inference", model=m("llama-3.1-70b"), batch=32, prompt_len=1024, gen_len=256,
            serving="batch"),
        "lora llama-3.1-8b (per run)": Workload(
            kind="lora", model=m("llama-3.1-8b"), batch=4, seq_len=2048, grad_checkpointing=True),
        "training llama-3.1-70b fsdp": Workload(
            kind="training", model=m("llama-3.1-70b"), batch=1, seq_len=4096,
            grad_checkpointing=True, sharding="fsdp"),
        "plan chat llama-3.1-8b (20 req/s, SLOs)": Workload(
            kind="inference", model=m("llama-3.1-8b"), batch=16, prompt_len=1024, gen_len=256),
    }


PLAN_DEMAND = Demand(rate_rps=20.0, ttft_ms=500.0, tpot_ms=30.0, simulate=False)  # the simulator off
SIM_DEMAND = Demand(rate_rps=20.0, ttft_ms=500.0, tpot_ms=30.0)  # p95 targets, the scheduler simulated
SIM_REPEAT = 3


def kwargs_for(name, w) -> dict:
    kw = dict(pricing="any")
    if w.kind != "inference":
        kw["training_tokens"] = 1e9
    if name.startswith("plan "):
        kw["demand"] = PLAN_DEMAND
    return kw


def synthetic(cat, n_rows: int = 25_000, seed: int = 7) -> Catalog:
    rng = random.Random(seed)
    accs = [a for a in cat.accelerators.values()]
    clouds = ["aws", "gcp", "azure", "lambda", "nebius", "oci", "synth1", "synth2"]
    regions = [f"region-{i}" for i in range(40)]
    rows = []
    for i in range(n_rows):
        acc = rng.choice(accs)
        count = rng.choice((1, 1, 2, 4, 8, 8))
        od = round(rng.uniform(0.3, 6.0) * count, 4)
        rows.append(Instance(
            cloud=rng.choice(clouds), instance_type=f"synth-{acc.id.lower()}-{count}x-{i % 50}",
            region=rng.choice(regions), accelerator=acc.id, accelerator_count=float(count),
            accelerator_memory_gib=acc.memory_gib, on_demand_usd_per_hour=od,
            spot_usd_per_hour=round(od * rng.uniform(0.25, 0.7), 4),
            reserved_1y_usd_per_hour=round(od * 0.7, 4), reserved_3y_usd_per_hour=round(od * 0.5, 4),
            reserved_estimated=True,
            flags=("price-outlier: synthetic",) if i % 97 == 0 else (),
            excluded="synthetic exclusion" if i % 211 == 0 else None,
        ))
    return Catalog(accelerators=cat.accelerators, models=cat.models, instances=rows)


CLOCK = time.perf_counter  # --clock cpu: time.process_time


def median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = CLOCK()
        fn()
        samples.append(CLOCK() - t0)
    return statistics.median(samples) * 1e3


def first_time_ms(w, cat, kw, repeat: int) -> float:
    """Median of first rankings: a new workload each time (batch + i), nothing memoised for it."""
    samples = []
    for i in range(repeat):
        change = {"gen_len": w.gen_len + 1 + i} if "demand" in kw else {"batch": w.batch + 1 + i}
        wi = w.model_copy(update=change)
        t0 = CLOCK()
        recommend(wi, cat, **kw)
        samples.append(CLOCK() - t0)
    return statistics.median(samples) * 1e3


def table(cat, named, repeat: int) -> list[float]:
    print(f"{'workload':36} {'fitting':>8} {'no speed':>8} {'first ms':>9} {'repeat ms':>10} "
          f"{'top10 ms':>9} {'+ all objects ms':>17}")
    medians = []
    for name, w in named:
        kw = kwargs_for(name, w)
        first = first_time_ms(w, cat, kw, repeat)
        rec = recommend(w, cat, **kw)
        repeat_ms = median_ms(lambda w=w, kw=kw: recommend(w, cat, **kw), repeat)
        top10 = median_ms(lambda w=w, kw=kw: recommend(w, cat, top=10, **kw), repeat)
        objects = median_ms(lambda w=w, kw=kw: recommend(w, cat, **kw).offers[:], max(3, repeat // 3))
        medians += [first, repeat_ms]
        print(f"{name:36} {rec.fitting_offers:8d} {rec.speed_unknown_offers:8d} {first:9.1f} "
              f"{repeat_ms:10.1f} {top10:9.1f} {objects:17.1f}")
    return medians


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--bundled-only", action="store_true", help="skip the 100k-offer catalog")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock} time")
    cat = load_catalog(include_user=False)
    offers = sum(1 for i in cat.instances for p in ("on-demand", "spot", "reserved-1y", "reserved-3y")
                 if i.price(p) is not None)
    print(f"bundled catalog: {len(cat.instances)} rows, {offers} priced offers "
          f"({len({(i.accelerator, i.accelerator_count) for i in cat.instances})} device groups)")
    warm_up = Workload(kind="inference", model=cat.model("llama-3.2-1b"), prompt_len=64, gen_len=8)
    t0 = time.perf_counter()
    recommend(warm_up, cat, top=1)
    print(f"first ranking in the process (builds the catalog index): "
          f"{(time.perf_counter() - t0) * 1e3:.1f} ms")
    bundled = table(cat, list(workloads(cat).items()), args.repeat)
    print(f"bundled full ranking: median of the per-workload medians {statistics.median(bundled):.1f} ms, "
          f"worst {max(bundled):.1f} ms (target 20 ms)")
    plan_w = workloads(cat)["plan chat llama-3.1-8b (20 req/s, SLOs)"]
    sim_first = first_time_ms(plan_w, cat, {"pricing": "any", "demand": SIM_DEMAND}, SIM_REPEAT)
    sim_repeat = median_ms(lambda: recommend(plan_w, cat, pricing="any", demand=SIM_DEMAND), SIM_REPEAT)
    print(f"plan simulated (p95 targets, every device group's replica count from the scheduler simulation): "
          f"first {sim_first:.0f} ms (median of {SIM_REPEAT}), repeat {sim_repeat:.1f} ms (target 2 s)")
    if args.bundled_only:
        return 0

    syn = synthetic(cat)
    print(f"\nsynthetic catalog: {len(syn.instances)} rows × 4 pricing options = "
          f"{4 * len(syn.instances)} offers")
    t0 = time.perf_counter()
    recommend(warm_up, syn, top=1)
    print(f"first ranking (builds the catalog index): {(time.perf_counter() - t0) * 1e3:.1f} ms")
    big = table(syn, list(workloads(cat).items()), max(3, args.repeat // 3))
    print(f"100k full ranking: median {statistics.median(big):.1f} ms, worst {max(big):.1f} ms "
          "(target 500 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
