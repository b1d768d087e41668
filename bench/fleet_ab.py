"""A/B of bench_fleet.py's refresh measurement against another checkout, on the same machine.

    .venv/bin/python bench/fleet_ab.py OTHER_CHECKOUT [--rounds 2] [--refreshes 10]

Runs, in alternation, one fresh process per tree (the other checkout's ``fleet_tui`` and its
``bench/bench_fleet.py``, then this one's): a canned Prometheus answer for 512 nodes x 8 GPUs, each
node scraped every 15 s, refreshes every 2 s; prints the median CPU ms of the source's read, the
engine's processing (and, within it, the alert rules') and the fleet view, and the garbage
collector's share. On a loaded machine the
alternation is what makes the two comparable.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import gc, os, statistics, sys, time, multiprocessing as mp
root, refreshes = sys.argv[1], int(sys.argv[2])
sys.path[:0] = [root, root + "/bench"]
import bench_fleet as b
from fleet_tui.core.fleet import FleetViews
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.windowing import FleetWindowPolicy
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from fleet_tui.core.monitor.alerts import AlertEvaluator
evaluate, in_alerts = AlertEvaluator.evaluate, [0.0]
def timed_evaluate(self, *args, **kw):
    t = time.process_time()
    try:
        return evaluate(self, *args, **kw)
    finally:
        in_alerts[0] += time.process_time() - t
AlertEvaluator.evaluate = timed_evaluate
spent, began = [0.0], [0.0]
gc.callbacks.append(lambda phase, info: began.__setitem__(0, time.process_time())
                    if phase == "start" else spent.__setitem__(0, spent[0] + time.process_time() - began[0]))
if __name__ == "__main__":
    q = mp.get_context("spawn").Queue()
    server = mp.get_context("spawn").Process(target=b._serve_canned, args=(q, 512, 8, 15.0, 2.0), daemon=True)
    server.start()
    port, *_, start = q.get(timeout=300)
    clock = b.VirtualClock(start, 2.0)
    src = PrometheusSource(f"http://127.0.0.1:{port}", env={}, timeout_s=30, clock=clock)
    engine = MonitorEngine(src, interval_s=2.0, price=False, policy=FleetWindowPolicy())
    views, rows = FleetViews({"*": 98.32}), []
    for i in range(refreshes + 4):
        clock.tick()
        g, a, in_alerts[0] = spent[0], time.process_time(), 0.0
        snap = src.sample_blocking(); t1 = time.process_time()
        tick = engine.process(snap); t2 = time.process_time()
        views(tick); t3 = time.process_time()
        if i >= 4:
            rows.append(((t1 - a) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t3 - a) * 1e3, (spent[0] - g) * 1e3,
                         in_alerts[0] * 1e3))
        time.sleep(0.5)
    cols = [statistics.median(c) for c in zip(*rows)]
    print(f"{root}: read {cols[0]:.1f}  engine {cols[1]:.1f} (alerts {cols[5]:.1f})  view {cols[2]:.1f}  "
          f"total {cols[3]:.1f} "
          f"ms CPU median (gc {cols[4]:.1f}), load avg {os.getloadavg()[0]:.1f}", flush=True)
    server.terminate(); server.join()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", help="another checkout of fleet-tui (e.g. the commit before)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--refreshes", type=int, default=10)
    args = ap.parse_args()
    for _ in range(args.rounds):
        for root in (str(Path(args.other).resolve()), str(ROOT)):
            subprocess.run([sys.executable, "-c", CHILD, root, str(args.refreshes)], check=True)


if __name__ == "__main__":
    main()
