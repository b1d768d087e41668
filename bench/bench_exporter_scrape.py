"""What one scrape of ``fleet-tui export --prometheus`` costs for a large fleet.

    .venv/bin/python bench/bench_exporter_scrape.py [--devices 4096]

One ``FleetView`` of ``--devices`` devices (8 a node), each given one of the bundled H200
trace's 5 s window analyses in turn, is rendered by the exporter's collector
(``prometheus_client.generate_latest``, in this process): series, bytes and CPU of the scrape,
the evidence gauges among them. Median CPU of ``--rounds`` scrapes.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from fleet_tui.core.exporter import FleetCollector  # noqa: E402
from fleet_tui.core.fleet import FleetView  # noqa: E402
from fleet_tui.core.monitor.analysis import analyze_trace  # noqa: E402
from fleet_tui.core.monitor.snapshot import Snapshot  # noqa: E402
from fleet_tui.core.monitor.trace import load_trace  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    snaps = load_trace("demo")
    analyses = list(analyze_trace(snaps, window_s=5.0, step_s=5.0))
    d0 = snaps[100].devices[0]
    devs = tuple(dataclasses.replace(d0, index=i % 8, node=f"n{i // 8}", uuid=f"GPU-{i}")
                 for i in range(args.devices))
    diag = {d.key: analyses[i % len(analyses)] for i, d in enumerate(devs)}
    view = FleetView.from_snapshot(Snapshot(timestamp=d0.timestamp, source="bench",
                                            source_kind="fleet", devices=devs), diag)
    collector = FleetCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    collector.publish(view, (), 0.0, None)
    cpu, body = [], b""
    for _ in range(args.rounds):
        t = time.process_time()
        body = generate_latest(registry)
        cpu.append(time.process_time() - t)
    lines = [x for x in body.decode().splitlines() if x and not x.startswith("#")]
    evidence = sum(x.startswith("fleet_tui_diagnosis_evidence") for x in lines)
    print(f"{args.devices} devices: {len(lines)} series ({evidence} evidence), "
          f"{len(body) / 1e6:.1f} MB, scrape CPU median {statistics.median(cpu) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
