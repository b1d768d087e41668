"""Import SkyPilot v8 ``vms.csv`` catalogs into ``catalogs/instances/<cloud>.toml``.

Columns are read by name (each cloud orders them differently). Only rows with an accelerator are
kept. One offer per instance type x region: on-demand is a regional price (zones collapsed), spot is
the cheapest zone's, and ``zones`` counts the zones seen. Every oddity of the source is kept visible
as a flag (see ``catalogs/README.md``, "Anomalies") and prices that must not be ranked are excluded,
never silently fixed.

Per-cloud rules (each documented in catalogs/README.md):

* GCP prices the VM and its GPUs in separate rows. Accelerator-optimised families (a2, a3, a4, g2)
  come with fixed GPUs: offer price = VM row + the matching GPU row of the same zone. Attachable GPUs
  (T4, V100, P100, P4) are offered on an ``n1-standard`` host with 8 vCPUs per GPU (within every
  GPU's documented vCPU limit), named e.g. ``n1-standard-8+1xT4``. TPU rows become offers named by
  the TPU type, counting chips (v2/v3/v4/v5p names count TensorCores, 2 per chip).
* GpuInfo gives usable MiB per device where sane; otherwise the accelerator's nominal memory. A
  SizeInMiB below 1024 is read as GB (RunPod's unit bug); one equal to count x the nominal size is a
  total (Vast) and divided by the count.
"""

from __future__ import annotations

import ast
import csv
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.fsutil import write_atomic

KNOWN_CLOUDS = ("aws", "gcp", "azure", "lambda", "oci", "nebius", "vast", "runpod")

# Published discounts used to ESTIMATE reserved prices where the source has none; sources and
# caveats in catalogs/README.md ("Reserved prices"). Clouds without a published standard discount
# get no reserved price.
RESERVED_DISCOUNTS: dict[str, tuple[float, float]] = {
    "aws": (0.30, 0.50),
    "gcp": (0.37, 0.55),
    "azure": (0.30, 0.50),
}

# Prices known to be placeholders in a source (GCP TPU v6e rows carry 700.0).
PLACEHOLDER_PRICES = {700.0}
# Cross-region check: a price this many times away from the median of the same instance type in the
# other regions of the same cloud is flagged.
OUTLIER_RATIO = 1.5

# Rows whose accelerator the source leaves blank although the instance type fixes it
# (AWS trn2.48xlarge: 16 Trainium2 chips, https://aws.amazon.com/ec2/instance-types/trn2/).
KNOWN_ACCELERATORS = {("aws", "trn2.48xlarge"): ("Trainium2", 16.0)}

# GCP accelerator-optimised families: machine type -> (GPU row name, count).
_GCP_G2_L4 = {"4": 1, "8": 1, "12": 1, "16": 1, "32": 1, "24": 2, "48": 4, "96": 8}
_GCP_ATTACHABLE = ("T4", "V100", "P100", "P4")
_GCP_VCPUS_PER_ATTACHED_GPU = 8

# Azure NVv4: smaller sizes get a fraction of one MI25
# (https://learn.microsoft.com/en-us/azure/virtual-machines/nvv4-series).
_AZURE_PARTIAL_GPU = {"standard_nv4as_v4": 0.125, "standard_nv8as_v4": 0.25, "standard_nv16as_v4": 0.5}


def gcp_bundled_accelerator(machine_type: str) -> tuple[str, int] | None:
    """(GPU row name, count) for a GCP machine type that comes with GPUs, else None."""
    mt = machine_type.removesuffix("-nolssd")
    m = re.fullmatch(r"a2-(highgpu|megagpu|ultragpu)-(\d+)g", mt)
    if m:
        return ("A100-80GB" if m.group(1) == "ultragpu" else "A100", int(m.group(2)))
    m = re.fullmatch(r"a3-(highgpu|edgegpu|megagpu|ultragpu)-(\d+)g", mt)
    if m:
        name = {"megagpu": "H100-MEGA", "ultragpu": "H200"}.get(m.group(1), "H100")
        return (name, int(m.group(2)))
    m = re.fullmatch(r"a4-highgpu-(\d+)g", mt)
    if m:
        return ("B200", int(m.group(1)))
    m = re.fullmatch(r"g2-standard-(\d+)", mt)
    if m and m.group(1) in _GCP_G2_L4:
        return ("L4", _GCP_G2_L4[m.group(1)])
    return None


def tpu_chips(tpu_type: str) -> tuple[str, float] | None:
    """('TPU-v5p', chips) for a GCP TPU type such as ``tpu-v5p-8``; None if not a TPU name."""
    m = re.fullmatch(r"tpu-(v\d+(?:litepod|p|e)?)-(\d+)", tpu_type.strip().lower())
    if not m:
        return None
    gen, n = m.group(1), int(m.group(2))
    if gen == "v5litepod":
        gen = "v5e"
    # v2, v3, v4 and v5p type names count TensorCores (2 per chip); v5e and v6e count chips
    chips = n / 2 if gen in ("v2", "v3", "v4", "v5p") else float(n)
    return (f"TPU-{gen}", chips)


@dataclass
class SourceInfo:
    repo_path: str = ""
    commit: str = ""
    date: str = ""

    def describe(self, file: Path) -> str:
        parts = [self.repo_path or file.name]
        if self.commit:
            parts.append(f"@ {self.commit}")
        return " ".join(parts)


def read_source_txt(csv_path: Path) -> SourceInfo:
    """Provenance from a ``SOURCE.txt`` next to the CSV (repository, path, commit, date)."""
    src = csv_path.parent / "SOURCE.txt"
    info = SourceInfo()
    if not src.is_file():
        return info
    text = src.read_text(encoding="utf-8", errors="replace")
    m = re.search(r"Source:\s*([\w.-]+/[\w.-]+).*?\bpath\s+(\S+?)[,\s]", text, re.S)
    if m:
        info.repo_path = f"{m.group(1)}:{m.group(2)}"
    head = text.split("\n\n")[0]
    m = re.search(r"\b([0-9a-f]{40})\b", head)
    if m:
        info.commit = m.group(1)
    # the date of the snapshot: the first date written right after a commit hash, e.g.
    # "commit 62ff0a9... (2026-05-20 04:50:10 +0000" or "in 4c06102..., 2026-05-07"
    m = re.search(r"\b[0-9a-f]{40}\b[^0-9\n]{0,12}(\d{4}-\d{2}-\d{2})", head)
    if m:
        info.date = m.group(1)
    return info


def detect_cloud(path: Path) -> str | None:
    for part in (path.parent.name, path.stem, *path.parts):
        p = part.lower()
        if p in KNOWN_CLOUDS:
            return p
    return None


def _num(v: Any) -> float | None:
    if v is None:
        return None
    s = str(v).strip()
    if not s:
        return None
    try:
        x = float(s)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _gpuinfo_mib(raw: str | None) -> tuple[float | None, str | None]:
    """(SizeInMiB of the first GPU, its Name) from a GpuInfo cell (dict literal or bare number)."""
    if raw is None:
        return None, None
    s = str(raw).strip()
    if not s:
        return None, None
    x = _num(s)
    if x is not None:
        return x, None
    if s.startswith("{"):
        try:
            info = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            return None, None
        gpus = info.get("Gpus") or [{}]
        g = gpus[0] if gpus else {}
        mib = (g.get("MemoryInfo") or {}).get("SizeInMiB")
        return (_num(mib), g.get("Name"))
    return None, s  # Azure / GCP TPU: just a name


@dataclass
class _Row:
    file: Path
    instance_type: str
    region: str
    zone: str
    acc_name: str
    acc_count: float | None
    vcpus: float | None
    ram_gib: float | None
    gpu_mib: float | None
    gpu_info_name: str | None
    price: float | None
    spot: float | None
    notes: list[str] = field(default_factory=list)


def read_skypilot_csv(path: Path) -> tuple[list[_Row], bool]:
    """Rows of one SkyPilot-format CSV, columns matched by name."""
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        need = {"InstanceType", "Region", "Price"}
        missing = need - set(cols)
        if missing:
            raise UserError(f"{path}:1: header lacks {', '.join(sorted(missing))}; a SkyPilot vms.csv has "
                            "InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, "
                            "Price, SpotPrice, Region[, AvailabilityZone] in any order")
        gpu_col = next((c for c in cols if c.startswith("GpuInfo") and "note" not in c.lower()), None)
        rows = []
        for rec in reader:
            mib, gname = _gpuinfo_mib(rec.get(gpu_col) if gpu_col else None)
            rows.append(_Row(
                file=path,
                instance_type=(rec.get("InstanceType") or "").strip(),
                # Vast lists some hosts without a city (", US, NA"): drop the empty part
                region=(rec.get("Region") or "").strip().lstrip(", ").strip(),
                zone=(rec.get("AvailabilityZone") or "").strip(),
                acc_name=(rec.get("AcceleratorName") or "").strip(),
                acc_count=_num(rec.get("AcceleratorCount")),
                vcpus=_num(rec.get("vCPUs")),
                ram_gib=_num(rec.get("MemoryGiB")),
                gpu_mib=mib, gpu_info_name=gname,
                price=_num(rec.get("Price")), spot=_num(rec.get("SpotPrice")),
            ))
        return rows, ("AcceleratorName" in cols)


@dataclass
class ImportReport:
    cloud: str
    out_path: Path | None = None
    offers: int = 0
    rows_read: int = 0
    rows_skipped: dict[str, int] = field(default_factory=dict)
    unresolved: dict[str, int] = field(default_factory=dict)
    flagged: int = 0
    excluded: int = 0

    def skip(self, why: str) -> None:
        self.rows_skipped[why] = self.rows_skipped.get(why, 0) + 1


def _gcp_offers(rows: list[_Row], report: ImportReport) -> list[_Row]:
    """Combine GCP VM rows with their GPU rows (same zone) into priced offers."""
    gpu_rows: dict[tuple[str, str, float], _Row] = {}
    vm_rows: dict[tuple[str, str], _Row] = {}
    out: list[_Row] = []
    for r in rows:
        if not r.instance_type and r.acc_name:
            if r.acc_name.lower().startswith("tpu-"):
                r.instance_type = r.acc_name  # a TPU slice is priced on its own
                out.append(r)
            else:
                gpu_rows[(r.zone, r.acc_name, r.acc_count or 0)] = r
        elif r.instance_type:
            vm_rows[(r.zone, r.instance_type)] = r
    for (zone, mt), vm in vm_rows.items():
        bundled = gcp_bundled_accelerator(mt)
        if bundled is None:
            continue
        name, count = bundled
        g = gpu_rows.get((zone, name, float(count)))
        if g is None:
            report.skip(f"GCP {mt}: no {count}x{name} GPU price row in the same zone")
            continue
        out.append(_combine(mt, vm, g, name, count))
    # attachable GPUs on an n1-standard host with 8 vCPUs per GPU
    for (zone, name, count), g in gpu_rows.items():
        if name not in _GCP_ATTACHABLE or not count:
            continue
        host = f"n1-standard-{int(_GCP_VCPUS_PER_ATTACHED_GPU * count)}"
        vm = vm_rows.get((zone, host))
        if vm is None:
            report.skip(f"GCP {name}: no {host} host price row in the same zone")
            continue
        out.append(_combine(f"{host}+{int(count)}x{name}", vm, g, name, count))
    return out


def _combine(instance_type: str, vm: _Row, g: _Row, name: str, count: float) -> _Row:
    notes = []

    def add(a: float | None, b: float | None, what: str) -> float | None:
        if a is None or b is None:
            return None
        if a == 0 or b == 0:
            part = "VM" if a == 0 else "GPU"
            notes.append(f"zero-price: {what} of the {part} part is 0.0 in the source")
            return None
        return round(a + b, 5)

    if g.price and g.spot and g.spot >= g.price:
        notes.append(f"spot>=on-demand: GPU part spot {g.spot:g} >= on-demand {g.price:g} in the source")
    price = add(vm.price, g.price, "on-demand")
    spot = add(vm.spot, g.spot, "spot")
    return _Row(file=g.file, instance_type=instance_type, region=vm.region, zone=vm.zone, acc_name=name,
                acc_count=float(count), vcpus=vm.vcpus, ram_gib=vm.ram_gib, gpu_mib=g.gpu_mib,
                gpu_info_name=g.gpu_info_name, price=price, spot=spot, notes=notes)


def _resolve(cloud: str, r: _Row, catalog) -> tuple[str | None, list[str]]:
    """Accelerator id for a row, with flags explaining any non-obvious choice."""
    flags: list[str] = []
    name = r.acc_name
    if cloud == "gcp" and (tpu := tpu_chips(name)):
        return catalog.resolve_accelerator(tpu[0]), flags
    acc_id = catalog.resolve_accelerator(name)
    it = r.instance_type.lower()
    if acc_id == "H100":
        if "pcie" in it:
            acc_id = "H100-PCIe"
        elif "nvl" in it or (cloud == "azure" and re.match(r"standard_ncc?\d+ad", it)):
            # Azure NCads/NCCads H100 v5 carry H100 NVL (94 GB)
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


def _per_device_mib(r: _Row, nominal_gib: float | None) -> tuple[float | None, list[str]]:
    """Usable MiB per device from GpuInfo, correcting unit bugs; None when not usable."""
    mib = r.gpu_mib
    if mib is None or mib <= 0:
        return None, []
    if mib < 1024:  # RunPod writes GB into SizeInMiB
        return mib * 1024, [f"unit-fix: GpuInfo SizeInMiB {mib:g} read as GB"]
    count = r.acc_count or 1
    if count > 1 and nominal_gib:
        as_total = mib / count / 1024
        if abs(mib / 1024 - nominal_gib) > 0.25 * nominal_gib and abs(as_total - nominal_gib) <= 0.25 * nominal_gib:
            return mib / count, [f"unit-fix: GpuInfo memory {mib:g} MiB is the total of {count:g} devices"]
    elif count > 1 and nominal_gib is None:
        return mib, []
    return mib, []


def import_rows(cloud: str, rows: list[_Row], catalog, *, source: str, as_of: str,
                report: ImportReport, row_sources: dict[Path, str] | None = None) -> list[dict[str, Any]]:
    """Turn raw rows of one cloud into offer dicts (the fields of catalog.Instance)."""
    if cloud == "gcp":
        rows = _gcp_offers(rows, report)
    groups: dict[tuple[str, str], list[_Row]] = defaultdict(list)
    for r in rows:
        if not r.acc_name:
            known = KNOWN_ACCELERATORS.get((cloud, r.instance_type))
            if known is None:
                continue  # a CPU instance
            r.acc_name, r.acc_count = known[0], known[1]
            r.notes.append(f"accelerator-filled: the source leaves the accelerator blank; {r.instance_type} "
                           f"has {known[1]:g} {known[0]}")
        if not r.instance_type or not r.region:
            report.skip("row without instance type or region")
            continue
        groups[(r.instance_type, r.region)].append(r)
    offers = []
    for (itype, region), grp in groups.items():
        first = grp[0]
        flags: list[str] = []
        for r in grp:
            for n in r.notes:
                if n not in flags:
                    flags.append(n)
        acc_id, rflags = _resolve(cloud, first, catalog)
        flags.extend(rflags)
        count = first.acc_count or 1.0
        tpu = cloud == "gcp" and tpu_chips(first.acc_name)
        if tpu:
            count = tpu[1]
        elif not first.acc_count:  # empty, 0 or not a number: a per-GPU price would be a guess
            flags.append("count-missing: the source's AcceleratorCount is empty, zero or not a "
                         "number; 1 written, offer excluded from ranking")
        if cloud == "azure" and itype.lower() in _AZURE_PARTIAL_GPU:
            count = _AZURE_PARTIAL_GPU[itype.lower()]
            flags.append(f"count-fix: {itype} gets {count:g} of one GPU (source says {first.acc_count:g})")
        acc = catalog.accelerators.get(acc_id) if acc_id else None
        mib, mflags = _per_device_mib(first, acc.memory_gib if acc else None)
        if cloud == "gcp":
            mib = None  # GCP GpuInfo is synthesised from a name->size table, not measured
        mem_gib = None
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
            mem_gib = round(mib / 1024, 3)
        elif acc is not None:
            mem_gib = float(acc.memory_gib)
        # prices: on-demand per region (zones should agree), spot = cheapest zone
        zones = {r.zone for r in grp if r.zone} or {""}
        ods = [r.price for r in grp if r.price is not None]
        spots = [r.spot for r in grp if r.spot is not None]
        on_demand, spot = _pick(ods, "on-demand", flags, take_min=True), _pick(spots, "spot", flags, take_min=True)
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
        src = (row_sources or {}).get(first.file, source)
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
        offers.append(d)
    _flag_outliers(offers)
    disc = RESERVED_DISCOUNTS.get(cloud)
    for d in offers:
        od = d["on_demand_usd_per_hour"]
        if disc and od is not None and d["_excluded"] is None:
            d["reserved_1y_usd_per_hour"] = round(od * (1 - disc[0]), 5)
            d["reserved_3y_usd_per_hour"] = round(od * (1 - disc[1]), 5)
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
    offers.sort(key=lambda d: (d["accelerator"].lower(), d["accelerator_count"], d["instance_type"], d["region"]))
    report.offers = len(offers)
    return offers


def _pick(values: list[float], what: str, flags: list[str], take_min: bool) -> float | None:
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


def _flag_outliers(offers: list[dict[str, Any]]) -> None:
    """Flag on-demand prices far from the cross-region median of the same instance type."""
    by_type: dict[str, list[dict]] = defaultdict(list)
    for d in offers:
        if d["on_demand_usd_per_hour"] is not None:
            by_type[d["instance_type"]].append(d)
    for itype, grp in by_type.items():
        if len(grp) < 3:
            continue
        med = statistics.median(d["on_demand_usd_per_hour"] for d in grp)
        for d in grp:
            ratio = d["on_demand_usd_per_hour"] / med
            if ratio >= OUTLIER_RATIO or ratio <= 1 / OUTLIER_RATIO:
                d["_flags"].append(f"price-outlier: on-demand {ratio:.2f}x the median of {len(grp)} regions "
                                   f"({med:g} USD/h)")


# -- TOML output ---------------------------------------------------------------------------------

_FIELD_ORDER = ("instance_type", "region", "zones", "accelerator", "accelerator_count", "accelerator_memory_gib",
                "vcpus", "ram_gib", "on_demand_usd_per_hour", "spot_usd_per_hour", "reserved_1y_usd_per_hour",
                "reserved_3y_usd_per_hour", "reserved_estimated", "excluded", "excluded_pricing", "flags", "source")


def _toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return str(int(v)) + ".0" if v.is_integer() else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def render_toml(cloud: str, offers: list[dict[str, Any]], *, source: str, as_of: str, version: str) -> str:
    import json

    lines = [
        f"# {cloud} instance offers, GENERATED by `fleet-tui catalog import-skypilot`: do not edit by hand,",
        "# re-run the importer on a newer SkyPilot vms.csv instead (see catalogs/README.md).",
        "# One line per instance type x region; prices in USD per hour for the whole instance.",
        f"meta.cloud = {json.dumps(cloud)}",
        f"meta.source = {json.dumps(source)}",
        f"meta.as_of = {json.dumps(as_of)}",
        f"meta.generated_by = {json.dumps('fleet-tui ' + version + ' catalog import-skypilot')}",
        "",
        "instance = [",
    ]
    for d in offers:
        parts = []
        for k in _FIELD_ORDER:
            v = d.get(k)
            if v is None or (k == "flags" and not v):
                continue
            parts.append(f"{k} = {_toml_value(v)}")
        lines.append("  {" + ", ".join(parts) + "},")
    lines.append("]")
    return "\n".join(lines) + "\n"


def import_skypilot(files: Sequence[Path | str], *, out_dir: Path | str, cloud: str | None = None,
                    as_of: str | None = None, catalog=None, write: bool = True) -> list[ImportReport]:
    """Import SkyPilot CSVs, grouped by cloud, into ``out_dir/<cloud>.toml`` (atomically)."""
    from fleet_tui import __version__
    from fleet_tui.core.catalog import load_catalog

    if catalog is None:
        catalog = load_catalog()
    if cloud is not None and cloud.lower() not in KNOWN_CLOUDS:
        cloud_ok = re.fullmatch(r"[a-z0-9_-]+", cloud.lower())
        if not cloud_ok:
            raise UserError(f"--cloud {cloud!r}: use a short lower-case name such as {', '.join(KNOWN_CLOUDS)}")
    by_cloud: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        p = Path(f).expanduser()
        if not p.is_file():
            raise UserError(f"{p}: no such file (give SkyPilot vms.csv files)")
        c = (cloud or detect_cloud(p) or "").lower()
        if not c:
            raise UserError(f"{p}: cannot tell which cloud this file is for; pass --cloud NAME "
                            f"(one of {', '.join(KNOWN_CLOUDS)} or your own)")
        by_cloud[c].append(p)
    if as_of is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of):
        raise UserError(f"--as-of {as_of!r}: give an ISO date such as 2026-05-20")
    reports = []
    for c, paths in by_cloud.items():
        report = ImportReport(cloud=c)
        rows: list[_Row] = []
        has_acc_cols: dict[Path, bool] = {}
        infos = {p: read_source_txt(p) for p in paths}
        for p in paths:
            rs, has_acc = read_skypilot_csv(p)
            has_acc_cols[p] = has_acc
            report.rows_read += len(rs)
            rows.extend(rs)
        # files without accelerator columns (price-only extracts) borrow them from the same type
        known: dict[str, _Row] = {}
        for r in rows:
            if r.acc_name and r.instance_type:
                known.setdefault(r.instance_type, r)
        for r in rows:
            if not has_acc_cols[r.file] and r.instance_type in known:
                k = known[r.instance_type]
                r.acc_name, r.acc_count, r.vcpus, r.ram_gib, r.gpu_mib = k.acc_name, k.acc_count, k.vcpus, k.ram_gib, k.gpu_mib
        # same (type, zone) in two files: the later file wins
        dedup: dict[tuple, _Row] = {}
        for r in rows:
            dedup[(r.instance_type, r.region, r.zone, r.acc_name, r.acc_count)] = r
        rows = list(dedup.values())
        sources = {p: infos[p].describe(p) for p in paths}
        main = paths[0]
        source = sources[main] if len(set(sources.values())) == 1 else "; ".join(sorted(set(sources.values())))
        date = as_of or next((infos[p].date for p in paths if infos[p].date), "") or "unknown"
        offers = import_rows(c, rows, catalog, source=source, as_of=date, report=report)
        text = render_toml(c, offers, source=source, as_of=date, version=__version__)
        out = Path(out_dir).expanduser() / f"{c}.toml"
        if write:
            write_atomic(out, text)
        report.out_path = out
        reports.append(report)
    return reports
