"""``fleet-tui recommend``: rank every catalog offer that fits a workload.

Workload flags are the ones of ``fleet-tui size`` (shared in ``_workload_args``). The JSON output
(``--json``) is ``Recommendation.to_dict()``, documented key by key in
:mod:`fleet_tui.core.ranking`, plus ``"explain": [str]`` when ``--explain`` is given.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence

from fleet_tui.commands._demand_args import add_demand_args
from fleet_tui.commands._names import given_name
from fleet_tui.commands._numbers import finite_float, whole_number
from fleet_tui.commands._workload_args import add_network_arg, add_workload_args
from fleet_tui.core.pricing import PRICING_CHOICES, Schedule


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "recommend", help="rank catalog offers that fit a workload by cost per unit of work",
        description="Rank every catalog offer (instance × region × pricing) that fits the workload "
                    "by cost per unit of work: $/1M tokens for batch inference, $/run or $/1M "
                    "training tokens for training, $/month for always-on interactive serving. "
                    "With a serving demand (--rate or --tokens-per-s, optional --ttft-ms/--tpot-ms) "
                    "it ranks by the monthly bill of the capacity plan that serves it within the targets.",
    )
    add_workload_args(p)
    add_demand_args(p, "serving demand (inference with --prompt-len/--gen-len): rank by the capacity plan")
    cur = p.add_argument_group("current setup (for savings and speedup)")
    cur.add_argument("--current", type=given_name, metavar="INSTANCE",
                     help="instance type running it today, e.g. p5.48xlarge")
    cur.add_argument("--current-count", type=whole_number, default=1, metavar="N",
                     help="how many of --current (default 1)")
    cur.add_argument("--current-region", type=given_name, metavar="REGION",
                     help="region of --current (default: its cheapest region)")
    cur.add_argument("--current-pricing", choices=PRICING_CHOICES[:-1], metavar="PRICING",
                     help="how --current is paid (default: --pricing, or on-demand for 'any')")
    con = p.add_argument_group("constraints")
    con.add_argument("--cloud", action="append", type=given_name, metavar="CLOUD",
                     help="allowed cloud(s): repeat or comma-separate (aws,gcp,azure,...)")
    con.add_argument("--region", action="append", type=given_name, metavar="REGION", help="allowed region(s)")
    con.add_argument("--gpu", action="append", type=given_name, dest="accelerators",
                     metavar="ACCELERATOR",
                     help="only offers of these accelerator(s), as you write them: H100, h100_sxm, "
                          "'NVIDIA H100 80GB HBM3', L40S (comma-separated or repeated)")
    con.add_argument("--vendor", action="append", type=given_name, metavar="VENDOR",
                     help="allowed accelerator vendor(s): NVIDIA, AMD, AWS, Intel, Google, ...")
    con.add_argument("--stack", action="append", type=given_name, metavar="STACK",
                     help="allowed software stack(s): CUDA, ROCm, Neuron, SynapseAI, XLA")
    con.add_argument("--pricing", default="on-demand", metavar="PRICING",
                     help="on-demand (default), spot, reserved-1y, reserved-3y or any")
    con.add_argument("--no-spot", action="store_true", help="never rank spot offers (with --pricing any)")
    sched = con.add_mutually_exclusive_group()
    sched.add_argument("--hours-per-month", type=finite_float, metavar="H",
                       help="hours the instance runs per month (default 730 = always on)")
    sched.add_argument("--schedule", metavar="HxD",
                       help="hours/day x days/month, e.g. 8x22 for a dev box, or always-on")
    con.add_argument("--latency-target-ms", type=finite_float, metavar="MS",
                     help="inference: max time per generated token (or per forward pass)")
    con.add_argument("--budget", type=finite_float, metavar="USD", help="max USD per month")
    con.add_argument("--training-tokens", metavar="N",
                     help="training: tokens of the whole run (e.g. 50M, 20B, 1e9); ranks by USD per run")
    con.add_argument("--checkpoint-interval-h", type=finite_float, default=None, metavar="H",
                     help="spot: hours between checkpoints (default 1)")
    con.add_argument("--max-instances", type=whole_number, default=None, metavar="N",
                     help="most instances of an 8+-device type one offer may take (default 16)")
    add_network_arg(con)
    con.add_argument("--marketplace-multi-node", action="store_true",
                     help="let marketplace boxes (vast, runpod: unknown network between hosts) "
                          "be taken several at a time")
    out = p.add_argument_group("output")
    out.add_argument("--top", type=whole_number, default=10, metavar="K", help="offers shown (default 10)")
    out.add_argument("--regions", action="store_true",
                     help="one row per region (default: one row per instance type, its cheapest region)")
    out.add_argument("--explain", action="store_true",
                     help="say why the top choice wins and why the current setup loses")
    fmt = out.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON on stdout")
    fmt.add_argument("--markdown", action="store_true", help="Markdown table")
    p.set_defaults(func=handler)


def _split(values: Iterable[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for raw in values for v in raw.split(",") if v.strip()]


def _schedule(args: argparse.Namespace) -> Schedule:
    """--schedule, else --hours-per-month, else always on; a bad value names its flag."""
    from fleet_tui.core.errors import UserError

    if args.schedule is not None:
        try:
            return Schedule.parse(args.schedule)
        except UserError as exc:
            raise UserError(f"--schedule {args.schedule}: {exc}") from None
    if args.hours_per_month is not None:
        try:
            return Schedule(args.hours_per_month)
        except UserError as exc:
            raise UserError(f"--hours-per-month: {exc}") from None
    return Schedule.always_on()


def handler(args: argparse.Namespace) -> int:
    from fleet_tui.commands._catalog_args import load_user_catalog
    from fleet_tui.commands._demand_args import demand_from_args
    from fleet_tui.commands._output import print_json
    from fleet_tui.commands._workload_args import workload_from_args
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.pricing import SpotAssumptions, check_pricing
    from fleet_tui.core.ranking import DEFAULT_MAX_INSTANCES, recommend
    from fleet_tui.core.ranking.explanation import explain
    from fleet_tui.core.workload import parse_run_tokens

    pricing = args.pricing.strip().lower()
    try:
        check_pricing(pricing, allow_any=True)
    except UserError:
        raise UserError(f"--pricing {args.pricing!r}: allowed: {', '.join(PRICING_CHOICES)}") from None
    if args.top < 1:
        raise UserError(f"--top must be >= 1, got {args.top}")
    if args.current_count < 1:
        raise UserError(f"--current-count must be >= 1, got {args.current_count}")
    if args.current is None and (args.current_region or args.current_pricing or args.current_count != 1):
        raise UserError("--current-count/--current-region/--current-pricing need --current INSTANCE")
    for flag, value in (("--hours-per-month", args.hours_per_month), ("--budget", args.budget),
                        ("--latency-target-ms", args.latency_target_ms),
                        ("--checkpoint-interval-h", args.checkpoint_interval_h)):
        if value is not None and not math.isfinite(value):
            raise UserError(f"{flag} must be a finite number, got {value}")
    schedule = _schedule(args)
    spot = None
    if args.checkpoint_interval_h is not None:
        spot = SpotAssumptions(checkpoint_interval_h=args.checkpoint_interval_h)

    training_tokens = (parse_run_tokens(args.training_tokens, "training_tokens")
                       if args.training_tokens is not None else None)
    catalog = load_user_catalog(getattr(args, "catalog_dir", None))
    workload = workload_from_args(args, catalog)
    demand = demand_from_args(args, workload)
    rec = recommend(
        workload, catalog,
        current=(args.current, args.current_count) if args.current else None,
        current_region=args.current_region, current_pricing=args.current_pricing,
        clouds=_split(args.cloud), regions=_split(args.region), vendors=_split(args.vendor),
        stacks=_split(args.stack), accelerators=_split(args.accelerators), pricing=pricing,
        spot_allowed=not args.no_spot,
        hours_per_month=schedule, latency_target_ms=args.latency_target_ms,
        budget_usd_per_month=args.budget, top=args.top, training_tokens=training_tokens,
        spot=spot, max_instances=args.max_instances or DEFAULT_MAX_INSTANCES,
        expand_regions=args.regions, marketplace_multi_node=args.marketplace_multi_node,
        demand=demand, network=args.network,
    )
    lines = explain(rec) if args.explain else None
    top_plan = None
    if args.explain and rec.offers and demand is None:
        # the top offer as `size` answers for its devices: one report, the same in every front end
        from fleet_tui.core.plan import PlanRequest, plan_offer

        top_plan = plan_offer(rec.offers[0], PlanRequest(workload, training_tokens=training_tokens,
                                                         hours_per_month=schedule.hours_per_month), catalog)
        lines = list(lines or []) + _plan_lines(top_plan)
    if args.json:
        data = rec.to_dict()
        if lines is not None:
            data["explain"] = lines
        if top_plan is not None:
            from fleet_tui.commands._workload_args import flag

            data["top_plan"] = top_plan.to_dict(flag)
        print_json(data)
    else:
        sys.stdout.write(render_recommendation(rec, markdown=args.markdown, explain_lines=lines))
    return 0


def _plan_lines(r) -> list[str]:
    """The top offer's plan report in two sentences (the verdict, its layout, speed and cost)."""
    v = r.verdict
    layout = f" as {r.layout}" if r.layout else ""
    head = f"Planned as `size` plans it: {v.headline} on {r.gpus}× {r.accelerator}{layout}: {v.message}"
    out = [head]
    if r.speed is not None and r.speed.tokens_per_s is not None:
        out.append(f"  speed {r.speed.tokens_per_s:,.0f} tokens/s ({r.speed.phase}, {r.speed.bound}-bound)"
                   + (f"; {r.cost.instance.instance_type} at ${r.cost.usd_per_hour:,.2f}/h" if r.cost else ""))
    return out


# ------------------------------------------------------------------------------------------------
# Rendering (shared with `scenarios`): Markdown from the core's report, plain text laid out here


def render_recommendation(rec, *, markdown: bool = False,
                          explain_lines: Sequence[str] | None = None) -> str:
    from fleet_tui.commands._output import format_table
    from fleet_tui.core.ranking import export as report

    if markdown:
        return report.render_markdown(rec, explain_lines)
    headers, rows = report.offer_table(rec)
    out = [report.heading(rec),
           format_table([h.upper() for h in headers], rows) if rows else "no offer fits",
           report.count_line(rec) + "."]
    if rec.offers:
        out.append(f"Top choice: {rec.offers[0].reason}.")
    out.extend(f"note: {n}" for n in rec.notes)
    if explain_lines:
        out.append("")
        out.extend(explain_lines)
    return "\n".join(out) + "\n"
