"""The serving demand flags shared by ``size`` and ``recommend``: --rate | --tokens-per-s, --ttft-ms,
--tpot-ms, --slo-percentile, --length-mix, --analytic-plan. Checked by the core
(:func:`fleet_tui.core.perf.serving_plan.demand`), which names the fields by these dests."""

from __future__ import annotations

import argparse

from fleet_tui.core.serving_names import DEFAULT_SLO_PERCENTILE, LENGTH_MIX_NAMES


def add_demand_args(p: argparse.ArgumentParser, title: str) -> None:
    c = p.add_argument_group(title)
    d = c.add_mutually_exclusive_group()
    d.add_argument("--rate", metavar="R", help="demand in requests per second (Poisson arrivals)")
    d.add_argument("--tokens-per-s", metavar="T", help="demand in output tokens per second")
    c.add_argument("--ttft-ms", metavar="MS",
                   help="target time to first token (ms), met by --slo-percentile of requests")
    c.add_argument("--tpot-ms", metavar="MS",
                   help="target time per output token (ms), met by --slo-percentile of requests")
    c.add_argument("--slo-percentile", metavar="P",
                   help=f"percentile of requests the targets hold for (default {DEFAULT_SLO_PERCENTILE:g}: p95)")
    c.add_argument("--length-mix", metavar="MIX", choices=("fixed", *LENGTH_MIX_NAMES),
                   help="request lengths: fixed (default: every request --prompt-len + --gen-len) or "
                        + ", ".join(f"{m} (lengths drawn around those means)" for m in LENGTH_MIX_NAMES))
    c.add_argument("--analytic-plan", action="store_true",
                   help="plan from the analytic operating point (mean latency at a replica's top load) "
                        "instead of simulating the engine's scheduler (faster, optimistic under memory or "
                        "prefill pressure)")


def demand_from_args(args: argparse.Namespace, workload):
    """The checked Demand, or None when no --rate/--tokens-per-s is given."""
    fields = ("rate", "tokens_per_s", "ttft_ms", "tpot_ms", "slo_percentile")
    if all(getattr(args, f, None) is None for f in fields):
        return None
    from fleet_tui.core.perf.serving_plan import demand

    return demand(getattr(args, "rate", None), getattr(args, "tokens_per_s", None),
                  getattr(args, "ttft_ms", None), getattr(args, "tpot_ms", None), workload=workload,
                  slo_percentile=getattr(args, "slo_percentile", None),
                  length_mix=getattr(args, "length_mix", None),
                  simulate=not getattr(args, "analytic_plan", False))
