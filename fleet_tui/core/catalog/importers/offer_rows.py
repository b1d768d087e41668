"""Turning one cloud's SkyPilot rows into offers: one per instance type x region.

On-demand is a regional price (zones collapsed), spot is the cheapest zone's, and ``zones`` counts
the zones seen. Every oddity of the source is kept visible as a flag (see ``catalogs/README.md``,
"Anomalies") and prices that must not be ranked are excluded, never silently fixed. Per-cloud
rules come from the clouds registry (:mod:`fleet_tui.core.catalog.clouds`).

GpuInfo gives usable MiB per device where sane; otherwise the accelerator's nominal memory. A
SizeInMiB below 1024 is read as GB (RunPod's unit bug); one equal to count x the nominal size is a
total (Vast) and divided by the count.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from fleet_tui.core.catalog import clouds
from fleet_tui.core.catalog.clouds import Cloud
from fleet_tui.core.catalog.importers.gcp import gcp_offers, tpu_chips
from fleet_tui.core.catalog.importers.vms_csv import ImportReport, Row

# Prices known to be placeholders in a source (GCP TPU v6e rows carry 700.0).
PLACEHOLDER_PRICES = {700.0}
# Cross-region check: a price this many times away from the median of the same instance type in the
# other regions of the same cloud is flagged.
OUTLIER_RATIO = 1.5
# Spot prices are written to 4 decimals: within half a unit of the floor is on it.
SPOT_FLOOR_TOLERANCE_USD = 0.00005 + 1e-9


def resolve_accelerator(c: Cloud, r: Row, catalog) -> tuple[str | None, list[str]]:
    """Accelerator id for a row, with flags explaining any non-obvious choice."""
    flags: list[str] = []
    name = r.acc_name
    if c.tpu_slices and (tpu := tpu_chips(name)):
        return catalog.resolve_accelerator(tpu[0]), flags
    acc_id = catalog.resolve_accelerator(name)
    it = r.instance_type.lower()
    if acc_id == "H100":
        if "pcie" in it:
            acc_id = "H100-PCIe"
        elif "nvl" in it or (c.h100_nvl_types and re.match(c.h100_nvl_types, it)):
            acc_id = "H100-NVL"
    if acc_id is None:
        return None, flags
    # memory variants: the same catalog name for 40 and 80 GB A100s (Vast), 16 and 32 GB V100s
    variants = {"A100": "A100-80GB", "V100": "V100-32GB"}
    if acc_id in variants and r.gpu_mib and r.gpu_mib >= 1024 and variants[acc_id] in catalog.accelerators:
        base, big = catalog.accelerators[acc_id], catalog.accelerators[variants[acc_id]]
        # GpuInfo may hold the per-device size or (Vast) the total: try both readings
        cands = {r.gpu_mib / 1024, r.gpu_mib / 1024 / (r.acc_count or 1)}
        best = min(((abs(c - a.memory_gib) / a.memory_gib, a.id, c) for c in cands for a in (base, big)))
        if best[1] == big.id:
            flags.append(f"resolved-by-memory: '{name}' with {best[2]:.0f} GiB per device is {big.id}")
            acc_id = big.id
    return acc_id, flags


def per_device_mib(r: Row, nominal_gib: float | None) -> tuple[float | None, list[str]]:
    """Usable MiB per device from GpuInfo, correcting unit bugs; None when not usable."""
    mib = r.gpu_mib
    if mib is None or mib <= 0:
        return None, []
    if mib < 1024:  # RunPod writes GB into SizeInMiB
        return mib * 1024, [f"unit-fix: GpuInfo SizeInMiB {mib:g} read as GB"]
    count = r.acc_count or 1
    if 0 < count < 1:  # a GPU slice (AWS g6f/gr6f): GpuInfo gives the slice's memory
        return mib / count, [f"gpu-slice: {count:g} of one GPU; GpuInfo {mib:g} MiB is the slice's memory, "
                             f"{mib / count:g} MiB the whole device's"]
    if count > 1 and nominal_gib:
        as_total = mib / count / 1024
        if abs(mib / 1024 - nominal_gib) > 0.25 * nominal_gib and abs(as_total - nominal_gib) <= 0.25 * nominal_gib:
            return mib / count, [f"unit-fix: GpuInfo memory {mib:g} MiB is the total of {count:g} devices"]
    elif count > 1 and nominal_gib is None:
        return mib, []
    return mib, []


def import_rows(cloud: str, rows: list[Row], catalog, *, source: str, as_of: str,
                report: ImportReport, row_sources: dict[Path, str] | None = None) -> list[dict[str, Any]]:
    """Turn raw rows of one cloud into offer dicts (the fields of catalog.Instance)."""
    c = clouds.cloud(cloud)
    if c.vm_and_gpu_rows:
        rows = gcp_offers(rows, report)
    offers = [_offer(c, itype, region, grp, catalog, report, (row_sources or {}).get(grp[0].file, source), source)
              for (itype, region), grp in _group_rows(c, rows, report).items()]
    flag_outliers(offers)
    for d in offers:
        _finish(d, c, report)
    offers.sort(key=lambda d: (d["accelerator"].lower(), d["accelerator_count"], d["instance_type"], d["region"]))
    report.offers = len(offers)
    return offers


def _group_rows(c: Cloud, rows: list[Row], report: ImportReport) -> dict[tuple[str, str], list[Row]]:
    """The accelerator rows by (instance type, region); a blank accelerator the cloud names is
    filled in, CPU instances and rows without a type or region are skipped."""
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.acc_name:
            known = c.blank_accelerators.get(r.instance_type)
            if known is None:
                continue  # a CPU instance
            r.acc_name, r.acc_count = known[0], known[1]
            r.notes.append(f"accelerator-filled: the source leaves the accelerator blank; {r.instance_type} "
                           f"has {known[1]:g} {known[0]}")
        if not r.instance_type or not r.region:
            report.skip("row without instance type or region")
            continue
        groups[(r.instance_type, r.region)].append(r)
    return groups


def _offer(c: Cloud, itype: str, region: str, grp: list[Row], catalog, report: ImportReport,
           src: str, source: str) -> dict[str, Any]:
    """One offer dict of the rows of one (instance type, region), with its flags and why it is
    excluded (``_flags``, ``_excluded``, ``_excluded_pricing``, settled by :func:`_finish`)."""
    first = grp[0]
    flags: list[str] = []
    for r in grp:
        for n in r.notes:
            if n not in flags:
                flags.append(n)
    acc_id, rflags = resolve_accelerator(c, first, catalog)
    flags.extend(rflags)
    count = _device_count(c, itype, first, flags)
    acc = catalog.accelerators.get(acc_id) if acc_id else None
    mem_gib = _memory_gib(c, first, acc, flags)
    # prices: on-demand per region (zones should agree), spot = cheapest zone
    zones = {r.zone for r in grp if r.zone} or {""}
    ods = [r.price for r in grp if r.price is not None]
    spots = spot_prices(c, grp, flags)
    on_demand = pick_price(ods, "on-demand", flags, take_min=True)
    spot = pick_price(spots, "spot", flags, take_min=True)
    excluded_pricing: list[str] = []
    excluded = None
    if on_demand is None and not any("zero-price" in f or "placeholder" in f for f in flags if "on-demand" in f):
        flags.append("no-on-demand-price: the source lists no on-demand price")
    if on_demand is not None and spot is not None and spot >= on_demand:
        flags.append(f"spot>=on-demand: spot {spot:g} >= on-demand {on_demand:g} (placeholder or stale)")
    if spot is not None and any(f.startswith("spot>=on-demand") for f in flags):
        excluded_pricing.append("spot")
    if acc is None:
        excluded = f"unknown accelerator '{first.acc_name}'"
        flags.append(f"unresolved-accelerator: '{first.acc_name}' is not in accelerators.toml")
        report.unresolved[first.acc_name] = report.unresolved.get(first.acc_name, 0) + 1
    if on_demand is None and spot is None and excluded is None:
        excluded = "no usable price in the source"
    if excluded is None and any(f.startswith("count-missing") for f in flags):
        excluded = "accelerator count missing in the source"
    d: dict[str, Any] = {
        "instance_type": itype, "region": region, "zones": len(zones - {""}) or 1,
        "accelerator": acc.id if acc else first.acc_name, "accelerator_count": count,
        "accelerator_memory_gib": mem_gib, "vcpus": first.vcpus, "ram_gib": first.ram_gib,
        "on_demand_usd_per_hour": on_demand, "spot_usd_per_hour": spot,
    }
    if src != source:
        d["source"] = src
    d["_flags"] = flags
    d["_excluded"] = excluded
    d["_excluded_pricing"] = excluded_pricing
    return d


def _device_count(c: Cloud, itype: str, first: Row, flags: list[str]) -> float:
    """Devices per instance: a TPU slice's chips, the cloud's fraction of one GPU, else the source's
    count (1 when it is missing, flagged so the offer is excluded)."""
    count = first.acc_count or 1.0
    tpu = c.tpu_slices and tpu_chips(first.acc_name)
    if tpu:
        count = tpu[1]
    elif not first.acc_count:  # empty, 0 or not a number: a per-GPU price would be a guess
        flags.append("count-missing: the source's AcceleratorCount is empty, zero or not a "
                     "number; 1 written, offer excluded from ranking")
    fraction = c.fractional_gpus.get(itype.lower())
    if fraction is not None:
        count = fraction
        said = "nothing" if first.acc_count is None else f"{first.acc_count:g}"
        flags.append(f"count-fix: {itype} gets {count:g} of one GPU (source says {said})")
    return count


def _memory_gib(c: Cloud, first: Row, acc, flags: list[str]) -> float | None:
    """GiB per device: the source's measured figure unless it overstates the nominal, else the nominal."""
    mib, mflags = per_device_mib(first, acc.memory_gib if acc else None)
    if not c.gpuinfo_is_measured:
        mib = None  # (GCP) synthesised from a name->size table
    if mib is not None and acc is not None and not mflags:
        # never overstate memory: a smaller variant keeps its own size, a bigger one the nominal
        if mib / 1024 > 1.1 * acc.memory_gib:
            flags.append(f"memory-mismatch: GpuInfo {mib:g} MiB per device vs {acc.memory_gib:g} GiB nominal; "
                         "nominal used")
            mib = None
        elif mib / 1024 < 0.75 * acc.memory_gib:
            flags.append(f"memory-mismatch: GpuInfo {mib:g} MiB per device vs {acc.memory_gib:g} GiB nominal; "
                         "GpuInfo used (a smaller variant)")
    flags.extend(mflags)
    if mib is not None:
        return round(mib / 1024, 3)
    if acc is not None:
        return float(acc.memory_gib)
    return None


def _finish(d: dict[str, Any], c: Cloud, report: ImportReport) -> None:
    """Estimated reserved prices (the cloud's published discount) and the flags and exclusions
    settled into the offer's fields; counted in ``report``."""
    disc = c.reserved
    od = d["on_demand_usd_per_hour"]
    if disc and od is not None and d["_excluded"] is None:
        d["reserved_1y_usd_per_hour"] = round(od * (1 - disc.one_year), 5)
        d["reserved_3y_usd_per_hour"] = round(od * (1 - disc.three_year), 5)
        d["reserved_estimated"] = True
    d["flags"] = d.pop("_flags")
    ex = d.pop("_excluded")
    if ex:
        d["excluded"] = ex
    exp = d.pop("_excluded_pricing")
    if exp:
        d["excluded_pricing"] = exp
    report.flagged += bool(d["flags"])
    report.excluded += bool(ex)


def spot_prices(c: Cloud, rows: list[Row], flags: list[str]) -> list[float]:
    """The zones' spot prices, without the ones sitting exactly on the cloud's spot floor (flagged)."""
    out, floors = [], 0
    for r in rows:
        if r.spot is None:
            continue
        if (c.spot_floor_ratio and r.price and r.spot > 0
                and abs(r.spot - c.spot_floor_ratio * r.price) <= SPOT_FLOOR_TOLERANCE_USD):
            floors += 1
        else:
            out.append(r.spot)
    if floors:
        flags.append(f"spot-floor: spot is exactly {c.spot_floor_ratio:.0%} of on-demand in {floors} zone(s), "
                     "a floor in the source, not a market price (dropped)")
    return out


def pick_price(values: list[float], what: str, flags: list[str], take_min: bool) -> float | None:
    """One price from the zone rows: placeholders and zeros dropped (and flagged)."""
    good = []
    for v in values:
        if v in PLACEHOLDER_PRICES:
            f = f"placeholder-price: {what} {v:g} in the source (dropped)"
        elif v <= 0:
            f = f"zero-price: {what} {v:g} in the source (dropped)"
        else:
            good.append(v)
            continue
        if f not in flags:
            flags.append(f)
    # a zero part in a combined (GCP) price makes the whole price unusable
    if any(fl.startswith(f"zero-price: {what} of the") for fl in flags):
        return None
    if not good:
        return None
    lo, hi = min(good), max(good)
    if what == "on-demand" and hi > lo * 1.001:
        flags.append(f"zone-price-spread: on-demand {lo:g}..{hi:g} across zones (lowest kept)")
    return lo if take_min else statistics.median(good)


def flag_outliers(offers: list[dict[str, Any]]) -> None:
    """Flag on-demand prices far from the cross-region median of the same instance type."""
    by_type: dict[str, list[dict]] = defaultdict(list)
    for d in offers:
        if d["on_demand_usd_per_hour"] is not None:
            by_type[d["instance_type"]].append(d)
    for _itype, grp in by_type.items():
        if len(grp) < 3:
            continue
        med = statistics.median(d["on_demand_usd_per_hour"] for d in grp)
        for d in grp:
            ratio = d["on_demand_usd_per_hour"] / med
            if ratio >= OUTLIER_RATIO or ratio <= 1 / OUTLIER_RATIO:
                d["_flags"].append(f"price-outlier: on-demand {ratio:.2f}x the median of {len(grp)} regions "
                                   f"({med:g} USD/h)")


