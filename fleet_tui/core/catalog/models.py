"""What the catalog holds: :class:`Instance` (one offer) and :class:`Catalog` (everything loaded).

Instance rows (thousands) are plain frozen dataclasses checked by hand in
:mod:`fleet_tui.core.catalog.validation`, not pydantic models: that keeps loading the bundled
catalog fast (see bench/bench_catalog.py). Accelerators and models are few; they are records
(:class:`~fleet_tui.core.specs.Accelerator`, :class:`~fleet_tui.core.modelspec.ModelArch`) that
pydantic validates when their file is read (:mod:`fleet_tui.core.records`).

A catalog's offers may be *lazy*: a catalog read from the compiled cache
(:mod:`fleet_tui.core.catalog.compiled`) builds its :class:`Instance` rows only when asked, and
:meth:`Catalog.offers_of` builds only one accelerator's, so a command that sizes one device never
pays for the other 2,700 offers.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from fleet_tui.core.catalog import names
from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record

Pricing = Literal["on-demand", "spot", "reserved-1y", "reserved-3y"]
PRICING_OPTIONS: tuple[str, ...] = ("on-demand", "spot", "reserved-1y", "reserved-3y")
PRICE_FIELD = {
    "on-demand": "on_demand_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "reserved-1y": "reserved_1y_usd_per_hour",
    "reserved-3y": "reserved_3y_usd_per_hour",
}


def check_pricing(pricing: str) -> str:
    """``pricing`` itself, or a UserError naming the allowed options."""
    if pricing not in PRICE_FIELD:
        raise UserError(f"unknown pricing '{pricing}'; allowed: {', '.join(PRICING_OPTIONS)}")
    return pricing


@record
class Instance:
    """One offer: an instance type in one region of one cloud, with its hourly prices.

    Prices are USD per hour for the whole instance. ``flags`` name anomalies found in the source
    (shown next to the offer); ``excluded`` says why the whole offer must not be ranked;
    ``excluded_pricing`` lists pricing options whose price must not be ranked (e.g. a spot price
    above on-demand). :meth:`price` already honours both.
    """

    cloud: str
    instance_type: str
    region: str
    accelerator: str  # Accelerator.id
    accelerator_count: float
    accelerator_memory_gib: float  # per device
    vcpus: float | None = None
    ram_gib: float | None = None
    zones: int = 1
    on_demand_usd_per_hour: float | None = None
    spot_usd_per_hour: float | None = None
    reserved_1y_usd_per_hour: float | None = None
    reserved_3y_usd_per_hour: float | None = None
    reserved_estimated: bool = False
    flags: tuple[str, ...] = ()
    excluded: str | None = None
    excluded_pricing: tuple[str, ...] = ()
    source: str = ""
    as_of: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cloud, self.instance_type, self.region)

    @property
    def total_accelerator_memory_gib(self) -> float:
        return self.accelerator_count * self.accelerator_memory_gib

    @property
    def flag_codes(self) -> tuple[str, ...]:
        """Each flag's code, without its detail (``"count-fix: ..."`` -> ``"count-fix"``): what a
        table column has room for."""
        return tuple(f.split(":", 1)[0] for f in self.flags)

    def price(self, pricing: str = "on-demand") -> float | None:
        """USD/hour for ``pricing``; None when not offered or that price must not be ranked."""
        attr = PRICE_FIELD.get(pricing) or PRICE_FIELD[check_pricing(pricing)]
        if self.excluded is not None or pricing in self.excluded_pricing:
            return None
        return getattr(self, attr)

    def raw_price(self, pricing: str = "on-demand") -> float | None:
        """The listed price even when flagged or excluded (for display)."""
        return getattr(self, PRICE_FIELD[pricing])

    def usd_per_gpu_hour(self, pricing: str = "on-demand") -> float | None:
        p = self.price(pricing)
        return None if p is None or not self.accelerator_count else p / self.accelerator_count


class OfferSource(Protocol):
    """Where a lazy catalog gets its offers (the compiled cache implements it)."""

    def all_offers(self) -> list[Instance]: ...

    def offers_of(self, accelerator_id: str) -> list[Instance]: ...


def literal(text: str) -> str:
    """``text`` inside a :class:`~fleet_tui.core.errors.FieldError` template, braces kept as braces
    (a user's filter or path may hold them)."""
    return text.replace("{", "{{").replace("}", "}}")


def unknown_message(kind: str, name: str, known: Sequence[str], show_all: bool = False) -> str:
    """``unknown <kind> '<name>'`` with the closest known names (or all of them)."""
    known_unique = sorted(set(known), key=str.lower)
    lower = {k.lower(): k for k in known_unique}
    import difflib  # only for an error: importing it costs every command ~2 ms

    near = difflib.get_close_matches(str(name).lower(), list(lower), n=5, cutoff=0.5)
    msg = f"unknown {kind} '{name}'"
    if near:
        msg += "; did you mean " + ", ".join(lower[n] for n in near) + "?"
    if show_all or not near:
        shown = known_unique[:30]
        msg += " Known: " + ", ".join(shown) + (" …" if len(known_unique) > 30 else "")
    return msg


def accelerator_index(accelerators: Mapping[str, Any]) -> dict[str, str]:
    """Lower-case id, alias or name -> accelerator id. Ids win over other devices' aliases."""
    idx: dict[str, str] = {}
    for acc in accelerators.values():
        for name in (*acc.aliases, acc.name):
            if name:
                idx.setdefault(name.lower(), acc.id)
    for acc in accelerators.values():
        idx[acc.id.lower()] = acc.id
    return idx


def _model_index(models: Mapping[str, Any]) -> dict[str, str]:
    idx: dict[str, str] = {}
    for m in models.values():
        if m.name:
            idx.setdefault(m.name.lower(), m.id)
    for m in models.values():
        idx[m.id.lower()] = m.id
    return idx


class Catalog:
    """Everything loaded. Look-ups by id or alias are case-insensitive.

    ``accelerators`` (id -> Accelerator) and ``models`` (id -> ModelArch) are plain dicts;
    ``instances`` is the list of every offer, built on first use when the catalog came from the
    compiled cache; ``problems`` holds ``file:line: field: message`` for every file skipped;
    ``sources`` maps each file loaded to its ``[meta]`` (source, as_of, ...); ``files`` lists them
    in load order.
    """

    def __init__(self, accelerators: Mapping[str, Any] | None = None, models: Mapping[str, Any] | None = None,
                 instances: Sequence[Instance] | None = None, problems: Sequence[str] = (),
                 sources: Mapping[str, dict[str, str]] | None = None, files: Sequence[str] = (),
                 *, offers: OfferSource | None = None, offer_count: int | None = None):
        self.accelerators: dict[str, Any] = dict(accelerators or {})
        self.models: dict[str, Any] = dict(models or {})
        self.problems: list[str] = list(problems)
        self.sources: dict[str, dict[str, str]] = dict(sources or {})
        self.files: list[str] = list(files)
        self._offers = offers
        self._offer_count = offer_count
        self._instances: list[Instance] | None = None if offers is not None else list(instances or ())
        self._lock = threading.Lock()
        self._by_accelerator: dict[str, list[Instance]] = {}
        self._by_type: dict[str, list[Instance]] | None = None
        self._acc_index = accelerator_index(self.accelerators)
        self._model_index = _model_index(self.models)

    def __repr__(self) -> str:
        return (f"Catalog({len(self.accelerators)} accelerators, {len(self.models)} models, "
                f"{self.offer_count} offers, {len(self.problems)} problems)")

    # -- accelerators and models --------------------------------------------------------------
    @functools.cached_property
    def _acc_keys(self) -> dict[str, str]:
        # name keys (vendor words, separators and memory suffixes dropped: names.index), built at
        # the first look-up that no id, alias or name matches as written (--gpu H100 needs none)
        return names.index(self.accelerators)

    def resolve_accelerator(self, name: str) -> str | None:
        """Accelerator id for an id, alias or name as people write it, or None: case, separators,
        vendor words and a memory suffix do not matter (``'NVIDIA H100 80GB HBM3'``, ``h100_sxm``
        and ``'H100 80GB'`` are H100; :mod:`fleet_tui.core.catalog.names`)."""
        text = str(name).strip()
        return self._acc_index.get(text.lower()) or self._acc_keys.get(names.name_key(text))

    def accelerator(self, name: str):
        """The :class:`~fleet_tui.core.specs.Accelerator` called ``name`` (id or alias)."""
        acc_id = self.resolve_accelerator(name)
        if acc_id is None:
            raise UserError(unknown_message("accelerator", name, list(self.accelerators)
                                            + [a for acc in self.accelerators.values() for a in acc.aliases]))
        return self.accelerators[acc_id]

    def model(self, name: str):
        """The :class:`~fleet_tui.core.modelspec.ModelArch` called ``name`` (id or name)."""
        mid = self._model_index.get(str(name).strip().lower())
        if mid is None:
            raise UserError(unknown_message("model", name, list(self.models)))
        return self.models[mid]

    # -- offers -------------------------------------------------------------------------------
    @property
    def instances(self) -> list[Instance]:
        """Every offer (the same list object on every call)."""
        if self._instances is None:
            with self._lock:  # the app reads the catalog from worker threads: build it once
                if self._instances is None:
                    assert self._offers is not None
                    self._instances = self._offers.all_offers()
        return self._instances

    @instances.setter
    def instances(self, rows: Sequence[Instance]) -> None:
        self._instances = list(rows)
        self._offers = None
        self._by_accelerator = {}
        self._by_type = None

    @property
    def offer_count(self) -> int:
        """How many offers, without building them when the count is known."""
        if self._instances is None and self._offer_count is not None:
            return self._offer_count
        return len(self.instances)

    def offers_of(self, accelerator_id: str) -> list[Instance]:
        """The offers carrying accelerator ``accelerator_id`` (an id, not an alias), in catalog
        order; only those are built when the catalog is lazy."""
        rows = self._by_accelerator.get(accelerator_id)
        if rows is None:
            if self._instances is None and self._offers is not None:
                rows = self._offers.offers_of(accelerator_id)
            else:
                rows = [i for i in self.instances if i.accelerator == accelerator_id]
            self._by_accelerator[accelerator_id] = rows
        return rows

    def find_instance(self, instance_type: str, region: str | None = None) -> list[Instance]:
        """Offers of ``instance_type`` (case-insensitive), optionally in one ``region``."""
        if self._by_type is None:
            index: dict[str, list[Instance]] = {}
            for inst in self.instances:
                index.setdefault(inst.instance_type.lower(), []).append(inst)
            self._by_type = index
        rows = self._by_type.get(str(instance_type).strip().lower())
        if not rows:
            raise UserError(unknown_message("instance type", instance_type,
                                            sorted({i.instance_type for i in self.instances})))
        if region is None:
            return list(rows)
        picked = [r for r in rows if r.region.lower() == region.strip().lower()]
        if not picked:
            regions = sorted({r.region for r in rows})
            raise UserError(unknown_message(f"region for {rows[0].instance_type}", region, regions,
                                            show_all=True))
        return picked

    @property
    def clouds(self) -> list[str]:
        return sorted({i.cloud for i in self.instances})

