"""Catalog speed: loading the bundled catalog from TOML and from the compiled cache (cold process
and in-process), building offers lazily, whole commands against ``python -c pass`` (issue 13's goal:
``fleet-tui size … --json`` within 8x of it), and query time over the full catalog. Prints numbers;
asserts nothing. Uses a temporary XDG_CACHE_HOME, so the developer's cache is left alone.

    .venv/bin/python bench/bench_catalog.py [--commands | --against OTHER_CHECKOUT]
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_TMP = tempfile.mkdtemp(prefix="bench-catalog-")
_CACHE = os.path.join(_TMP, "cache")
os.environ["XDG_CACHE_HOME"] = _CACHE
# Child processes use byte-code caches as an installed package does (a developer shell that sets
# PYTHONDONTWRITEBYTECODE would recompile every module in every run: ~150 ms more per command).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
FLEET_TUI = [str(Path(sys.executable).with_name("fleet-tui"))]
SIZE = ["size", "--model", "llama-3.1-8b", "--gpu", "H100", "--json"]


def _ms(samples: list[float]) -> str:
    return (f"median {statistics.median(samples) * 1e3:7.2f} ms  (min {min(samples) * 1e3:.2f}, "
            f"max {max(samples) * 1e3:.2f}, n={len(samples)})")


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process; CPU (user + system) is what a loaded machine
    disturbs least, so the ratios below are computed on it too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cold_load(n: int, cached: bool) -> list[float]:
    """A fresh interpreter importing the catalog code and loading the bundled files (from TOML: an
    empty cache dir each time; cached: the compiled catalog written by a previous run)."""
    code = ("import time; t=time.perf_counter(); from fleet_tui.core.catalog import load_catalog; "
            "c=load_catalog(include_user=False); print(time.perf_counter()-t)")
    out = []
    for _ in range(n):
        cache = _CACHE if cached else tempfile.mkdtemp(dir=_TMP)
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "XDG_CACHE_HOME": cache})
        out.append(float(r.stdout.strip()))
    return out


def whole_commands(n: int) -> None:
    """Wall time of whole commands against the interpreter's own start, interleaved so load on the
    machine hits both alike."""
    env = dict(os.environ)
    _run(FLEET_TUI + SIZE, env)  # writes the compiled catalog (and the byte-code caches)
    base, version, size_hit, size_toml, rec, cat = [], [], [], [], [], []
    for _ in range(n):
        base.append(_run([sys.executable, "-c", "pass"], env))
        version.append(_run(FLEET_TUI + ["--version"], env))
        size_hit.append(_run(FLEET_TUI + SIZE, env))
        size_toml.append(_run(FLEET_TUI + SIZE, {**env, "XDG_CACHE_HOME": tempfile.mkdtemp(dir=_TMP)}))
        rec.append(_run(FLEET_TUI + ["recommend", "--model", "llama-3.1-8b", "--top", "5", "--json"], env))
        cat.append(_run(FLEET_TUI + ["catalog", "instances", "--limit", "5"], env))
    def show(name: str, runs: list[tuple[float, float]]) -> None:
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        base_wall = statistics.median(w for w, _ in base)
        base_cpu = statistics.median(c for _, c in base)
        print(f"{name:<46} wall median {wall * 1e3:6.0f} ms ({wall / base_wall:4.1f}x pass), "
              f"CPU median {cpu * 1e3:6.0f} ms ({cpu / base_cpu:4.1f}x pass)")

    print(f"(loaded machine? load average {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    for name, runs in (("python -c pass", base), ("fleet-tui --version", version),
                       ("size … --json, compiled catalog", size_hit),
                       ("size … --json, from TOML (empty cache)", size_toml),
                       ("recommend --top 5 --json, compiled catalog", rec),
                       ("catalog instances --limit 5, compiled catalog", cat)):
        show(name, runs)


def in_process() -> None:
    from fleet_tui.core.catalog import compiled, loading

    dirs, files = loading.source_files(include_user=False)
    key = compiled.cache_key(dirs, loading.file_stamps(files))
    builds, compiles, parses, one, every = [], [], [], [], []
    for _ in range(5):
        t = time.perf_counter()
        cat = loading.build_catalog(files)
        builds.append(time.perf_counter() - t)
        t = time.perf_counter()
        data = compiled.compile_catalog(cat, key)
        compiles.append(time.perf_counter() - t)
        t = time.perf_counter()
        lazy = compiled.parse_compiled(data, key)
        parses.append(time.perf_counter() - t)
        t = time.perf_counter()
        lazy.offers_of("H100")
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        lazy.instances  # noqa: B018
        every.append(time.perf_counter() - t)
    print(f"bundled catalog: {len(cat.instances)} offers, {len(cat.accelerators)} accelerators, "
          f"{len(cat.models)} models, {len(cat.files)} files; compiled {len(data) / 1024:.0f} KiB")
    print(f"in-process: parse + validate the TOML files:     {_ms(builds)}")
    print(f"in-process: compile (write side, no I/O):         {_ms(compiles)}")
    print(f"in-process: read the compiled catalog (no I/O):   {_ms(parses)}")
    print(f"in-process: then build the H100 offers only:      {_ms(one)}")
    print(f"in-process: then build every offer:               {_ms(every)}")


def queries() -> None:
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.catalog.query import parse_filter, query_instances

    cat = load_catalog(include_user=False)
    cases = {
        "all offers sorted by on-demand price": dict(),
        "H100 x8, spot, <= $40/h": dict(accelerator="H100", count=8, pricing="spot", max_usd_per_hour=40),
        "--filter cloud=aws,price<40,memory>=80": dict(conditions=parse_filter("cloud=aws,price<40,memory>=80")),
        ">= 80 GiB sorted by $/GPU-h, limit 50": dict(min_memory_gib=80, sort="price_per_gpu", limit=50),
    }
    for name, kw in cases.items():
        samples = []
        for _ in range(30):
            t = time.perf_counter()
            res = query_instances(cat, **kw)
            samples.append(time.perf_counter() - t)
        print(f"query {name:<40} {res.total:5d} rows  {_ms(samples)}")


def against(other: Path, n: int) -> None:
    """``size … --json`` of this tree and of ``other`` (a checkout of another revision, e.g.
    ``git worktree add /tmp/base main``), interleaved in one run so the load hits both alike;
    ``python -m fleet_tui`` from each tree's root imports that tree's package."""
    env = dict(os.environ)
    trees = {"this tree": ROOT, f"{other}": other}
    for tree in trees.values():  # compiled catalogs and byte-code caches written first
        subprocess.run([sys.executable, "-m", "fleet_tui", *SIZE], cwd=tree, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs: dict[str, list[tuple[float, float]]] = {"python -c pass": [], **{k: [] for k in trees}}
    for _ in range(n):
        runs["python -c pass"].append(_run([sys.executable, "-c", "pass"], env))
        for name, tree in trees.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "fleet_tui", *SIZE], cwd=tree, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            runs[name].append((wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)))
    base = statistics.median(c for _, c in runs["python -c pass"])
    print(f"(load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; size … --json, compiled catalog)")
    for name, samples in runs.items():
        cpu = statistics.median(c for _, c in samples)
        wall = statistics.median(w for w, _ in samples)
        print(f"{name:<40} CPU median {cpu * 1e3:6.0f} ms ({cpu / base:4.1f}x pass), wall {wall * 1e3:6.0f} ms")


def main() -> None:
    if "--against" in sys.argv:  # --against DIR: this tree's size command next to DIR's
        try:
            against(Path(sys.argv[sys.argv.index("--against") + 1]).resolve(), 9)
        finally:
            shutil.rmtree(_TMP, ignore_errors=True)
        return
    if "--commands" in sys.argv:  # only the whole-command table (the README's ratio)
        try:
            whole_commands(9)
        finally:
            shutil.rmtree(_TMP, ignore_errors=True)
        return
    try:
        in_process()
        toml = cold_load(5, cached=False)
        cold_load(1, cached=True)  # writes the compiled catalog
        hit = cold_load(5, cached=True)
        print(f"cold process, import + load from TOML:          {_ms(toml)}")
        print(f"cold process, import + load compiled catalog:   {_ms(hit)}")
        whole_commands(7)
        queries()
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
