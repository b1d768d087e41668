"""Benchmark the monitor's analysis and engine loop; prints numbers (no assertions).

    .venv/bin/python bench/bench_analysis.py [--loop-seconds S]

1. Analysing the whole labelled H200 trace (read + diagnose), back-to-back 5 s windows and a
   window starting at every sample (target <= 1 s).
2. The engine's own work per tick for sim:8 (history + analysis + alerts + cost), per device.
3. A real asyncio loop of sim:8 at 1 s and 0.25 s intervals: CPU time used per wall second
   (target <= 1% of one core at 1 Hz).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet_tui.core.monitor.analysis import analyze_trace  # noqa: E402
from fleet_tui.core.monitor.engine import MonitorEngine  # noqa: E402
from fleet_tui.core.monitor.sources.sim import SimSource  # noqa: E402
from fleet_tui.core.monitor.trace import iter_trace, load_trace  # noqa: E402


def best_of(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_trace() -> None:
    snaps = load_trace("demo")
    span = snaps[-1].timestamp - snaps[0].timestamp
    read = best_of(lambda: list(iter_trace("demo")))
    tumbling = best_of(lambda: analyze_trace(iter_trace("demo"), window_s=5.0))
    sliding = best_of(lambda: analyze_trace(snaps, window_s=5.0, step_s=0.2), n=3)
    n_slide = len(analyze_trace(snaps, window_s=5.0, step_s=0.2))
    print(f"trace: {len(snaps)} samples over {span:.0f} s")
    print(f"  read only                          {read * 1000:8.1f} ms")
    print(f"  read + analyse, 5 s windows        {tumbling * 1000:8.1f} ms   (target <= 1000 ms)")
    print(f"  analyse, window at every sample    {sliding * 1000:8.1f} ms   ({n_slide} windows)")


def bench_engine_ticks(n_dev: int = 8, ticks: int = 600) -> None:
    src = SimSource(n=n_dev, interval_s=1.0, start_time=1_700_000_000.0)
    eng = MonitorEngine(src, interval=1.0, alert_rules=None, usd_per_hour=98.32)
    snaps = [src.snapshot_at(k) for k in range(ticks)]
    for s in snaps[:60]:  # warm the history to steady state (5 s window, 300 s growth lookback)
        eng.process(s)
    work = []
    for s in snaps[60:]:
        t = time.perf_counter()
        eng.process(s)
        work.append(time.perf_counter() - t)
    t = time.perf_counter()
    for k in range(200):
        src.snapshot_at(k)
    sim = (time.perf_counter() - t) / 200
    med = statistics.median(work)
    print(f"engine tick, sim:{n_dev} (history + analysis + {len(eng.alerts.rules)} alert rules + cost)")
    print(f"  median {med * 1e6:8.0f} us per tick = {med / n_dev * 1e6:6.0f} us per device;"
          f" p95 {sorted(work)[int(0.95 * len(work))] * 1e6:.0f} us")
    print(f"  (the simulated source itself: {sim * 1e6:.0f} us per snapshot)")
    print(f"  at 1 Hz: {100 * (med + sim):.3f}% of one core; at 4 Hz (0.25 s): "
          f"{400 * (med + sim):.3f}%")


async def _loop(interval: float, seconds: float, n_dev: int = 8) -> tuple[float, int]:
    src = SimSource(n=n_dev, interval_s=interval)
    eng = MonitorEngine(src, interval=interval, usd_per_hour=98.32)
    count = max(2, int(seconds / interval))
    c0, w0 = time.process_time(), time.perf_counter()
    await eng.run(count=count)
    return (time.process_time() - c0) / (time.perf_counter() - w0), count


def bench_loop(seconds: float) -> None:
    for interval in (1.0, 0.25):
        frac, n = asyncio.run(_loop(interval, seconds))
        print(f"asyncio loop sim:8 every {interval:g} s for {n} ticks: "
              f"{100 * frac:.2f}% of one core (process CPU / wall, includes asyncio)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loop-seconds", type=float, default=10.0)
    args = p.parse_args()
    bench_trace()
    bench_engine_ticks()
    bench_loop(args.loop_seconds)


if __name__ == "__main__":
    main()
