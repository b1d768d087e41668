"""``fleet-tui plan``: the cheapest reserved (1 y / 3 y) + on-demand + spot mix for a demand profile.
Engine imports happen inside the handler."""

from __future__ import annotations

import argparse

from fleet_tui.commands._names import given_name
from fleet_tui.commands._numbers import finite_float, whole_number

_S = argparse.SUPPRESS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan", help="cheapest mix of reserved 1y/3y, on-demand and spot for a demand profile",
        description="From hourly device demand (--demand FILE: JSON list, CSV with a 'devices' "
                    "column, or one number per line; --db: a 'record' history; or --source "
                    "prometheus:URL: a fleet's history; both count the devices that worked each "
                    "hour) and an instance's prices (--instance TYPE from "
                    "the catalog, or --on-demand-price and friends), find the cheapest mix of "
                    "reserved, on-demand and spot capacity, each commitment's break-even "
                    "utilization, and the spot interruption risk.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--demand", metavar="FILE",
                     help="hourly device counts (a regular file up to 16 MiB: at most 87,840 hours "
                          "of at most 10^6 devices)")
    src.add_argument("--db", metavar="DB", help="a 'fleet-tui record' history database")
    src.add_argument("--source", default=None, metavar="prometheus:URL",
                     help="a fleet's Prometheus: the devices busy each hour over --days")
    p.add_argument("--days", type=finite_float, default=30.0, metavar="D",
                   help="with --source: how much history to plan from (default 30)")
    p.add_argument("--instance", type=given_name, default=_S, metavar="TYPE",
                   help="catalog instance type (its cheapest region's prices are used)")
    p.add_argument("--region", default=None, help="with --instance: this region's prices")
    p.add_argument("--catalog-dir", action="append", default=_S, metavar="DIR",
                   help="extra catalog directory (repeatable)")
    p.add_argument("--on-demand-price", type=finite_float, default=None, metavar="USD_PER_HOUR",
                   help="instead of --instance: on-demand price per instance-hour")
    p.add_argument("--reserved-1y-price", type=finite_float, default=None, metavar="USD_PER_HOUR")
    p.add_argument("--reserved-3y-price", type=finite_float, default=None, metavar="USD_PER_HOUR")
    p.add_argument("--spot-price", type=finite_float, default=None, metavar="USD_PER_HOUR")
    p.add_argument("--devices-per-instance", type=whole_number, default=None, metavar="N",
                   help="devices in one instance (default: the instance's, or 1)")
    p.add_argument("--cloud", default=None, help="cloud for the spot interruption rate "
                                                 "(default: the instance's, else other)")
    p.add_argument("--spot-share", type=finite_float, default=0.0, metavar="F",
                   help="share (0-1) of all the instance-hours (the work) that may run on spot "
                        "(default 0)")
    p.add_argument("--min-history-days", type=finite_float, default=7.0, metavar="D",
                   help="no commitment is recommended from less demand history than this "
                        "(default 7 days)")
    p.add_argument("--terms", default="reserved-3y,reserved-1y", metavar="LIST",
                   help="commitments allowed (default reserved-3y,reserved-1y)")
    p.add_argument("--json", action="store_true", help="the plan as JSON")
    p.set_defaults(func=_cmd_plan)


def _prices(args: argparse.Namespace):
    from fleet_tui.core.cluster.portfolio import Prices
    from fleet_tui.core.errors import UserError

    instance = getattr(args, "instance", None)
    if instance and args.on_demand_price is not None:
        raise UserError("--instance and --on-demand-price both set prices: give one of them")
    if instance:
        from fleet_tui.commands._catalog_args import load_user_catalog

        offers = load_user_catalog(getattr(args, "catalog_dir", None)).find_instance(
            instance, args.region)
        priced = [(price, o) for o in offers if (price := o.price("on-demand")) is not None]
        if not priced:
            raise UserError(f"--instance {instance}: the catalog lists no on-demand price for it")
        _, best = min(priced, key=lambda po: po[0])
        prices = Prices.from_instance(best)
        if args.devices_per_instance:
            prices = Prices(**{**_fields(prices), "devices_per_instance": args.devices_per_instance})
        return prices, f"{best.cloud} {best.instance_type} {best.region}"
    if args.on_demand_price is None:
        raise UserError("plan needs prices: --instance TYPE, or --on-demand-price (with any of "
                        "--reserved-1y-price, --reserved-3y-price, --spot-price)")
    for flag, v in (("--on-demand-price", args.on_demand_price),
                    ("--reserved-1y-price", args.reserved_1y_price),
                    ("--reserved-3y-price", args.reserved_3y_price), ("--spot-price", args.spot_price)):
        if v is not None and v < 0:
            raise UserError(f"{flag} {v:g}: must be zero or more (USD per instance-hour)")
    return Prices(on_demand=args.on_demand_price, reserved_1y=args.reserved_1y_price,
                  reserved_3y=args.reserved_3y_price, spot=args.spot_price,
                  cloud=args.cloud or "other",
                  devices_per_instance=args.devices_per_instance or 1), "given prices"


def _fields(prices) -> dict:
    return {f: getattr(prices, f) for f in prices.__dataclass_fields__}


def _cmd_plan(args: argparse.Namespace) -> int:
    from fleet_tui.commands._output import print_json, print_table
    from fleet_tui.core.cluster.portfolio import demand_from_rows, plan_portfolio, read_demand
    from fleet_tui.core.errors import UserError

    if args.demand is not None:
        demand = read_demand(args.demand)
    elif args.source is not None:
        demand = _prometheus_demand(args)
    else:
        from fleet_tui.core.monitor.recorder import read_rows

        rows, _ = read_rows(args.db, columns=("gpu_util_pct",))
        demand = demand_from_rows(rows)
        if not demand:
            raise UserError(f"--db {args.db}: no recorded samples")
    prices, label = _prices(args)
    if args.cloud and getattr(args, "instance", None):
        prices = type(prices)(**{**_fields(prices), "cloud": args.cloud})
    terms = [t.strip() for t in args.terms.split(",") if t.strip()]
    doc = plan_portfolio(demand, prices, max_spot_share=args.spot_share, terms=terms,
                         min_history_days=args.min_history_days)
    doc = {"prices_from": label, **doc}
    if args.json:
        print_json(doc)
        return 0
    plan = doc["plan"]
    print(f"{doc['hours']} h of demand (peak {doc['peak_devices']:g}, mean {doc['mean_devices']:g} "
          f"devices), {label}, {doc['devices_per_instance']} devices per instance")
    print(f"plan: {plan['reserved_instances']} × {plan['reserved_term'] or 'no reservation'}, "
          f"{plan['on_demand_instance_hours']:g} on-demand and {plan['spot_instance_hours']:g} spot "
          f"instance-hours")
    if plan["no_commitment_reason"]:
        print(f"  {plan['no_commitment_reason']}")
    print(f"cost ${doc['usd_total']:,.2f} (${doc['usd_per_month']:,.2f}/month) vs "
          f"${doc['all_on_demand_usd']:,.2f} all on-demand: {doc['savings_pct']:.1f}% saved "
          "(assuming this profile repeats over the commitment's term)")
    print_table(["commitment", "instances", "$/h", "break-even util", "vs flexible", "device util"],
                [[c["term"], str(c["instances"]),
                  f"${c['usd_per_instance_hour']:,.2f}" + (" (est.)" if c["estimated"] else ""),
                  f"{c['break_even_utilization_pct']:.0f}%",
                  "-" if c["break_even_vs_flexible_pct"] is None else f"{c['break_even_vs_flexible_pct']:.0f}%",
                  "-" if c["device_utilization_pct"] is None else f"{c['device_utilization_pct']:.0f}%"]
                 for c in doc["commitments"]])
    if doc["prices_estimated"]:
        print("(est.): the catalog derives these reserved prices from on-demand by its standard "
              "commitment discount; check the cloud's published price before committing")
    for c in doc["sensitivity"]:
        if c["usd_vs_plan"]:
            which = "next" if c["reserved_instances"] > plan["reserved_instances"] else "previous"
            print(f"{which} reservation: {c['reserved_instances']} × {c['term']} would cost "
                  f"${c['usd_total']:,.2f} ({c['usd_vs_plan']:+,.2f})")
    if doc["spot"] and plan["spot_instance_hours"]:
        s = doc["spot"]
        print(f"spot risk: {s['expected_interruptions_per_month']:g} interruptions a month expected, "
              f"{100 * s['p_interrupted_per_instance_day']:.2f}% chance per instance-day, "
              f"{s['overhead_pct']:.2f}% of spot time lost")
    return 0


def _prometheus_demand(args: argparse.Namespace) -> list[float]:
    import time

    from fleet_tui.core.cluster.promdemand import read_demand as read_prometheus_demand
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.sources import open_source, parse_source_spec

    if parse_source_spec(args.source).kind != "prometheus":
        raise UserError(f"--source {args.source}: plan reads a fleet's history from "
                        "prometheus:URL only")
    demand = read_prometheus_demand(open_source(args.source), days=args.days, now=time.time())
    if not demand:
        raise UserError(f"--source {args.source}: no GPU utilization series in the last "
                        f"{args.days:g} days")
    return demand
