"""Catalog speed: load time of the bundled catalog (cold process, warm cache, forced reload) and
query time over the full catalog. Prints numbers; asserts nothing.

    .venv/bin/python bench/bench_catalog.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:7.2f} ms  (min {min(samples) * 1e3:.2f}, max {max(samples) * 1e3:.2f}, n={len(samples)})"


def cold_process(n: int = 5) -> list[float]:
    """A fresh interpreter importing the catalog code and loading the bundled files."""
    code = ("import time; t=time.perf_counter(); from fleet_tui.core.catalog import load_catalog; "
            "c=load_catalog(include_user=False); print(time.perf_counter()-t)")
    out = []
    for _ in range(n):
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        out.append(float(r.stdout.strip()))
    return out


def main() -> None:
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.catalog.query import parse_filter, query_instances

    cold = cold_process()
    t = time.perf_counter()
    cat = load_catalog(include_user=False, reload=True)
    first = time.perf_counter() - t
    reloads = []
    for _ in range(5):
        t = time.perf_counter()
        load_catalog(include_user=False, reload=True)
        reloads.append(time.perf_counter() - t)
    warm = []
    for _ in range(200):
        t = time.perf_counter()
        load_catalog(include_user=False)
        warm.append(time.perf_counter() - t)
    print(f"bundled catalog: {len(cat.instances)} offers, {len(cat.accelerators)} accelerators, "
          f"{len(cat.models)} models, {len(cat.files)} files")
    print(f"load, cold process (imports + parse + validate): {_ms(cold)}")
    print(f"load, in-process first call:                     {first * 1e3:7.2f} ms")
    print(f"load, forced reload (parse + validate):          {_ms(reloads)}")
    print(f"load, warm (cache hit, stat of each file):       {_ms(warm)}")

    queries = {
        "all offers sorted by on-demand price": dict(),
        "H100 x8, spot, <= $40/h": dict(accelerator="H100", count=8, pricing="spot", max_usd_per_hour=40),
        "--filter cloud=aws,price<40,memory>=80": dict(conditions=parse_filter("cloud=aws,price<40,memory>=80")),
        ">= 80 GiB sorted by $/GPU-h, limit 50": dict(min_memory_gib=80, sort="price_per_gpu", limit=50),
    }
    for name, kw in queries.items():
        samples = []
        for _ in range(30):
            t = time.perf_counter()
            res = query_instances(cat, **kw)
            samples.append(time.perf_counter() - t)
        print(f"query {name:<40} {res.total:5d} rows  {_ms(samples)}")


if __name__ == "__main__":
    main()
