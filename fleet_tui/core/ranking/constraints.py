"""The ranking's inputs checked, normalised and named: filters, limits, the unit of work.

A bad input raises :class:`~fleet_tui.core.errors.FieldError` naming its field (the CLI's argparse
dest: ``top``, ``budget``, ``latency_target_ms``…); the front end renders it as a flag or a label.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable

from fleet_tui.core.errors import FieldError
from fleet_tui.core.pricing import Schedule
from fleet_tui.core.ranking.offers import UNIT_MONTH, UNIT_RUN


def literal(value: object) -> str:
    """``value`` as text that a FieldError template shows verbatim (braces escaped)."""
    return str(value).replace("{", "{{").replace("}", "}}")


def as_set(values, what: str, allowed: Iterable[str], field: str) -> frozenset[str] | None:
    """Comma-separated or repeated names, each one of ``allowed`` (case-insensitive), lower case."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    items = [v.strip() for raw in values for v in str(raw).split(",") if v.strip()]
    if not items:
        return None
    known = {a.lower(): a for a in allowed if a}
    out = set()
    for item in items:
        if item.lower() not in known:
            near = difflib.get_close_matches(item.lower(), list(known), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(known[n] for n in near)}?" if near else ""
            listing = ", ".join(sorted(known.values())) if len(known) <= 40 else f"{len(known)} known"
            raise FieldError(field, f"{{{field}}} " + literal(f"{item!r}: unknown {what}{hint} "
                                                              f"(allowed: {listing})"))
        out.add(item.lower())
    return frozenset(out)


def accelerator_set(values, catalog) -> frozenset[str] | None:
    """Accelerator ids for names as people write them (``H100``, ``'NVIDIA H100 80GB HBM3'``,
    ``l40s``; comma-separated or repeated), or None for no filter; a name the catalog does not
    know is a FieldError on ``accelerators`` with the nearest names."""
    from fleet_tui.core.catalog.models import unknown_message

    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    out = set()
    for item in (v.strip() for raw in values for v in str(raw).split(",")):
        if not item:
            continue
        acc_id = catalog.resolve_accelerator(item)
        if acc_id is None:
            known = [*catalog.accelerators, *(a for acc in catalog.accelerators.values()
                                              for a in acc.aliases)]
            why = unknown_message("accelerator", item, known).replace(
                f"unknown accelerator '{item}'", "unknown accelerator", 1)
            raise FieldError("accelerators", "{accelerators} " + literal(f"{item!r}: {why}"))
        out.add(acc_id)
    return frozenset(out) or None


def _positive_number(x) -> bool:
    return isinstance(x, (int, float)) and x > 0 and math.isfinite(x)


def check_limits(workload, *, pricing: str, spot_allowed: bool, top, latency_target_ms,
                 budget_usd_per_month, training_tokens, max_instances) -> None:
    """Refuse limits that make no sense for ``workload``."""
    if pricing == "spot" and not spot_allowed:
        raise FieldError("pricing", "{pricing} spot contradicts spot_allowed=False ({no_spot})")
    if top is not None and (not isinstance(top, int) or top < 1):
        raise FieldError("top", "{top} must be a whole number >= 1, got " + literal(repr(top)))
    if latency_target_ms is not None:
        if not _positive_number(latency_target_ms):
            raise FieldError("latency_target_ms", "{latency_target_ms} must be a number > 0, got "
                             + literal(repr(latency_target_ms)))
        if workload.kind != "inference":
            raise FieldError("latency_target_ms",
                             "{latency_target_ms} applies to inference workloads only")
    if budget_usd_per_month is not None and not _positive_number(budget_usd_per_month):
        raise FieldError("budget", "{budget} must be a number of USD per month > 0, got "
                         + literal(repr(budget_usd_per_month)))
    if training_tokens is not None:
        if workload.kind == "inference":
            raise FieldError("training_tokens",
                             "{training_tokens} applies to training workloads only")
        if not (training_tokens > 0 and math.isfinite(training_tokens)):
            raise FieldError("training_tokens", "{training_tokens} must be > 0, got "
                             + literal(repr(training_tokens)))
    if not isinstance(max_instances, int) or max_instances < 1:
        raise FieldError("max_instances", "max instances must be a whole number >= 1, got "
                         + literal(repr(max_instances)))


def unit_for(workload, training_tokens) -> tuple[str, str]:
    """(unit kind, unit name): what a unit of the workload's work is."""
    if workload.kind == "inference":
        if workload.serving == "interactive":
            return "month", UNIT_MONTH
        return "tokens", ("USD/1M output tokens" if workload.gen_len else "USD/1M input tokens")
    if training_tokens:
        return "run", UNIT_RUN
    return "tokens", "USD/1M training tokens"


def as_schedule(hours_per_month) -> Schedule:
    if isinstance(hours_per_month, Schedule):
        return hours_per_month
    if hours_per_month is None:
        return Schedule.always_on()
    return Schedule(hours_per_month)


