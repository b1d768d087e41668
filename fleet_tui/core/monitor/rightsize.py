"""Right-sizing from what was observed: usage percentiles per device, and the cheaper instance
that would have held the observed p99 memory and compute, with monthly savings.

Requirements (documented so the numbers can be checked by hand):

* memory: each device's p99 used memory must fit one device of the candidate (a process's memory
  cannot be split across GPUs without changing the program), and the sum over devices must fit the
  candidate's total, each with ``HEADROOM`` on top;
* compute: p99 busy fraction (GPM SM active where recorded, else NVML utilization, which
  overstates) x the current device's dense bf16 peak, summed over devices, with ``HEADROOM``, must
  not exceed the candidate's total dense bf16 peak.

Percentiles come from raw samples and one-minute means (weighted by their sample count); means of
older data flatten short peaks, so p99 over long windows is a lower bound.

``idle_note`` says how much of the time a device sat idle from its phases (``analysis.stream``,
change points), where a trace is at hand: "idle 40 % of the time" is the case for a smaller or
shared instance that p99s alone do not make.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from fleet_tui.core.errors import FieldError, UserError, escape_braces
from fleet_tui.core.monitor.analysis.summary import TimeShares
from fleet_tui.core.monitor.recorder import read_rows
from fleet_tui.core.pricing import HOURS_PER_MONTH
from fleet_tui.core.records import record

HEADROOM = 0.10  # 10% on top of the observed p99 (allocator growth, load variation)
IDLE_UTIL_PCT = 1.0  # a device whose p99 busy share is under this was not used


@record
class Percentiles:
    mean: float | None
    median: float | None
    p95: float | None
    p99: float | None
    max: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"mean": _r(self.mean), "median": _r(self.median), "p95": _r(self.p95),
                "p99": _r(self.p99), "max": _r(self.max)}


@record
class DeviceUsage:
    device_key: str
    index: int | None
    name: str
    samples: int
    span_s: float
    gpu_util_pct: Percentiles
    sm_active_pct: Percentiles
    mem_used_gib: Percentiles
    mem_used_pct: Percentiles
    mem_total_gib: float | None

    @property
    def busy_p99_pct(self) -> float | None:
        return self.sm_active_pct.p99 if self.sm_active_pct.p99 is not None else self.gpu_util_pct.p99

    @property
    def busy_signal(self) -> str:
        return "sm_active_pct" if self.sm_active_pct.p99 is not None else "gpu_util_pct"

    def to_dict(self) -> dict[str, Any]:
        return {"device_key": self.device_key, "device": self.index, "name": self.name,
                "samples": self.samples, "span_s": round(self.span_s, 1),
                "gpu_util_pct": self.gpu_util_pct.to_dict(),
                "sm_active_pct": self.sm_active_pct.to_dict(),
                "mem_used_gib": self.mem_used_gib.to_dict(),
                "mem_used_pct": self.mem_used_pct.to_dict(),
                "mem_total_gib": _r(self.mem_total_gib)}


@record
class Candidate:
    cloud: str
    instance_type: str
    region: str
    accelerator: str
    accelerator_count: int
    usd_per_hour: float
    usd_per_month: float
    savings_usd_per_month: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"cloud": self.cloud, "instance": self.instance_type, "region": self.region,
                "accelerator": self.accelerator, "accelerator_count": self.accelerator_count,
                "usd_per_hour": _r(self.usd_per_hour), "usd_per_month": _r(self.usd_per_month),
                "savings_usd_per_month": _r(self.savings_usd_per_month)}


@record
class RightsizeReport:
    since_s: float | None
    window_start: float | None
    window_end: float | None
    devices: tuple[DeviceUsage, ...]
    current: Candidate | None
    current_accelerator: str | None
    need_mem_per_device_gib: float | None
    need_mem_total_gib: float | None
    need_bf16_tflops: float | None
    candidates: tuple[Candidate, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict[str, Any]:
        return {"since_s": self.since_s, "window_start": self.window_start,
                "window_end": self.window_end, "devices": [d.to_dict() for d in self.devices],
                "current": self.current.to_dict() if self.current else None,
                "current_accelerator": self.current_accelerator,
                "need": {"mem_per_device_gib": _r(self.need_mem_per_device_gib),
                         "mem_total_gib": _r(self.need_mem_total_gib),
                         "bf16_tflops": _r(self.need_bf16_tflops), "headroom": HEADROOM},
                "best": self.best.to_dict() if self.best else None,
                "candidates": [c.to_dict() for c in self.candidates],
                "notes": list(self.notes)}


def _r(x: float | None, digits: int = 4) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, digits)


def weighted_percentiles(values: Sequence[tuple[float | None, int]]) -> Percentiles:
    """Mean, median, p95, p99, max of (value, weight) pairs (nearest-rank on cumulative weight);
    pairs without a value are left out."""
    vals = sorted((v, w) for v, w in values if v is not None and w > 0)
    if not vals:
        return Percentiles(None, None, None, None, None)
    total = sum(w for _, w in vals)
    mean = sum(v * w for v, w in vals) / total

    def q(p: float) -> float:
        target = p * total
        cum = 0
        for v, w in vals:
            cum += w
            if cum >= target - 1e-9:
                return v
        return vals[-1][0]

    return Percentiles(mean, q(0.5), q(0.95), q(0.99), vals[-1][0])


def usage_from_db(db: str | Path, since_s: float | None = None) -> tuple[list[DeviceUsage],
                                                                          float | None, float | None]:
    rows, devices = read_rows(db)
    if not rows:
        return [], None, None
    end = max(r.ts for r in rows)
    start = end - since_s if since_s is not None else min(r.ts for r in rows)
    rows = [r for r in rows if r.ts >= start]
    by_dev: dict[str, list] = {}
    for r in rows:
        by_dev.setdefault(r.device_key, []).append(r)
    out = []
    for key, rs in by_dev.items():
        info = devices.get(key, {})
        totals = [r.get("mem_total_bytes") for r in rs if r.get("mem_total_bytes")]
        total = totals[-1] if totals else None
        gib = 2.0 ** 30
        out.append(DeviceUsage(
            device_key=key, index=info.get("index"), name=info.get("name") or "",
            samples=sum(r.weight for r in rs), span_s=rs[-1].ts - rs[0].ts,
            gpu_util_pct=weighted_percentiles([(r.get("gpu_util_pct"), r.weight) for r in rs]),
            sm_active_pct=weighted_percentiles([(r.get("sm_active_pct"), r.weight) for r in rs]),
            mem_used_gib=weighted_percentiles(
                [(None if r.get("mem_used_bytes") is None else r.get("mem_used_bytes") / gib,
                  r.weight) for r in rs]),
            mem_used_pct=weighted_percentiles(
                [(None if r.get("mem_used_bytes") is None or not r.get("mem_total_bytes")
                  else 100.0 * r.get("mem_used_bytes") / r.get("mem_total_bytes"), r.weight)
                 for r in rs]),
            mem_total_gib=None if total is None else total / gib))
    out.sort(key=lambda d: (d.index if d.index is not None else 1 << 30, d.device_key))
    return out, start, end


class NoRecordedSamples(FieldError):
    """The history ``db`` holds no sample (in the ``since`` window): nothing to right-size from.
    Each front end says how to get samples in its own words."""

    def __init__(self, db: str | Path, since_s: float | None) -> None:
        self.db = str(db)
        super().__init__("db", "{db} " + escape_braces(repr(self.db)) + ": no recorded samples"
                         + (" in the {since} window" if since_s else ""))


def rightsize(db: str | Path, catalog: Any, *, since_s: float | None = 7 * 86400.0,
              instance: str | None = None, pricing: str = "on-demand",
              top: int = 5, clouds: Sequence[str] | None = None) -> RightsizeReport:
    usage, start, end = usage_from_db(db, since_s)
    notes: list[str] = []
    if not usage:
        raise NoRecordedSamples(db, since_s)
    current, acc_id = _current(catalog, usage, instance, pricing, notes)
    acc = catalog.accelerators.get(acc_id) if acc_id else None
    if acc is None:
        notes.append("the recorded device is not in the catalog: compute need unknown, "
                     "memory need only")
    if any(d.busy_signal == "gpu_util_pct" for d in usage):
        notes.append("compute need uses NVML utilization where SM activity was not recorded; "
                     "it overstates how busy the SMs were")
    mems = [d.mem_used_gib.p99 for d in usage if d.mem_used_gib.p99 is not None]
    need_dev = max(mems) * (1 + HEADROOM) if mems else None
    need_total = sum(mems) * (1 + HEADROOM) if mems else None
    peak = acc.peak_tflops.get("bf16") if acc is not None else None
    need_tflops = None
    if peak is not None:
        need_tflops = sum((d.busy_p99_pct or 0.0) / 100.0 * peak for d in usage) * (1 + HEADROOM)
    uniq = _cheaper(catalog, pricing, clouds, need_dev, need_total, need_tflops,
                    current.usd_per_month if current else None)
    if current is not None and not uniq:
        notes.append("no cheaper catalog instance holds the observed p99 memory and compute")
    return RightsizeReport(since_s=since_s, window_start=start, window_end=end,
                           devices=tuple(usage), current=current, current_accelerator=acc_id,
                           need_mem_per_device_gib=need_dev, need_mem_total_gib=need_total,
                           need_bf16_tflops=need_tflops, candidates=tuple(uniq[:top]),
                           notes=tuple(notes))


def _current(catalog: Any, usage: Sequence[DeviceUsage], instance: str | None, pricing: str,
             notes: list[str]) -> tuple[Candidate | None, str | None]:
    """The current instance priced at its cheapest region (None without ``instance``) and the
    accelerator recorded: the instance's, else the one device model every sample names."""
    from fleet_tui.core.monitor.cost import accelerator_id_for

    if instance:
        rows = catalog.find_instance(instance)
        priced = [r for r in rows if r.price(pricing) is not None]
        if not priced:
            raise UserError(f"--instance {instance!r}: no {pricing} price in the catalog")
        inst = min(priced, key=lambda r: r.price(pricing))
        if len(rows) > 1:
            notes.append(f"current price: the lowest {pricing} price of {instance} "
                         f"({inst.region}) among {len(rows)} regions")
        return _candidate(inst, pricing, None), inst.accelerator
    acc_id = None
    names = {d.name for d in usage if d.name}
    if len(names) == 1:
        acc_id = accelerator_id_for(catalog, next(iter(names)))
    notes.append("no --instance given: savings are not computed (candidates show their price)")
    return None, acc_id


def _cheaper(catalog: Any, pricing: str, clouds: Sequence[str] | None, need_dev: float | None,
             need_total: float | None, need_tflops: float | None,
             current_month: float | None) -> list[Candidate]:
    """The catalog instances (in ``clouds``) that hold the need and cost less than the current one
    per month, cheapest first, one per instance type (its cheapest region)."""
    candidates = []
    wanted = {c.lower() for c in clouds} if clouds else None
    if wanted:
        known = {i.cloud.lower() for i in catalog.instances}
        unknown = sorted(wanted - known)
        if unknown:
            raise UserError(f"--cloud {unknown[0]!r}: not in the catalog (known: "
                            f"{', '.join(sorted(known))})")
    for inst in catalog.instances:
        if wanted and inst.cloud.lower() not in wanted:
            continue
        price = inst.price(pricing)
        if price is None:
            continue
        cand_acc = catalog.accelerators.get(inst.accelerator)
        if cand_acc is None:
            continue
        if need_dev is not None and inst.accelerator_memory_gib < need_dev:
            continue
        if need_total is not None and inst.total_accelerator_memory_gib < need_total:
            continue
        if need_tflops is not None:
            cpeak = cand_acc.peak_tflops.get("bf16")
            if cpeak is None or cpeak * inst.accelerator_count < need_tflops:
                continue
        c = _candidate(inst, pricing, current_month)
        if current_month is not None and c.usd_per_month >= current_month - 1e-9:
            continue
        candidates.append(c)
    candidates.sort(key=lambda c: (c.usd_per_month, c.cloud, c.instance_type, c.region))
    seen: set[tuple[str, str]] = set()
    uniq = []
    for c in candidates:
        k = (c.cloud, c.instance_type)
        if k not in seen:
            seen.add(k)
            uniq.append(c)
    return uniq


def _candidate(inst: Any, pricing: str, current_month: float | None) -> Candidate:
    price = inst.price(pricing)
    month = price * HOURS_PER_MONTH
    return Candidate(cloud=inst.cloud, instance_type=inst.instance_type, region=inst.region,
                     accelerator=inst.accelerator, accelerator_count=int(inst.accelerator_count),
                     usd_per_hour=price, usd_per_month=month,
                     savings_usd_per_month=None if current_month is None else current_month - month)



def idle_note(analyses: Any) -> dict[int, str]:
    """Per device index, "idle N % of the time" from phase (or window) analyses."""
    shares = TimeShares(analyses)
    return {dev: f"idle {100 * shares.idle_share(dev):.0f} % of the time"
            for dev in sorted(shares.seconds)}
