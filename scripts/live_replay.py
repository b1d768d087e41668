"""What the live Monitor would have shown, tick by tick, on a recorded trace.

``fleet-tui analyze`` cuts a trace into phases after the fact, seeing the whole of it. The Monitor
pane sees one reading at a time: its engine (``MonitorEngine.process``, the same code the app and
``fleet-tui monitor`` run) judges each tick from what came before. This replays a trace through
that engine and prints each device's primary diagnosis whenever it changes, with the seconds since
the trace began: how late the monitor notices a change, and what it shows while one is under way.

Run: .venv/bin/python scripts/live_replay.py TRACE [--interval S]

TRACE: a fleet-tui recording or a raw H200 capture (as ``fleet-tui analyze`` reads), or ``demo``.
The interval defaults to the median gap between the trace's readings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet_tui.core.errors import UserError  # noqa: E402
from fleet_tui.core.monitor.engine import MonitorEngine  # noqa: E402
from fleet_tui.core.monitor.trace import load_trace  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a .jsonl trace, or 'demo'")
    ap.add_argument("--interval", type=float, default=None,
                    help="the monitor's interval in seconds (default: the trace's median gap)")
    args = ap.parse_args(argv)
    try:
        snapshots = load_trace(args.trace)
    except (OSError, UserError) as exc:
        print(f"live_replay: {args.trace}: {exc}", file=sys.stderr)
        return 2
    if not snapshots:
        print(f"live_replay: {args.trace}: no readings", file=sys.stderr)
        return 2
    gaps = [b.timestamp - a.timestamp for a, b in zip(snapshots, snapshots[1:])
            if b.timestamp > a.timestamp]
    interval = args.interval or (statistics.median(gaps) if gaps else 1.0)
    engine = MonitorEngine(None, interval_s=interval, min_interval_s=min(interval, 0.1), price=False)
    start, shown = snapshots[0].timestamp, {}
    for snap in snapshots:
        tick = engine.process(snap)
        for key, analysis in tick.analyses.items():
            if shown.get(key) != analysis.primary:
                shown[key] = analysis.primary
                print(f"{snap.timestamp - start:8.2f} s  {key}  {analysis.primary}")
    print(f"{snapshots[-1].timestamp - start:8.2f} s  (end of trace; interval {interval:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
