"""Why a recommendation's top choice wins and why the current setup loses, in sentences.

Reads a :class:`~fleet_tui.core.ranking.Recommendation` only; used by ``recommend --explain``,
the Markdown report, the scenarios' migration reports and the app's explain panel.
"""

from __future__ import annotations

from fleet_tui.core.ranking.formatting import money
from fleet_tui.core.ranking.offers import UNIT_MONTH, RankedOffer, Recommendation


def plan_lines(rec: Recommendation) -> list[str]:
    """With a serving demand: the winner's capacity plan and why devices were dropped."""
    if rec.demand is None:
        return []
    lines = []
    best = rec.best
    if best is not None and best.plan is not None:
        p = best.plan
        lines.append(
            f"Capacity plan for {rec.demand.label()}: {p.replicas} replica(s) of {p.gpus_per_replica} "
            f"device(s) on {best.devices}, {p.concurrency_per_replica} sequences in flight each, "
            f"{p.latency_label}first token {p.ttft_s * 1e3:,.0f} ms, {p.latency_label}{p.tpot_s * 1e3:,.1f} ms per "
            f"token{p.slo_words}, {money(best.usd_per_million_tokens)} per 1M output tokens.")
    by_kind: dict[str, list[str]] = {}
    for acc, kind, why in rec.plan_dropped:
        if kind == "slo_unmet_rows":  # the numbers say how far off each device is
            lines.append(f"Dropped {acc}: {why}.")
        else:
            by_kind.setdefault(kind, []).append(acc)
    if by_kind.get("plan_unknown_rows"):
        lines.append("Dropped for want of a speed estimate (a published peak or bandwidth is missing): "
                     + ", ".join(by_kind["plan_unknown_rows"]) + ".")
    if by_kind.get("not_fitting_rows"):
        lines.append("Dropped, the KV cache holds no whole request: " + ", ".join(by_kind["not_fitting_rows"]) + ".")
    return lines


def explain(rec: Recommendation) -> list[str]:
    """Why the top choice wins and why the current setup loses (memory, speed, price)."""
    best = rec.best
    cur = rec.current
    per = rec.unit.removeprefix("USD").lstrip("/")
    if best is None:
        return _no_fit(rec)
    if best.cost_per_unit is None:  # nothing could be costed per unit of work
        return _unranked(rec, best, per)
    lines = _why_best(rec, best, per)
    if cur is not None:
        lines.extend(_why_not_current(rec, best, cur, per))
    return lines


def _no_fit(rec: Recommendation) -> list[str]:
    """No offer fits: the plan's drops, the skip counters, and whether the current setup fits."""
    lines = plan_lines(rec) if rec.demand is not None else []
    lines.append("No catalog offer fits this workload under the given constraints.")
    for k, v in rec.skipped:
        if v:
            lines.append(f"  {k.replace('_', ' ')}: {v}")
    cur = rec.current
    if cur is not None and not cur.fits:
        lines.append(f"The current setup cannot run it either: {cur.misfit}")
    return lines


def _unranked(rec: Recommendation, best: RankedOffer, per: str) -> list[str]:
    """Offers fit but none has a speed estimate: the cheapest per hour, and the current setup's price."""
    lines = [
        f"No fitting offer has a speed estimate, so none can be ranked by cost per {per}; "
        f"they are listed cheapest per hour first ({best.speed_unknown_reason}).",
        f"Cheapest per hour: {best.label}, {best.devices}: {money(best.usd_per_hour)}/h, "
        f"{money(best.usd_per_month)}/month."]
    cur = rec.current
    if cur is not None:
        lines.append(f"Current: {cur.label}, {cur.devices}: {money(cur.usd_per_hour)}/h, "
                     f"{money(cur.usd_per_month)}/month.")
    return lines


def _why_best(rec: Recommendation, best: RankedOffer, per: str) -> list[str]:
    """The winner's price and why it wins, its plan, the runner-up, the cheapest box per hour,
    the offers left unranked and the winner's risks."""
    lines: list[str] = []
    lines.append(
        f"Best: {best.label}, {best.devices}: {money(best.cost_per_unit)} per "
        f"{per}, {money(best.usd_per_hour)}/h, {money(best.usd_per_month)}/month."
    )
    ranked = rec.fitting_offers - rec.speed_unknown_offers
    why = [f"lowest cost per {per} of {ranked} fitting offers with a speed estimate"
           if ranked != rec.fitting_offers else f"lowest cost per {per} of {rec.fitting_offers} fitting offers"]
    if best.tokens_per_s:
        why.append(f"{best.tokens_per_s:,.0f} tokens/s")
    if best.headroom_gib is not None:
        why.append(f"{best.headroom_gib:.1f} GiB of device memory to spare")
    lines.append("Why it wins: " + ", ".join(why) + ".")
    lines.extend(plan_lines(rec))
    runner = next((o for o in rec.offers[1:] if o.accelerator != best.accelerator
                   or o.instance_type != best.instance_type), None)
    if runner is not None and best.cost_per_unit and runner.cost_per_unit:
        lines.append(
            f"Next different choice: {runner.label} at {money(runner.cost_per_unit)} per {per} "
            f"({runner.cost_per_unit / best.cost_per_unit - 1:+.0%})."
        )
    ch = rec.cheapest_per_hour
    if ch is not None and rec.unit != UNIT_MONTH and ch.instance_type != best.instance_type \
            and best.cost_per_unit and ch.cost_per_unit:
        lines.append(
            f"The cheapest box per hour that fits, {ch.label} at {money(ch.usd_per_hour)}/h, "
            f"costs {ch.cost_per_unit / best.cost_per_unit:.1f}× more per {per}"
            + (f" because it is slower ({ch.tokens_per_s:,.0f} vs {best.tokens_per_s:,.0f} tokens/s)"
               if ch.tokens_per_s and best.tokens_per_s else "") + "."
        )
    if rec.speed_unknown_offers:
        lines.append(
            f"{rec.speed_unknown_offers} fitting offers have no speed estimate (a spec figure the "
            "estimate needs is not published)"
            + (": whether they keep up with the load cannot be checked, so they follow the offers "
               "with one, cheapest per month first." if rec.unit == UNIT_MONTH else
               f" and are not ranked by cost per {per}; they follow the ranked offers, cheapest "
               "per hour first.")
        )
    if best.risks:
        lines.append("Watch out: " + "; ".join(best.risks) + ".")
    return lines


def _why_not_current(rec: Recommendation, best: RankedOffer, cur: RankedOffer, per: str) -> list[str]:
    """The current setup's price and why it loses to ``best`` (or why it is kept)."""
    lines: list[str] = []
    lines.append(f"Current: {cur.label}, {cur.devices}: "
                 f"{money(cur.usd_per_hour)}/h, {money(cur.usd_per_month)}/month.")
    if cur.instance_type == best.instance_type and cur.region == best.region \
            and cur.pricing == best.pricing and cur.instances == best.instances:
        lines.append("The current setup is already the best choice.")
        return lines
    if cur.fits and cur.cost_per_unit is not None and best.cost_per_unit is not None \
            and cur.cost_per_unit <= best.cost_per_unit:
        lines.append(
            f"Keep the current setup: at {money(cur.cost_per_unit)} per {per} it costs "
            f"{1 - cur.cost_per_unit / best.cost_per_unit:.0%} less than the best alternative "
            f"ranked ({cur.pricing} vs {best.pricing})."
        )
        return lines
    if rec.demand is not None and cur.plan is None:
        why = next((n.split("cannot serve the demand: ", 1)[1] for n in rec.notes
                    if "cannot serve the demand: " in n), "")
        lines.append(f"The current setup cannot serve {rec.demand.label()}"
                     + (f": {why}." if why else "."))
        return lines
    if cur.fits and cur.cost_per_unit is None and rec.unit != UNIT_MONTH:
        lines.append(
            f"The current setup cannot be compared per {per}: its speed is unknown "
            f"({cur.speed_unknown_reason or 'no estimate'}). Per hour it costs "
            f"{money(cur.usd_per_hour)} vs {money(best.usd_per_hour)} for the best choice"
            + (f", which runs at {best.tokens_per_s:,.0f} tokens/s" if best.tokens_per_s else "")
            + (f"; it uses {cur.memory_used_pct:.0f}% of its device memory"
               if cur.memory_used_pct is not None else "") + "."
        )
        return lines
    loses: list[str] = []
    if not cur.fits:
        what = "precision" if "precision" in cur.misfit else "memory"
        loses.append(f"{what}: it cannot run the workload ({cur.misfit})")
    else:
        if cur.memory_used_pct is not None and cur.memory_used_pct < 50:
            loses.append(f"memory: it uses only {cur.memory_used_pct:.0f}% of its "
                         f"{cur.devices} memory — paying for capacity it does not need")
        if cur.tokens_per_s and best.tokens_per_s:
            ratio = cur.tokens_per_s / best.tokens_per_s
            if ratio < 0.95:
                loses.append(f"speed: {ratio:.2f}× the best choice's throughput")
            elif ratio > 1.05:
                loses.append(f"speed: {ratio:.1f}× faster, but the extra speed costs more than it "
                             "is worth")
        if cur.cost_per_unit and best.cost_per_unit:
            loses.append(
                f"price: {money(cur.cost_per_unit)} vs {money(best.cost_per_unit)} per {per} "
                f"({cur.cost_per_unit / best.cost_per_unit:.1f}×), {money(cur.usd_per_hour)}/h vs "
                f"{money(best.usd_per_hour)}/h"
            )
    if best.savings_usd_per_month is not None and best.savings_pct is not None:
        loses.append(f"switching saves {money(best.savings_usd_per_month)}/month "
                     f"({best.savings_pct:.0f}%)")
    lines.append("Why the current setup loses: " + "; ".join(loses) + "." if loses
                 else "The current setup costs about the same.")
    return lines
