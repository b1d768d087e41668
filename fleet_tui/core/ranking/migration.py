"""Migration reports: the current setup against one target for the same workload (savings,
speedup, memory check, risks and how hard the move is). ``fleet-tui scenarios`` prints one per
scenario; why the top choice wins is ``fleet_tui.core.ranking.explanation``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fleet_tui.core.pricing import HOURS_PER_MONTH, Schedule
from fleet_tui.core.ranking.costs import savings_against, speedup
from fleet_tui.core.ranking.current import evaluate_setup
from fleet_tui.core.ranking.offers import STACK_MIGRATION_NOTE, RankedOffer, json_number
from fleet_tui.core.records import record


@record
class MigrationReport:
    """The old analyzer's migration report: current vs target for one workload."""

    current: RankedOffer
    target: RankedOffer
    savings_usd_per_month: float | None
    savings_pct: float | None
    speedup: float | None
    memory_check: str
    risks: tuple[str, ...]
    complexity: str  # low | medium | high
    complexity_reasons: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "current": self.current.to_dict(),
            "target": self.target.to_dict(),
            "savings_usd_per_month": _opt(self.savings_usd_per_month),
            "savings_pct": _opt(self.savings_pct),
            "speedup": _opt(self.speedup),
            "memory_check": self.memory_check,
            "risks": list(self.risks),
            "complexity": self.complexity,
            "complexity_reasons": list(self.complexity_reasons),
            "notes": list(self.notes),
        }


def _opt(x: float | None) -> float | None:
    return None if x is None else json_number(x)


def _gib(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} GiB"


def migration_complexity(current: RankedOffer, target: RankedOffer) -> tuple[str, tuple[str, ...]]:
    reasons = []
    level = 0
    if target.software_stack != current.software_stack:
        reasons.append(f"software stack {current.software_stack} → {target.software_stack}")
        level = 2
    if target.cloud != current.cloud:
        reasons.append(f"cloud {current.cloud} → {target.cloud} (data, IAM, networking)")
        level = max(level, 1)
    if target.instances > 1 and current.instances <= 1:
        reasons.append("single node → multi-node")
        level = max(level, 1)
    if target.pricing == "spot" and current.pricing != "spot":
        reasons.append("spot capacity: needs checkpoint/restart handling")
        level = max(level, 1)
    if not reasons:
        reasons.append("same cloud and software stack")
    return ("low", "medium", "high")[level], tuple(reasons)


def migration_report(
    workload,
    catalog,
    current: tuple[str, int],
    target: tuple[str, int] | str,
    *,
    current_region: str | None = None,
    target_region: str | None = None,
    pricing: str = "on-demand",
    hours_per_month: float | Schedule | None = HOURS_PER_MONTH,
    training_tokens: float | None = None,
) -> MigrationReport:
    """Compare the current setup with one target (instance type, count), both sized and priced."""
    if isinstance(target, str):
        target = (target, 1)
    cur, cur_notes = evaluate_setup(workload, catalog, current, region=current_region, pricing=pricing,
                                    hours_per_month=hours_per_month, training_tokens=training_tokens)
    tgt, tgt_notes = evaluate_setup(workload, catalog, target, region=target_region, pricing=pricing,
                                    hours_per_month=hours_per_month, training_tokens=training_tokens)
    return report_between(cur, tgt, notes=tuple(dict.fromkeys(cur_notes + tgt_notes)))


def report_between(cur: RankedOffer, tgt: RankedOffer, *, notes: Sequence[str] = ()) -> MigrationReport:
    savings_pct, savings_usd = savings_against(cur, tgt.cost_per_unit) if tgt.fits else (None, None)
    faster = speedup(cur.tokens_per_s, tgt.tokens_per_s)
    if tgt.fits and cur.fits:
        mem = (f"both fit: current {_gib(cur.headroom_gib)} free/device, target "
               f"{_gib(tgt.headroom_gib)} free/device")
    elif tgt.fits:
        mem = f"target fits ({_gib(tgt.headroom_gib)} free/device); current does not: {cur.misfit}"
    else:
        mem = f"target does NOT fit: {tgt.misfit}"
    level, reasons = migration_complexity(cur, tgt)
    risks = list(tgt.risks)
    if tgt.software_stack != cur.software_stack:
        risks.insert(0, f"software stack migration {cur.software_stack} → "
                        f"{STACK_MIGRATION_NOTE.get(tgt.software_stack, tgt.software_stack)}")
    tgt = replace(tgt, is_current=False, savings_pct=savings_pct,
                  savings_usd_per_month=savings_usd, speedup=faster)
    return MigrationReport(
        current=cur, target=tgt, savings_usd_per_month=savings_usd, savings_pct=savings_pct,
        speedup=faster, memory_check=mem, risks=tuple(dict.fromkeys(risks)), complexity=level,
        complexity_reasons=reasons, notes=tuple(notes),
    )
