"""The serving demand flags shared by ``size`` and ``recommend``: --rate | --tokens-per-s, --ttft-ms,
--tpot-ms. Checked by the core (:func:`fleet_tui.core.perf.capacity.demand`), which names the
fields by these dests."""

from __future__ import annotations


def add_demand_args(p, title: str) -> None:
    c = p.add_argument_group(title)
    d = c.add_mutually_exclusive_group()
    d.add_argument("--rate", metavar="R", help="demand in requests per second")
    d.add_argument("--tokens-per-s", metavar="T", help="demand in output tokens per second")
    c.add_argument("--ttft-ms", metavar="MS", help="target time to first token (ms)")
    c.add_argument("--tpot-ms", metavar="MS", help="target time per output token (ms)")


def demand_from_args(args, workload):
    """The checked Demand, or None when no --rate/--tokens-per-s is given."""
    if all(getattr(args, f, None) is None for f in ("rate", "tokens_per_s", "ttft_ms", "tpot_ms")):
        return None  # no plan asked for: the capacity module (~4 ms to import) is not needed
    from fleet_tui.core.perf.capacity import demand

    return demand(getattr(args, "rate", None), getattr(args, "tokens_per_s", None),
                  getattr(args, "ttft_ms", None), getattr(args, "tpot_ms", None), workload=workload)
