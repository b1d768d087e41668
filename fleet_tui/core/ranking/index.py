"""The catalog prepared for ranking: rows grouped by (accelerator, devices, links, marketplace tier),
prices pulled out. Rows of instance types with different networks (``interconnects.toml``) size and
run apart: the same 8×H100 is fast across nodes on EFA and slow on an unknown marketplace network.

Built once per catalog and kept in :mod:`fleet_tui.core.caches` (``ranking.index``): re-ranking
the same catalog after a constraint change re-uses it.
"""

from __future__ import annotations

from typing import Any, Hashable, NamedTuple

from fleet_tui.core import caches
from fleet_tui.core.interconnects import CloudTier, fabric_for, listed, marketplace_tier
from fleet_tui.core.pricing import PRICING_OPTIONS
from fleet_tui.core.records import record

# Instance's public price fields (what Instance.price() reads), by pricing option
PRICE_FIELDS = {
    "on-demand": "on_demand_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "reserved-1y": "reserved_1y_usd_per_hour",
    "reserved-3y": "reserved_3y_usd_per_hour",
}


class CatalogRow(NamedTuple):
    instance: Any  # the catalog Instance
    cloud_key: str  # cloud, lower case (for --cloud filters)
    region_key: str  # region, lower case
    prices: tuple  # list price per PRICING_OPTIONS entry, None when not offered / excluded


@record
class Group:
    """Catalog rows that run on the same devices: one sizing serves them all."""

    acc: Any
    spec: Hashable  # value key of the device as sized (its spec, and the slice fraction)
    devices: int  # per instance (1 for a slice)
    fraction: float | None  # a GPU slice's share of one device, else None
    vendor_key: str
    rows: tuple[CatalogRow, ...]
    fabric: Any = None  # interconnects.Fabric of these rows' instance type(s)
    marketplace: str = ""  # the cloud's marketplace reliability tier ("" for a cloud's own fleet)


@record
class CatalogIndex:
    accs: dict  # id or alias -> Accelerator
    specs: dict  # accelerator id -> its spec as JSON (a value key for caches)
    groups: tuple[Group, ...]
    excluded: int
    no_spec: int
    odd_count: int
    clouds: frozenset[str]
    regions: frozenset[str]
    vendors: frozenset[str]
    stacks: frozenset[str]

    def spec_key(self, acc, fraction: float | None = None) -> Hashable:
        return (self.specs[acc.id], fraction)


def vendor_key(vendor: str) -> str:
    """``NVIDIA (AWS-specific SKU)`` -> ``nvidia``: the company, for --vendor filters."""
    return vendor.split("(")[0].strip().lower()


def accelerator_index(catalog) -> dict[str, Any]:
    """Accelerators by id and by alias (an alias never shadows an id)."""
    accs = catalog.accelerators
    values = accs.values() if isinstance(accs, dict) else accs
    index: dict[str, Any] = {}
    for a in values:
        index[a.id] = a
    for a in values:
        for alias in getattr(a, "aliases", ()) or ():
            index.setdefault(alias, a)
    return index


def slice_accelerator(acc, fraction: float):
    """A fractional GPU (Azure NVads A10 v5 partitions): ``fraction`` of its memory and speed."""
    bw = acc.memory_bandwidth_gbs
    return acc.model_copy(update={
        "id": f"{acc.id}[{fraction:g}]",
        "memory_gib": acc.memory_gib * fraction,
        "memory_bandwidth_gbs": bw * fraction if bw else bw,
        "peak_tflops": {k: v * fraction for k, v in acc.peak_tflops.items()},
    })


def catalog_index(catalog) -> CatalogIndex:
    """The ranking index of ``catalog``, built once per catalog and kept in ``ranking.index``."""
    instances, accelerators = catalog.instances, catalog.accelerators
    # Keyed by the catalog's row list and accelerator table themselves, not by their content: the
    # bench (bench_recommend.py) shows that hashing every row on every call costs 1-4 ms of a
    # 3 ms repeated ranking of the bundled catalog and 26 ms for 100k offers. The ids are safe as
    # a key because the entry holds both objects, so no other object can take their ids while it
    # is cached; ``len`` notices rows appended in place.
    key = ("catalog", id(instances), len(instances), id(accelerators))
    entry = caches.memo("ranking.index", 8).get_or_compute(
        key, lambda: (instances, accelerators, _build(catalog)))
    return entry[2]


def _build(catalog) -> CatalogIndex:
    instances = catalog.instances
    accs = accelerator_index(catalog)
    groups: dict[tuple, list[CatalogRow]] = {}
    tiers: dict[str, CloudTier | None] = {}  # cloud -> its marketplace tier (None: none)
    excluded = no_spec = odd = 0
    for inst in instances:
        if inst.excluded:
            excluded += 1
            continue
        acc = accs.get(inst.accelerator)
        if acc is None:
            no_spec += 1
            continue
        count = inst.accelerator_count
        if count >= 1 and count != int(count):  # 1.5 devices: not a real configuration
            odd += 1
            continue
        # Instance.price() semantics: None when not offered or that option is excluded
        prices = tuple(None if p in inst.excluded_pricing else getattr(inst, PRICE_FIELDS[p])
                       for p in PRICING_OPTIONS)
        devices = int(count) if count >= 1 else 1
        if listed(inst.cloud, inst.instance_type):
            fabric = fabric_for(acc.id, devices, inst.cloud, inst.instance_type, acc.software_stack)
        else:  # the device's own link, an unknown network (one cached answer per device count)
            fabric = fabric_for(acc.id, devices, None, None, acc.software_stack)
        if inst.cloud not in tiers:
            tiers[inst.cloud] = marketplace_tier(inst.cloud)
        tier = tiers[inst.cloud]
        groups.setdefault((acc.id, count, fabric, tier.reliability if tier else ""), []).append(
            CatalogRow(inst, inst.cloud.lower(), inst.region.lower(), prices))
    unique = {a.id: a for a in accs.values()}
    specs = {acc_id: a.model_dump_json() for acc_id, a in unique.items()}
    built = []
    for (acc_id, count, fabric, tier), rows in groups.items():
        fraction = None if count >= 1 else count
        built.append(Group(
            acc=accs[acc_id], spec=(specs[acc_id], fraction), devices=int(count) if count >= 1 else 1,
            fraction=fraction, vendor_key=vendor_key(accs[acc_id].vendor), rows=tuple(rows),
            fabric=fabric, marketplace=tier))
    return CatalogIndex(
        accs=accs, specs=specs, groups=tuple(built), excluded=excluded, no_spec=no_spec,
        odd_count=odd,
        clouds=frozenset(i.cloud for i in instances), regions=frozenset(i.region for i in instances),
        vendors=frozenset(a.vendor.split("(")[0].strip() for a in unique.values()),
        stacks=frozenset(a.software_stack for a in unique.values()),
    )
