"""How fast is ranking? Prints median milliseconds.

* the bundled catalog (every region, every pricing option: ``pricing="any"``) for a few workloads,
  showing the top 10 (what the CLI and the app do) and materialising every fitting offer;
* a synthetic catalog of 100,000 offers (25,000 instance rows × 4 pricing options) built from the
  bundled accelerators with random prices and device counts.

"cold" is the first ranking of a workload (its sizing not memoised yet; the catalog index already
built by a warm-up ranking, timed separately); the medians are over repeated rankings of the same
workload, as when the app re-ranks after a constraint or pricing change. "all" materialises every
fitting offer as a RankedOffer (top=None) instead of the top 10.
Targets (issue 2, section 8): bundled ≤ 20 ms median, 100k offers ≤ 500 ms.

Run: ``.venv/bin/python bench/bench_recommend.py [--repeat N]``
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
from fleet_tui.core.recommend import recommend  # noqa: E402
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
    }


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


def timed(fn, repeat: int) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    result = fn()
    cold = time.perf_counter() - t0
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return cold * 1e3, statistics.median(samples) * 1e3, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
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
    print(f"{'workload':36} {'fitting':>8} {'cold ms':>8} {'top10 ms':>9} {'all ms':>8}")
    for name, w in workloads(cat).items():
        kw = dict(pricing="any")
        if w.kind != "inference":
            kw["training_tokens"] = 1e9
        cold, med_top, rec = timed(lambda: recommend(w, cat, top=10, **kw), args.repeat)
        _, med_all, _ = timed(lambda: recommend(w, cat, **kw), max(3, args.repeat // 3))
        print(f"{name:36} {rec.fitting_offers:8d} {cold:8.1f} {med_top:9.1f} {med_all:8.1f}")

    syn = synthetic(cat)
    print(f"\nsynthetic catalog: {len(syn.instances)} rows × 4 pricing options = "
          f"{4 * len(syn.instances)} offers")
    print(f"{'workload':36} {'fitting':>8} {'cold ms':>8} {'top10 ms':>9} {'all ms':>8}")
    for name, w in list(workloads(cat).items())[:2]:
        cold, med_top, rec = timed(lambda: recommend(w, syn, top=10, pricing="any"),
                                   max(3, args.repeat // 3))
        _, med_all, _ = timed(lambda: recommend(w, syn, pricing="any"), 3)
        print(f"{name:36} {rec.fitting_offers:8d} {cold:8.1f} {med_top:9.1f} {med_all:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
