"""Recommendation reports shared by the CLI and the app: the offer table, Markdown and JSON.

``fleet-tui recommend --markdown`` / ``--json`` and the app's export write exactly these; the CLI's
plain-text table lays out the same :func:`offer_table` with its own column formatter.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from fleet_tui.core.ranking import UNIT_MONTH, money
from fleet_tui.core.ranking.explanation import explain


def num(x: float | None, fmt: str = "{:,.0f}") -> str:
    """A number for a table cell, "-" when unknown."""
    return "-" if x is None or not math.isfinite(x) else fmt.format(x)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return ("" if v is None else str(v)).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(cell(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(out)


def short_notes(o) -> str:
    """The table's notes column: what to know about an offer at a glance."""
    notes = []
    if not o.fits:
        notes.append("DOES NOT FIT")
    if o.pricing == "spot":
        notes.append("spot")
    if o.reserved_estimated:
        notes.append("est. reserved")
    if o.software_stack != "CUDA":
        notes.append(o.software_stack)
    plan = getattr(o, "plan", None)
    if o.instances > 1 and (plan is None or plan.gpus_per_replica > o.accelerator_count):
        notes.append("multi-node")  # independent replicas on separate instances are not
    if o.flags:
        notes.append("flagged")
    if getattr(o, "reliability", ""):
        notes.append("marketplace")
    if getattr(o, "speed_unknown", False):
        notes.append("speed unknown")
    return ", ".join(notes)


def plan_cells(o) -> list[str]:
    """$ per 1M output tokens, replicas × devices, SLO of an offer ranked by a capacity plan."""
    plan = o.plan
    if plan is None:  # the current setup when it cannot serve the demand
        return ["-", "-", "no"]
    return [money(o.usd_per_million_tokens), f"{plan.replicas}×{plan.gpus_per_replica}",
            "yes" if plan.meets_slo else "no"]


def _offer_row(o, with_current: bool, per_month: bool, with_latency: bool,
               planned: bool = False) -> list[str]:
    row = [
        "now" if o.is_current else str(o.rank),
        (f"{o.instances}× " if o.instances > 1 else "") + o.instance_type,
        o.cloud, o.region + (f" (+{o.regions - 1} more)" if getattr(o, "regions", 1) > 1 else ""),
        o.pricing, o.devices,
        money(o.usd_per_hour), money(o.usd_per_month),
    ]
    if planned:
        row.extend(plan_cells(o))
    elif not per_month:
        row.append(money(o.cost_per_unit))
    if not planned:
        row.append(num(o.tokens_per_s))
    if with_latency:
        row.append(num(o.latency_ms, "{:.1f}"))
    row.append(num(o.headroom_gib, "{:.1f}"))
    if with_current:
        row.append("-" if o.savings_pct is None else f"{o.savings_pct:.0f}%")
        row.append("-" if o.speedup is None else f"{o.speedup:.2f}x")
    row.append(short_notes(o))
    return row


def offer_table(rec) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the offers, the current setup first when there is one. Ranked by a
    capacity plan, $/h and $/month are the plan's whole bill, followed by $ per 1M output tokens,
    replicas × devices per replica and whether the latency targets are met."""
    with_current = rec.current is not None
    planned = getattr(rec, "demand", None) is not None
    per_month = rec.unit == UNIT_MONTH or planned
    headers = ["#", "instance", "cloud", "region", "pricing", "devices", "$/h", "$/month"]
    headers += ["$/1M tok", "replicas", "SLO met"] if planned else [] if per_month else [
        rec.unit.replace("USD", "$")]
    headers += [] if planned else ["tok/s"]
    with_latency = not planned and any(o.latency_ms for o in rec.offers)
    headers += ["ms/token" if rec.workload.gen_len else "ms/pass"] if with_latency else []
    headers += ["free GiB"]
    if with_current:
        headers += ["savings", "speedup"]
    headers.append("notes")
    rows = [_offer_row(o, with_current, per_month, with_latency, planned) for o in rec.offers]
    if rec.current is not None:
        rows.insert(0, _offer_row(rec.current, with_current, per_month, with_latency, planned))
    return headers, rows


def heading(rec) -> str:
    """One line: the workload, the schedule and the unit ranked by."""
    w = rec.workload
    model = getattr(getattr(w, "model", None), "id", None) or f"{getattr(w, 'params', 0):,} params"
    return (f"{w.kind} of {model} ({w.precision}, batch {w.batch}"
            + (f", {w.prompt_len}+{w.gen_len} tokens" if w.gen_len else
               f", {w.seq_len} tokens" if w.seq_len else "")
            + f"); {rec.schedule.label}; ranked by {rec.unit}"
            + (f" ({rec.demand.label()})" if getattr(rec, "demand", None) is not None else ""))


def count_line(rec) -> str:
    return (f"{rec.fitting_offers} fitting offers (instance × region × pricing) from "
            f"{rec.considered_rows} catalog rows"
            + (f", showing {len(rec.offers)}" if len(rec.offers) < rec.fitting_offers else ""))


def render_markdown(rec, explain_lines: Sequence[str] | None = None) -> str:
    """The Markdown report; with ``explain_lines`` a "Why" section follows."""
    headers, rows = offer_table(rec)
    out = [f"**{heading(rec)}**\n",
           markdown_table(headers, rows) if rows else "_no offer fits_",
           f"\n{count_line(rec)}."]
    if rec.offers:
        out.append(f"\nTop choice: {rec.offers[0].reason}.")
    out.extend(f"\n> {n}" for n in rec.notes)
    if explain_lines:
        out.append("\n### Why\n")
        out.extend(f"- {line}" for line in explain_lines)
    return "\n".join(out) + "\n"


def markdown_report(rec) -> str:
    """The Markdown report with its explanation (the app's export)."""
    return render_markdown(rec, explain(rec))


def json_report(rec) -> str:
    """The JSON report (``Recommendation.to_dict()``, documented in :mod:`fleet_tui.core.ranking`)."""
    return json.dumps(rec.to_dict(), indent=2) + "\n"
