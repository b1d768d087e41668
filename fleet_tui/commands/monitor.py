"""``fleet-tui monitor | analyze | record | rightsize``: the live monitor without the app.

Engine imports happen inside handlers so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_tui.commands._numbers import finite_float, whole_number

if TYPE_CHECKING:  # for the checker only: the engine loads inside the handler (--help stays fast)
    from fleet_tui.core.monitor.engine import MonitorEngine, Tick
    from fleet_tui.core.monitor.recorder import Recorder
    from fleet_tui.core.monitor.source import Source

_S = argparse.SUPPRESS  # re-declared app flags keep a value given before the subcommand


def _app_flags(p: argparse.ArgumentParser, *, instance: bool = True, interval: bool = True) -> None:
    from fleet_tui.core.monitor.sources import source_help  # the registry; imports no backend

    p.add_argument("--source", default=_S, help=source_help())
    if instance:
        p.add_argument("--instance", default=_S, metavar="TYPE",
                       help="catalog instance type this machine is, for cost (e.g. p5.48xlarge)")
    if interval:
        p.add_argument("--interval", type=finite_float, default=_S, metavar="SECONDS",
                       help="seconds between samples (>= 0.25, default 1)")
    p.add_argument("--catalog-dir", action="append", default=_S, metavar="DIR",
                   help="extra catalog directory (repeatable)")


def register(subparsers: argparse._SubParsersAction) -> None:
    m = subparsers.add_parser(
        "monitor", help="live accelerator readings, diagnoses, cost and alerts without the app",
        description="Sample accelerators and print readings with the bottleneck diagnosis. "
                    "--once prints one reading (like gpustat --json); --headless prints one line "
                    "per interval; --alerts prints only alerts, as JSON lines.")
    mode = m.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true",
                      help="one reading, then exit; on GPUs with GPM (Hopper and newer) it spans "
                           "--interval seconds, so SM, tensor and DRAM activity are filled")
    mode.add_argument("--headless", action="store_true",
                      help="one reading per interval until --count or Ctrl-C (the default)")
    mode.add_argument("--alerts", action="store_true",
                      help="only alerts, as JSON lines, until --count or Ctrl-C")
    m.add_argument("--json", action="store_true", help="JSON (JSON lines when repeating)")
    m.add_argument("--count", type=whole_number, default=None, metavar="N", help="stop after N readings")
    m.add_argument("--window", type=finite_float, default=5.0, metavar="SECONDS",
                   help="diagnosis window in seconds (default 5)")
    m.add_argument("--rules", action="append", default=None, metavar="FILE",
                   help="alert rules TOML instead of the bundled + user rules (repeatable)")
    m.add_argument("--record", default=None, metavar="DB",
                   help="also record samples to this SQLite history database")
    _app_flags(m)
    m.set_defaults(func=_cmd_monitor)

    a = subparsers.add_parser(
        "analyze", help="diagnose a recorded trace offline, phase by phase",
        description="Replay a trace (the raw H200 capture format or a fleet-tui recording; "
                    "'demo' = the bundled labelled H200 trace), split it at change points into "
                    "phases and diagnose each: the bottleneck (primary) and the risks. --window "
                    "gives fixed windows instead. Streams the file in bounded memory (lines up "
                    "to 16 MiB, timestamps in seconds within ±1e10; overlapping windows, --step "
                    "below --window, hold the trace: files up to 32 MB).")
    a.add_argument("trace", metavar="TRACE", help="path to a .jsonl trace, or 'demo'")
    a.add_argument("--window", type=finite_float, default=None, metavar="SECONDS",
                   help="fixed windows of SECONDS (0.001-1e7) instead of phases")
    a.add_argument("--step", type=finite_float, default=None, metavar="SECONDS",
                   help="with --window: start a window every SECONDS (default: back to back; "
                        "a sample may fall in at most 1000 windows)")
    a.add_argument("--json", action="store_true", help="JSON list of phases (or windows)")
    a.set_defaults(func=_cmd_analyze)

    r = subparsers.add_parser(
        "record", help="record samples to a SQLite history database (WAL, crash-safe)",
        description="Sample a source and write every tick to SQLite in one transaction. Raw "
                    "samples are kept 24 h, then folded into one-minute means kept 30 days.")
    r.add_argument("--db", default=None, metavar="PATH",
                   help="database file (default: ~/.local/share/fleet-tui/history.db)")
    r.add_argument("--duration", type=finite_float, default=None, metavar="SECONDS",
                   help="stop after this many seconds (default: until Ctrl-C)")
    r.add_argument("--raw-retention", default="24h", metavar="DURATION",
                   help="keep raw samples this long (default 24h)")
    r.add_argument("--rollup-retention", default="30d", metavar="DURATION",
                   help="keep one-minute means this long (default 30d)")
    r.add_argument("--json", action="store_true",
                   help="print one JSON line per committed tick")
    _app_flags(r, instance=False, interval=False)
    r.add_argument("--interval", type=finite_float, default=_S, metavar="SECONDS",
                   help="seconds between samples (default 1; >= 0.01 for recording)")
    r.set_defaults(func=_cmd_record)

    z = subparsers.add_parser(
        "rightsize", help="usage percentiles from recorded history and the cheaper instance "
                          "that would have held them",
        description="Per device mean/median/p95/p99 of utilization and memory from a history "
                    "database, and the cheapest catalog instances that hold the observed p99 "
                    "memory and compute (+10%), with monthly savings against --instance.")
    z.add_argument("--db", default=None, metavar="PATH", help="history database (default: "
                                                               "~/.local/share/fleet-tui/history.db)")
    z.add_argument("--since", default="7d", metavar="DURATION",
                   help="how far back from the newest sample (default 7d; e.g. 12h, 30m)")
    z.add_argument("--pricing", default="on-demand",
                   choices=("on-demand", "spot", "reserved-1y", "reserved-3y"))
    z.add_argument("--top", type=whole_number, default=5, metavar="N", help="candidates to list (default 5)")
    z.add_argument("--cloud", action="append", default=None, metavar="NAME",
                   help="only candidates of this cloud (repeatable; default: all clouds)")
    z.add_argument("--json", action="store_true", help="JSON report")
    _app_flags(z, interval=False)
    z.set_defaults(func=_cmd_rightsize)


# ---------------------------------------------------------------------------------------------

def _opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    v = getattr(args, name, None)
    return default if v is None else v


def _open(spec: str, interval: float) -> Source:
    from fleet_tui.core.monitor.sources import open_source, parse_source_spec

    kind = parse_source_spec(spec).kind
    if kind == "sim":
        return open_source(spec, interval_s=interval)
    return open_source(spec)


def _named(spec: str, exc: Exception):
    """A source's refusal to open, naming the flag: ``--source nvml: NVML library not found``."""
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.redact import redact, redact_spec

    text = str(exc)
    return UserError(redact(text if text.startswith("--source")
                            else f"--source {redact_spec(spec)}: {text}"))


def _catalog(args: argparse.Namespace):
    from fleet_tui.commands._catalog_args import load_user_catalog

    return load_user_catalog(_opt(args, "catalog_dir", []))


def _duration(flag: str, value: str) -> float:
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.alerts import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UserError(f"{flag} {value!r}: {exc}") from None


# What stands in for a device, in the CLI's words (the app says it in its own).
NO_DEVICE_HINT = ("; without one, --source sim:8 simulates eight devices and --source replay:demo "
                  "replays a recorded H200")


def no_device_error(spec: str, snapshot):
    """The answer a headless command gives when its source has no device: the source and why
    (exit 2), in the words ``fleet`` uses (the source's first error, without "retrying in")."""
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.redact import redact, redact_spec

    why = (snapshot.errors[0] if snapshot.errors else snapshot.message) or "no accelerator found"
    hint = NO_DEVICE_HINT if snapshot.source_kind == "none" else ""
    return UserError(f"--source {redact_spec(spec)}: {redact(why.split('; retrying')[0])}{hint}")


def _fmt(v: Any, unit: str = "", digits: int = 0) -> str:
    if v is None:
        return "N/A"
    return f"{v:.{digits}f}{unit}"


def _device_line(d, analysis) -> list[str]:
    mem = "N/A"
    if d.mem_used_bytes is not None and d.mem_total_bytes:
        mem = f"{d.mem_used_bytes / 2**30:.1f}/{d.mem_total_bytes / 2**30:.0f} GiB"
    top = analysis.primary_diagnosis if analysis is not None else None
    primary = top.headline if top is not None else "-"  # the words the app's row shows
    conf = top.confidence if top is not None else None
    return [str(d.index), d.name[:28], d.state, _fmt(d.gpu_util_pct, "%"),
            _fmt(d.sm_active_pct, "%"), _fmt(d.tensor_active_pct, "%"), mem,
            _fmt(d.temp_c, "C"), _fmt(d.power_w, "W"),
            primary + (f" ({conf:.0%})" if conf is not None else "")]


_HEADERS = ["gpu", "name", "state", "util", "sm", "tensor", "memory", "temp", "power", "diagnosis"]


def _tick_json(tick, fleet_views=None) -> dict[str, Any]:
    from fleet_tui.core.monitor.serialize import snapshot_to_dict

    snap = snapshot_to_dict(tick.snapshot)
    for dev, d in zip(snap["devices"], tick.snapshot.devices):
        an = tick.analyses.get(d.key)
        dev["diagnosis"] = an.to_dict() if an is not None else None
    snap["cost"] = tick.cost.to_dict() if tick.cost is not None else None
    snap["alerts"] = [a.to_dict() for a in tick.new_alerts]
    if fleet_views is not None:
        # Per-node and fleet-wide roll-ups (worst nodes first), the same as `fleet-tui fleet --json`.
        snap["fleet"] = fleet_views(tick).to_dict(devices=False)
    return snap


def _print_tick_text(tick, stream) -> None:
    from fleet_tui.commands._output import format_table

    snap = tick.snapshot
    if snap.source_kind == "none":
        head = snap.message or "no accelerator found"
    else:
        head = f"{snap.source} ({snap.source_kind})" + (f": {snap.message}" if snap.message else "")
    stream.write(head + "\n")
    agg = snap.aggregate
    if agg is not None:  # a fleet past --aggregate-above: no device read one by one
        stream.write(f"  aggregated on the server: {agg.device_count} devices on {len(agg.nodes)} "
                     f"nodes (more than {agg.threshold}), {agg.idle_devices} idle; the roll-ups: "
                     "fleet-tui fleet --source ...\n")
    if snap.devices:
        rows = [_device_line(d, tick.analyses.get(d.key)) for d in snap.devices]
        headers = _HEADERS
        if any(d.node for d in snap.devices):  # a fleet: devices of different nodes share indexes
            headers = ["node", *_HEADERS]
            rows = [[d.node, *row] for d, row in zip(snap.devices, rows)]
        stream.write(format_table(headers, rows) + "\n")
        for f in tick.diagnoses[:6]:
            if f.severity == "ok":
                continue  # a healthy primary: its row says so
            stream.write(f"  {f.device}: {f.title} {f.evidence[0]}\n")
            for line in f.evidence[1:]:
                stream.write(f"      {line}\n")
            stream.write(f"    -> {f.actions[0]}\n")
    if tick.cost is not None:
        stream.write("  cost: " + "; ".join(f"{k} {v}" for k, v in tick.cost.lines()) + "\n")
    for a in tick.new_alerts:
        stream.write(f"  ALERT [{a.severity}] {a.rule}: {a.message}\n")
    stream.flush()


def _engine(args: argparse.Namespace, spec: str) -> tuple[MonitorEngine, Recorder | None]:
    """The engine the flags ask for, on the unopened source of ``spec`` (and the --record file's
    recorder); a flag out of bounds or an unknown --instance is a UserError naming it."""
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.alerts import strict_rules
    from fleet_tui.core.monitor.engine import MIN_INTERVAL_S, MonitorEngine
    from fleet_tui.core.monitor.windowing import policy_for

    interval = _opt(args, "interval", 1.0)
    if interval < MIN_INTERVAL_S:
        raise UserError(f"--interval {interval:g}: must be at least {MIN_INTERVAL_S} seconds")
    if args.count is not None and args.count < 1:
        raise UserError(f"--count {args.count}: must be at least 1")
    if args.window <= 0:
        raise UserError(f"--window {args.window:g}: must be positive")
    rules = strict_rules(args.rules) if args.rules else None
    source = _open(spec, interval)
    instance = _opt(args, "instance")
    catalog = _catalog(args) if instance else None
    if catalog is not None:
        catalog.find_instance(instance)  # a wrong name fails now, with suggestions
    recorder = None
    if args.record:
        from fleet_tui.core.monitor.recorder import Recorder

        recorder = Recorder(args.record)
    engine = MonitorEngine(source, interval_s=interval, instance=instance, alert_rules=rules,
                           recorder=recorder, catalog=catalog,
                           policy=policy_for(source.kind, args.window))
    return engine, recorder


def _cmd_monitor(args: argparse.Namespace) -> int:
    import asyncio

    from fleet_tui.core.errors import UserError
    from fleet_tui.core.fleet import FleetViews, one_deadline, unavailable_reason
    from fleet_tui.core.monitor.source import SourceUnavailable
    from fleet_tui.core.monitor.windowing import FLEET_SOURCE_KIND
    from fleet_tui.core.redact import redact, redact_spec

    spec = _opt(args, "source", "auto")
    engine, recorder = _engine(args, spec)
    source = engine.source
    fleet_views = FleetViews() if source.kind == FLEET_SOURCE_KIND else None
    for problem in engine.rule_problems:
        print(f"fleet-tui: warning: alert rule skipped: {problem}", file=sys.stderr)
    out = sys.stdout
    count = 1 if args.once else args.count
    failed: list[str] = []

    def on_tick(tick: Tick) -> None:
        snap = tick.snapshot
        no_accelerator = snap.source_kind == "none"  # auto found nothing here to watch at all
        if not snap.devices and (no_accelerator or args.once and snap.errors
                                 or args.alerts and not failed):
            # no device here, one reading that could not be read, or alerts with nothing to
            # watch: the same answer as `fleet` (exit 2 with the source's reason), not a line
            # that says retrying and exit 0
            why = unavailable_reason(snap.errors, snap.message)
            if args.alerts:
                why += "; --alerts has no device to watch"
            if no_accelerator:
                why += NO_DEVICE_HINT
            failed.append(redact(f"--source {redact_spec(spec)}: {why}"))
            engine.stop()
            return
        if args.alerts:
            for a in tick.new_alerts:
                out.write(json.dumps(a.to_dict(), allow_nan=False) + "\n")
            out.flush()
        elif args.json:
            indent = 2 if args.once else None
            out.write(json.dumps(_tick_json(tick, fleet_views), allow_nan=False, indent=indent)
                      + "\n")
            out.flush()
        else:
            _print_tick_text(tick, out)

    engine.subscribe(on_tick)
    try:
        if args.once:
            with one_deadline(source):  # the backfill and the reading share one timeout
                asyncio.run(engine.run(count=count, prime=True))
        else:
            asyncio.run(engine.run(count=count))
    except SourceUnavailable as exc:
        raise _named(spec, exc) from None
    finally:
        if recorder is not None:
            recorder.close()
    if failed:
        raise UserError(failed[0])
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from fleet_tui.commands._analyze import run_analyze

    return run_analyze(args)


def _cmd_record(args: argparse.Namespace) -> int:
    import asyncio
    import time

    from fleet_tui.core import paths
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.engine import MonitorEngine
    from fleet_tui.core.monitor.recorder import Recorder
    from fleet_tui.core.monitor.source import SourceUnavailable

    spec = _opt(args, "source", "auto")
    interval = _opt(args, "interval", 1.0)
    if not interval >= 0.01:
        raise UserError(f"--interval {interval:g}: must be at least 0.01 seconds for recording")
    if args.duration is not None and args.duration <= 0:
        raise UserError(f"--duration {args.duration:g}: must be positive")
    if args.duration is not None and interval > args.duration:
        raise UserError(f"--interval {interval:g} is longer than --duration {args.duration:g}: "
                        "the run would wait past its end for its next tick")
    raw_s = _duration("--raw-retention", args.raw_retention)
    roll_s = _duration("--rollup-retention", args.rollup_retention)
    db = args.db or str(paths.default_history_db())
    source = _open(spec, interval)
    new_file = not Path(db).expanduser().exists()
    recorder = Recorder(db, raw_retention_s=raw_s, rollup_retention_s=roll_s)
    engine = MonitorEngine(source, interval_s=interval, alert_rules=[], recorder=recorder,
                           min_interval_s=0.01, price=False)
    started = time.monotonic()
    no_device: list = []  # the first tick's snapshot when it found no device
    gone_said = False

    def on_tick(tick: Tick) -> None:
        nonlocal gone_said
        if tick.seq == 1 and not tick.snapshot.devices:
            no_device.append(tick.snapshot)  # nothing to record: stop, say so, exit 2
            engine.stop()
            return
        if args.json:
            sys.stdout.write(json.dumps({"tick": tick.seq, "ts": tick.snapshot.timestamp,
                                         "devices": len(tick.snapshot.devices)}) + "\n")
            sys.stdout.flush()
        if not tick.snapshot.devices and not gone_said:  # they were there: keep going
            gone_said = True
            print(f"fleet-tui: warning: {tick.snapshot.message or 'no devices'}; recording "
                  "resumes when they are back", file=sys.stderr)
        if args.duration is not None and time.monotonic() - started >= args.duration:
            engine.stop()

    engine.subscribe(on_tick)
    from fleet_tui.core.redact import redact_spec

    print(f"recording {redact_spec(spec)} every {interval:g} s to {db}", file=sys.stderr)
    refused: UserError | None = None
    try:
        asyncio.run(engine.run())
    except SourceUnavailable as exc:  # the source named cannot run here
        refused = _named(spec, exc)
    finally:
        recorder.close()
    if no_device or refused:
        if new_file:  # leave no empty database behind for a run that recorded nothing
            for suffix in ("", "-wal", "-shm"):
                Path(db + suffix).expanduser().unlink(missing_ok=True)
        raise refused or no_device_error(spec, no_device[0])
    print(f"recorded {recorder.ticks_written} ticks to {db}", file=sys.stderr)
    return 0


def _cmd_rightsize(args: argparse.Namespace) -> int:
    from fleet_tui.commands._output import print_json, print_table
    from fleet_tui.core import paths
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.rightsize import NoRecordedSamples, rightsize

    since = None if args.since in ("all", "") else _duration("--since", args.since)
    db = args.db or str(paths.default_history_db())
    try:
        report = rightsize(db, _catalog(args), since_s=since, instance=_opt(args, "instance"),
                           pricing=args.pricing, top=args.top, clouds=args.cloud)
    except NoRecordedSamples as exc:
        text = exc.render(lambda field: "--" + field)
        raise UserError(f"{text}; record some with 'fleet-tui record --db {db}'") from None
    if args.json:
        print_json(report.to_dict())
        return 0
    rows = []
    for d in report.devices:
        rows.append([str(d.index), d.name[:28], str(d.samples),
                     *(_fmt(getattr(d.gpu_util_pct, k), "%") for k in ("mean", "median", "p95", "p99")),
                     _fmt(d.sm_active_pct.p99, "%"),
                     *(_fmt(getattr(d.mem_used_gib, k), "", 1) for k in ("mean", "p99")),
                     _fmt(d.mem_total_gib, "", 0)])
    print_table(["gpu", "name", "samples", "util mean", "median", "p95", "p99", "sm p99",
                 "mem GiB mean", "p99", "total"], rows)
    print()
    if report.need_mem_per_device_gib is not None:
        need = (f"needs (p99 + 10%): {report.need_mem_per_device_gib:.1f} GiB per device, "
                f"{report.need_mem_total_gib:.1f} GiB total")
        if report.need_bf16_tflops is not None:
            need += f", {report.need_bf16_tflops:.0f} bf16 TFLOP/s"
        print(need)
    if report.current is not None:
        c = report.current
        print(f"current: {c.instance_type} ({c.cloud}, {c.region}) ${c.usd_per_hour:,.2f}/h = "
              f"${c.usd_per_month:,.0f}/month")
    if report.candidates:
        print_table(["cloud", "instance", "region", "accelerator", "count", "$/h", "$/month",
                     "saves $/month"],
                    [[c.cloud, c.instance_type, c.region, c.accelerator, str(c.accelerator_count),
                      f"{c.usd_per_hour:,.2f}", f"{c.usd_per_month:,.0f}",
                      "" if c.savings_usd_per_month is None else f"{c.savings_usd_per_month:,.0f}"]
                     for c in report.candidates])
    for n in report.notes:
        print(f"note: {n}")
    return 0
