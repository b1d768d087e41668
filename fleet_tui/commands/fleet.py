"""``fleet-tui fleet`` (one fleet summary) and ``fleet-tui export --prometheus`` (fleet-tui's own
metrics for Grafana). Engine imports happen inside handlers so ``--help`` stays fast."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fleet_tui.commands._fleet_args import aggregate_above, aggregate_flag
from fleet_tui.commands._numbers import finite_float, timeout_seconds, whole_number
from fleet_tui.commands._output import kind_words
from fleet_tui.core.units import pct as _pct

if TYPE_CHECKING:  # for the checker only: the engine loads inside the handlers (--help stays fast)
    from fleet_tui.core.monitor.engine import Tick

_S = argparse.SUPPRESS  # app flags given before the subcommand keep their value


def _source_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", default=_S,
                   help="where readings come from, usually prometheus:URL (a fleet); also auto, "
                        "nvml, sim[:N], replay:PATH for this box")
    p.add_argument("--instance", default=_S, metavar="TYPE",
                   help="catalog instance type of every node, for cost (e.g. p5.48xlarge); the "
                        "cheapest listed region's on-demand price is used")
    p.add_argument("--node-price", type=finite_float, default=None, metavar="USD_PER_HOUR",
                   help="price of one node per hour (instead of --instance)")
    p.add_argument("--catalog-dir", action="append", default=_S, metavar="DIR",
                   help="extra catalog directory (repeatable)")
    p.add_argument("--timeout", type=timeout_seconds, default=5.0, metavar="SECONDS",
                   help="Prometheus query timeout, at most 3600 (default 5)")
    p.add_argument("--insecure", action="store_true",
                   help="do not verify the Prometheus server's TLS certificate")
    aggregate_flag(p)


def register(subparsers: argparse._SubParsersAction) -> None:
    f = subparsers.add_parser(
        "fleet", help="fleet summary from Prometheus: nodes worst first, idle cost, drill-down",
        description="Read a fleet's DCGM / Gaudi / Neuron exporter metrics through Prometheus "
                    "(--source prometheus:URL; token or basic auth from FLEET_TUI_PROM_TOKEN or "
                    "FLEET_TUI_PROM_USER/FLEET_TUI_PROM_PASSWORD), diagnose every device over "
                    "--window seconds of history, and print per-node roll-ups worst first.")
    f.add_argument("--node", default=None, metavar="NAME", help="drill into one node's devices")
    f.add_argument("--window", type=finite_float, default=60.0, metavar="SECONDS",
                   help="history used for the diagnoses (default 60; 0 = the current reading)")
    f.add_argument("--top", type=whole_number, default=20, metavar="N",
                   help="nodes (or worst devices) shown in the table (default 20)")
    f.add_argument("--json", action="store_true", help="the whole fleet view as JSON")
    _source_flags(f)
    f.set_defaults(func=_cmd_fleet)

    e = subparsers.add_parser(
        "export", help="serve fleet-tui's diagnoses, costs and alerts as Prometheus metrics",
        description="Serve what fleet-tui derives (diagnosis per device, cost and idle cost per "
                    "hour, efficiency score, active alerts) on /metrics for Prometheus and "
                    "Grafana (dashboards/fleet-tui.grafana.json). Loopback only unless "
                    "--allow-remote.")
    e.add_argument("--prometheus", action="store_true", required=False,
                   help="Prometheus text format on /metrics (the only format)")
    e.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1)")
    e.add_argument("--port", type=int, default=9877, help="port to listen on (default 9877)")
    e.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --bind (anyone who reaches it reads hosts and costs)")
    e.add_argument("--interval", type=finite_float, default=_S, metavar="SECONDS",
                   help="seconds between refreshes (default 2, at least 0.5)")
    _source_flags(e)
    e.set_defaults(func=_cmd_export)


def _opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    v = getattr(args, name, None)
    return default if v is None else v


def _prices(args: argparse.Namespace):
    from fleet_tui.core.errors import UserError

    if args.node_price is not None:
        if args.node_price < 0:
            raise UserError(f"--node-price {args.node_price:g}: must be zero or more (USD per hour)")
        if _opt(args, "instance"):
            raise UserError("--node-price and --instance both set a price: give one of them")
        return {"*": args.node_price}
    instance = _opt(args, "instance")
    if not instance:
        return None
    from fleet_tui.core.fleet import instance_price_usd_per_hour

    return {"*": instance_price_usd_per_hour(instance,
                                             catalog_dirs=_opt(args, "catalog_dir", []) or [])}


def _open(args: argparse.Namespace, default: str):
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.redact import redact_spec

    spec = _opt(args, "source", default)
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    from fleet_tui.core.monitor.sources import open_source, parse_source_spec

    if parse_source_spec(spec).kind == "prometheus":
        if not spec.startswith("prometheus:"):
            raise UserError(f"--source {redact_spec(spec)!r}: use prometheus:URL, e.g. "
                            "prometheus:http://localhost:9090")
        from fleet_tui.core.monitor.sources.prometheus import PrometheusSource

        return PrometheusSource(spec.partition(":")[2], timeout_s=args.timeout,
                                verify_tls=False if args.insecure else None,
                                aggregate_above=aggregate_above(args))
    return open_source(spec)


def _cmd_fleet(args: argparse.Namespace) -> int:
    import asyncio

    from fleet_tui.commands._output import print_json, print_table
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.fleet import read_fleet_view, unavailable_reason
    from fleet_tui.core.redact import redact, redact_spec

    if args.window < 0:
        raise UserError(f"--window {args.window:g}: must be zero or more seconds")
    if args.top < 1:
        raise UserError(f"--top {args.top}: must be at least 1")
    if _opt(args, "source") is None:
        raise UserError("fleet needs --source prometheus:URL (the Prometheus that scrapes the "
                        "nodes' exporters)")
    prices = _prices(args)
    source = _open(args, "auto")

    view = asyncio.run(read_fleet_view(source, window_s=args.window, instance_prices=prices))
    if not view.device_count:
        why = unavailable_reason(view.errors, view.message)
        raise UserError(redact(f"--source {redact_spec(_opt(args, 'source') or '')}: {why}"))
    if args.node is not None:
        try:
            node = view.node(args.node)
        except KeyError as exc:
            raise UserError(f"--node {args.node}: {exc.args[0]}") from None
        if view.aggregated:  # the roll-ups hold no devices: read this node's in full
            view = _node_view(source, node.node, prices)
            node = view.node(node.node)
        if args.json:
            print_json({**view.node_dict(node.node), "aggregated": view.aggregated})
            return 0
        _print_header(view)
        print_table(["gpu", "name", "state", "util", "sm", "mem", "power", "diagnosis", "$/h",
                     "waste $/h"], [_device_row(d, view.age_of(d)) for d in node.devices])
        for d in node.devices:
            if d.diagnoses and d.primary not in ("healthy_compute", "idle"):
                print(f"  gpu {d.index}: {kind_words(d.primary)}: {d.diagnoses[0].get('action', '')}")
        return 0
    if args.json:
        print_json(view.to_dict())
        return 0
    _print_header(view)
    rows = []
    for n in view.nodes[: args.top]:
        rows.append([n.node, str(n.device_count), _pct(n.mean_gpu_util_pct),
                     _pct(n.mean_sm_active_pct), _pct(n.mem_used_pct), f"{n.power_w:.0f}W",
                     n.worst_kind, str(n.idle_devices), str(n.stale_devices),
                     _usd(n.idle_usd_per_hour if n.usd_per_hour is not None else None),
                     _usd(n.waste_usd_per_hour)])
    print_table(["node", "gpus", "util", "sm", "mem", "power", "worst", "idle", "stale",
                 "idle $/h", "waste $/h"], rows)
    if len(view.nodes) > args.top:
        print(f"... {len(view.nodes) - args.top} more nodes (--top N, --json)")
    if view.aggregated and view.offenders:
        print(f"\nleast-used devices (of {len(view.offenders)} the server ranked):")
        print_table(["node", "gpu", "uuid", "util", "state", "$/h"],
                    [[d.node, str(d.index), d.uuid, _pct(d.gpu_util_pct), kind_words(d.primary),
                      _usd(d.usd_per_hour)] for d in view.offenders[: args.top]])
    return 0


def _node_view(source, node: str, prices):
    """One node of an aggregated fleet, its devices read in full (the drill-down)."""
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.fleet import read_node_view
    from fleet_tui.core.monitor.sources.prometheus import PrometheusResponseError
    from fleet_tui.core.redact import redact

    try:
        view = read_node_view(source, node, prices)
        view.node(node)
    except (OSError, PrometheusResponseError, ValueError, KeyError) as exc:
        reason = exc.args[0] if isinstance(exc, KeyError) else exc
        raise UserError(redact(f"--node {node}: its devices not read: {reason}")) from None
    return view


def _usd(v) -> str:
    return "-" if v is None else f"${v:,.2f}"


def _print_header(view) -> None:
    from fleet_tui.core.fleet import PRICE_UNKNOWN

    unknown = f" ({PRICE_UNKNOWN})" if view.usd_per_hour is None and view.idle_devices else ""
    cost = ""
    if view.usd_per_hour is not None:
        cost = (f", ${view.usd_per_hour:,.2f}/h, idle ${view.idle_usd_per_hour:,.2f}/h, "
                f"waste ${view.waste_usd_per_hour or 0:,.2f}/h")
    eff = "N/A" if view.efficiency_pct is None else f"{view.efficiency_pct:.0f}"
    print(f"{view.source}: {view.node_count} nodes, {view.device_count} devices, "
          f"utilization {_pct(view.utilization_pct)}, efficiency {eff}/100, "
          f"{view.idle_devices} idle{unknown}, {view.stale_devices} stale{cost}")
    if view.aggregate is not None:
        agg = view.aggregate
        print(f"  aggregated on the server: more than {agg.threshold} devices (--aggregate-above), "
              f"so Prometheus computed the per-node and per-job roll-ups ({agg.answer_bytes / 1e6:.1f} "
              f"MB); no per-device diagnosis; --node NAME reads one node's devices")
        counts = agg.counts
        print(f"  devices with memory >= 95% full: {counts.get('mem_full', 0)}, idle drawing power: "
              f"{counts.get('idle_powered', 0)}, with an XID error: {counts.get('xid', 0)}, "
              f"power-capped: {counts.get('power_capped', 0)}, thermally throttled: "
              f"{counts.get('thermal', 0)}")
    if view.message and view.message not in view.errors:
        print(f"  {view.message}")
    for err in view.errors[:10]:
        print(f"  ! {err}", file=sys.stdout)


def _device_row(d, age_s: float | None) -> list[str]:
    mem = "N/A" if d.mem_used_pct is None else f"{d.mem_used_pct:.0f}%"
    state = d.state if age_s is None or d.state == "ok" else f"{d.state} ({age_s:.0f}s)"
    conf = "" if d.confidence is None else f" ({d.confidence:.0%})"
    return [str(d.index), d.name[:24], state, _pct(d.gpu_util_pct), _pct(d.sm_active_pct), mem,
            "N/A" if d.power_w is None else f"{d.power_w:.0f}W", kind_words(d.primary) + conf,
            _usd(d.usd_per_hour), _usd(d.waste_usd_per_hour)]


def _cmd_export(args: argparse.Namespace) -> int:
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.exporter import FleetExporter, check_bind
    from fleet_tui.core.fleet import unavailable_reason

    if not args.prometheus:
        raise UserError("export needs a format: --prometheus (serve /metrics for Prometheus)")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: must be 0-65535")
    check_bind(args.bind, args.allow_remote)
    interval = _opt(args, "interval", 2.0)
    if interval < 0.5:
        raise UserError(f"--interval {interval:g}: must be at least 0.5 seconds")
    prices = _prices(args)
    source = _open(args, "auto")
    exporter = FleetExporter(source, instance_prices=prices, interval_s=interval)
    port = exporter.serve(args.bind, args.port)
    host = f"[{args.bind}]" if ":" in args.bind else args.bind
    from fleet_tui.core.redact import redact, redact_spec

    print(f"fleet-tui: serving metrics on http://{host}:{port}/metrics from "
          f"{redact_spec(_opt(args, 'source', 'auto'))} every {interval:g} s (Ctrl-C to stop)",
          file=sys.stderr, flush=True)

    def ready(tick: Tick) -> None:
        """Say once when /metrics holds a first refresh (scripts and tests wait for this line)."""
        view = exporter.collector.view
        if exporter.collector.refreshes == 1 and view is not None:  # a refresh sets the view
            state = ("source read" if exporter.collector.source_up
                     else f"source not read: {unavailable_reason(view.errors, view.message)}")
            print(redact(f"fleet-tui: first refresh published: {view.device_count} devices on "
                         f"{view.node_count} nodes ({state})"), file=sys.stderr, flush=True)

    exporter.engine.subscribe(ready)
    import asyncio

    try:
        asyncio.run(exporter.loop())
    finally:
        exporter.stop()
    return 0
