"""Why an offer ranks where it does: its risks, its catalog flags and its one-line reason, and the
:class:`OfferBuilder` that turns a ranked :class:`Candidate` into a :class:`RankedOffer`."""

from __future__ import annotations

import math
from typing import Any

from fleet_tui.core.interconnects import marketplace_tier
from fleet_tui.core.pricing import (
    HOURS_PER_MONTH,
    RESERVED_OPTIONS,
    Schedule,
    SpotAssumptions,
    break_even_utilization,
    cost_per_million_tokens,
    spot_overhead,
    spot_rate_source,
)
from fleet_tui.core.ranking.costs import savings_against, speedup
from fleet_tui.core.ranking.formatting import devices_label, money
from fleet_tui.core.ranking.offers import (
    STACK_MIGRATION_NOTE,
    UNIT_MONTH,
    UNIT_PLAN,
    Candidate,
    RankedOffer,
)
from fleet_tui.core.ranking.placement import GIB, Placement

LOW_HEADROOM_FRACTION = 0.05  # under 5% of device memory free is a risk worth naming


def offer_risks(inst, acc, placement: Placement, p: str, *, current_stack: str,
                overhead: float, spot: SpotAssumptions) -> tuple[str, ...]:
    risks = []
    if p == "spot":
        rate = spot.rate_for(inst.cloud)
        risks.append(
            f"spot: ~{rate * HOURS_PER_MONTH:.2g} interruptions/month "
            f"({spot_rate_source(inst.cloud)}), {overhead:.1%} of time lost to restarts"
        )
    if p in RESERVED_OPTIONS:
        term = "1-year" if p == "reserved-1y" else "3-year"
        risks.append(f"{term} commitment: billed every hour of the term")
        if getattr(inst, "reserved_estimated", False):
            risks.append("reserved price estimated from a typical discount, not published")
    if acc.software_stack != current_stack:
        risks.append(f"software stack migration {current_stack} → "
                     f"{STACK_MIGRATION_NOTE.get(acc.software_stack, acc.software_stack)}")
    tier = marketplace_tier(inst.cloud)
    if tier is not None:
        risks.append(f"marketplace: {tier.reliability}")
    if placement.instances > 1:
        ctx = getattr(placement, "context", None)
        fabric = getattr(ctx, "fabric", None)
        net = (f"{fabric.inter_link}, {fabric.inter_gbps:g} Gbit/s" if fabric is not None and fabric.inter_known
               else "an unknown network, assumed slow")
        risks.append(f"multi-node: {placement.instances} instances over {net}")
    head = placement.headroom_gib
    cap = placement.capacity_bytes
    if head is not None and cap and head * GIB < LOW_HEADROOM_FRACTION * cap:
        risks.append(f"tight memory: {head:.1f} GiB free per device")
    for flag in applicable_flags(inst.flags, p):
        risks.append(f"catalog flag: {flag}")
    return tuple(risks)


_FLAG_TERMS = {"on-demand": "on-demand", "spot": "spot", "reserved-1y": "reserved",
               "reserved-3y": "reserved"}


def applicable_flags(flags, pricing: str) -> tuple[str, ...]:
    """The row's flags that concern this pricing option.

    A flag naming pricing options ("zero-price: spot 0 in the source (dropped)", "price-outlier:
    on-demand 1.54x the median") concerns only those; a flag naming none (a memory unit fix, a
    filled-in accelerator) concerns every offer of the row. The full list stays on the Instance.
    """
    if not flags:
        return ()
    term = _FLAG_TERMS[pricing]
    out = []
    for flag in flags:
        low = flag.lower()
        named = [t for t in ("on-demand", "spot", "reserved") if t in low]
        if not named or term in named:
            out.append(flag)
    return tuple(out)


def reason_parts(acc, inst, placement: Placement, p: str, flags, scale: int = 1,
                 planned: bool = False) -> tuple[str, str, str]:
    """(devices, speed and memory, trailing notes) of an offer's one-line reason (with a capacity
    plan the speed is the plan's, said after)."""
    mid = []
    if getattr(placement, "layout", ""):
        mid.append(placement.layout)
    if not planned and placement.tokens_per_s:
        mid.append(f"{placement.tokens_per_s:,.0f} tok/s")
    if placement.headroom_gib is not None:
        mid.append(f"{placement.headroom_gib:.1f} GiB free/device")
    tail = []
    if p == "spot":
        tail.append("spot")
    if acc.software_stack != "CUDA":
        tail.append(f"{acc.software_stack} stack")
    if flags:
        tail.append("catalog flag: " + "; ".join(flags))  # price or data notes from the import
    return (devices_label(inst.accelerator_count, acc.id, placement.instances * scale), ", ".join(mid),
            ", ".join(tail))


def plan_text(plan, usd_per_million: float | None) -> str:
    """The capacity plan of an offer in a few words (its reason, the explanation)."""
    money_part = f", {money(usd_per_million)} per 1M output tokens" if usd_per_million is not None else ""
    pct = plan.latency_label
    return (f"plan: {plan.replicas} replica(s) × {plan.gpus_per_replica} device(s), "
            f"{plan.concurrency_per_replica} in flight each, {pct}first token {plan.ttft_s * 1e3:,.0f} ms, "
            f"{pct}{plan.tpot_s * 1e3:,.1f} ms/token{plan.slo_words}{money_part}")


_UNSET: Any = object()


class OfferBuilder:
    """Builds :class:`RankedOffer` objects; text shared by many offers is built once."""

    def __init__(self, *, unit: str, current, current_stack: str, spot: SpotAssumptions,
                 stateless: bool, schedule: Schedule):
        self.unit = unit
        self.hours = schedule.hours_per_month
        self.per_month = unit in (UNIT_MONTH, UNIT_PLAN)  # costed without a speed per unit
        self.per = unit.removeprefix("USD/")
        self.current = current
        self.current_stack = current_stack
        self.spot = spot
        self.stateless = stateless
        self.schedule = schedule
        self._risks: dict[tuple, tuple[str, ...]] = {}
        self._text: dict[tuple, tuple[str, str, str]] = {}
        self._overhead: dict[str, float] = {}

    def __call__(self, rank: int, c: Candidate, *, is_current: bool = False,
                 cost_per_unit: Any = _UNSET) -> RankedOffer:
        inst, p, price, placement, acc = c.instance, c.pricing, c.price, c.placement, c.acc
        eff = c.month / self.hours if self.hours else math.nan
        speed = placement.speed
        speed_unknown = bool(speed.note) or (placement.fits and speed.tokens_per_s is None)
        costed = self.per_month or speed.unit_cost_per_usd_hour is not None
        cpu = c.key if costed else None
        if cost_per_unit is not _UNSET:
            cpu = cost_per_unit
        cloud = inst.cloud
        overhead = self._overhead.get(cloud) if p == "spot" else 0.0
        if overhead is None:
            overhead = self._overhead[cloud] = spot_overhead(p, cloud, self.spot,
                                                             stateless=self.stateless)
        break_even = None
        estimated = False
        if p in RESERVED_OPTIONS:
            od = inst.price("on-demand")
            if od:
                break_even = break_even_utilization(price, od)
            estimated = bool(getattr(inst, "reserved_estimated", False))
        tokens_per_s = speed.tokens_per_s
        if c.plan is not None and c.plan.replica_rps:  # what its replicas sustain within the targets
            tokens_per_s = c.plan.replica_rps * c.plan.gen_tokens * c.plan.replicas
        savings_pct = savings_usd = faster = None
        current = self.current
        if current is not None and not is_current:
            savings_pct, savings_usd = savings_against(current, cpu)
            faster = speedup(current.tokens_per_s, tokens_per_s)
        flags = applicable_flags(inst.flags, p)
        rkey = (placement, p, cloud, flags, estimated, acc.id)
        risks = self._risks.get(rkey)
        if risks is None:
            risks = self._risks[rkey] = offer_risks(
                inst, acc, placement, p, current_stack=self.current_stack, overhead=overhead,
                spot=self.spot)
        plan = c.plan
        per_million = None
        if plan is not None and math.isfinite(eff):
            per_million = cost_per_million_tokens(eff, plan.output_tokens_per_s)
        if is_current:
            reason = "current setup" + ("" if placement.fits else
                                        f": does not fit ({placement.why_not})")
        else:
            reason = self._reason(inst, acc, placement, p, flags, cpu, costed, savings_pct,
                                  break_even, c.scale, plan is not None)
        if plan is not None:
            reason += "; " + plan_text(plan, per_million)
        instances = placement.instances * c.scale
        return RankedOffer(
            rank=rank, instance=inst, cloud=cloud, instance_type=inst.instance_type,
            region=inst.region, accelerator=acc.id, vendor=acc.vendor,
            software_stack=acc.software_stack, accelerator_count=inst.accelerator_count,
            instances=instances, gpus=placement.gpus * c.scale, sharding=placement.sharding,
            pricing=p, list_usd_per_hour=price, usd_per_hour=eff, usd_per_month=c.month,
            usd_per_gpu_hour=eff / (inst.accelerator_count * instances),
            cost_per_unit=cpu, unit=self.unit, tokens_per_s=tokens_per_s,
            latency_ms=speed.latency_ms, headroom_gib=placement.headroom_gib,
            memory_used_pct=placement.memory_used_pct, fits=placement.fits,
            savings_usd_per_month=savings_usd, savings_pct=savings_pct, speedup=faster,
            spot_overhead_pct=100.0 * overhead, reserved_estimated=estimated,
            break_even_utilization=break_even, risks=risks, flags=flags, reason=reason,
            is_current=is_current, misfit=placement.why_not, speed_unknown=speed_unknown,
            speed_unknown_reason=(speed.note or "no speed estimate") if speed_unknown else "",
            layout=getattr(placement, "layout", ""), regions=c.regions, region_price_range=c.price_range,
            reliability=self._reliability(cloud), plan=plan, usd_per_million_tokens=per_million,
            fit=placement.fit, throughput=speed.throughput,
        )

    def _reliability(self, cloud: str) -> str:
        tier = marketplace_tier(cloud)
        return tier.reliability if tier else ""

    def _reason(self, inst, acc, placement, p, flags, cpu, costed, savings_pct,
                break_even, scale: int = 1, planned: bool = False) -> str:
        tkey = (placement, acc.id, inst.accelerator_count, p, flags, scale, planned)
        text = self._text.get(tkey)
        if text is None:
            text = self._text[tkey] = reason_parts(acc, inst, placement, p, flags, scale, planned)
        parts = [text[0], f"{money(cpu)} per {self.per}" if costed else
                 f"speed unknown ({placement.speed_note}), so not ranked by cost per {self.per}"]
        if text[1]:
            parts.append(text[1])
        if savings_pct is not None:
            parts.append(f"{savings_pct:.0f}% cheaper than current" if savings_pct >= 0
                         else f"{-savings_pct:.0f}% dearer than current")
        if break_even:
            side = "above" if self.schedule.utilization >= break_even else "below"
            parts.append(f"use {side} the {break_even:.0%} break-even")
        if text[2]:
            parts.append(text[2])
        return parts[0] + ": " + ", ".join(parts[1:])
