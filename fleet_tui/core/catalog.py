"""The catalog: accelerators, model architectures and cloud instance offers loaded from TOML.

Load order (same id: the later one wins): the bundled ``catalogs/`` directory, then the user's
``$XDG_CONFIG_HOME/fleet-tui/catalogs/``, then each ``--catalog-dir``. In each directory every
``*.toml`` and ``instances/*.toml`` is read (``workloads.toml`` belongs to the scenarios code). A file
may hold ``[[accelerator]]``, ``[[model]]`` and ``[[instance]]`` entries plus a ``[meta]`` table
(``cloud``, ``source``, ``as_of`` defaults for its instances).

A broken file never stops loading: every problem is recorded in ``Catalog.problems`` as
``file:line: field: message`` and the file is skipped whole, so nothing is half-loaded from it.

Instance rows (thousands) are plain frozen dataclasses checked by hand, not pydantic models: that
keeps loading the bundled catalog fast (see bench/bench_catalog.py); accelerators and models are few
and go through pydantic.
"""

from __future__ import annotations

import difflib
import math
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from fleet_tui.core import paths
from fleet_tui.core.errors import UserError
from fleet_tui.core.tomlio import TomlDoc, problem, read_toml, validate_table

Pricing = Literal["on-demand", "spot", "reserved-1y", "reserved-3y"]
PRICING_OPTIONS: tuple[str, ...] = ("on-demand", "spot", "reserved-1y", "reserved-3y")
_PRICE_FIELD = {
    "on-demand": "on_demand_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "reserved-1y": "reserved_1y_usd_per_hour",
    "reserved-3y": "reserved_3y_usd_per_hour",
}
SKIPPED_FILES = frozenset({"workloads.toml", "interconnects.toml", "capabilities.toml"})  # loaded by core.scenarios, core.interconnects, core.capabilities
_TABLES = ("accelerator", "model", "instance", "meta")
_META_KEYS = {"cloud": str, "source": str, "as_of": str, "notes": str, "generated_by": str}


@dataclass(frozen=True, slots=True)
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

    def price(self, pricing: str = "on-demand") -> float | None:
        """USD/hour for ``pricing``; None when not offered or that price must not be ranked."""
        try:
            attr = _PRICE_FIELD[pricing]
        except KeyError:
            raise UserError(f"unknown pricing '{pricing}'; allowed: {', '.join(PRICING_OPTIONS)}") from None
        if self.excluded is not None or pricing in self.excluded_pricing:
            return None
        return getattr(self, attr)

    def raw_price(self, pricing: str = "on-demand") -> float | None:
        """The listed price even when flagged or excluded (for display)."""
        return getattr(self, _PRICE_FIELD[pricing])

    def usd_per_gpu_hour(self, pricing: str = "on-demand") -> float | None:
        p = self.price(pricing)
        return None if p is None or not self.accelerator_count else p / self.accelerator_count


_INSTANCE_FIELDS = {f.name for f in fields(Instance)}
_NUMBER_FIELDS = {
    "accelerator_count": "positive", "accelerator_memory_gib": "positive", "vcpus": "nonneg",
    "ram_gib": "nonneg", "on_demand_usd_per_hour": "price", "spot_usd_per_hour": "price",
    "reserved_1y_usd_per_hour": "price", "reserved_3y_usd_per_hour": "price",
}
_STR_FIELDS = ("cloud", "instance_type", "region", "accelerator", "source", "as_of")


@dataclass
class Catalog:
    """Everything loaded. Look-ups by id or alias are case-insensitive."""

    accelerators: dict[str, Any] = field(default_factory=dict)  # id -> Accelerator
    models: dict[str, Any] = field(default_factory=dict)  # id -> ModelArch
    instances: list[Instance] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)  # file -> {source, as_of, ...}
    files: list[str] = field(default_factory=list)  # files loaded, in order
    _acc_index: dict[str, str] = field(default_factory=dict, repr=False)
    _model_index: dict[str, str] = field(default_factory=dict, repr=False)
    _type_index: dict[str, list[Instance]] | None = field(default=None, repr=False)

    # -- accelerators -------------------------------------------------------------------------
    def _reindex(self) -> None:
        idx: dict[str, str] = {}
        for acc in self.accelerators.values():  # ids win over aliases of other devices
            for name in (*acc.aliases, acc.name):
                if name:
                    idx.setdefault(name.lower(), acc.id)
        for acc in self.accelerators.values():
            idx[acc.id.lower()] = acc.id
        self._acc_index = idx
        midx: dict[str, str] = {}
        for m in self.models.values():
            if m.name:
                midx.setdefault(m.name.lower(), m.id)
        for m in self.models.values():
            midx[m.id.lower()] = m.id
        self._model_index = midx
        self._type_index = None

    def resolve_accelerator(self, name: str) -> str | None:
        """Accelerator id for an id, alias or name (case-insensitive), or None."""
        return self._acc_index.get(str(name).strip().lower())

    def accelerator(self, name: str):
        """The :class:`~fleet_tui.core.specs.Accelerator` called ``name`` (id or alias)."""
        acc_id = self.resolve_accelerator(name)
        if acc_id is None:
            raise UserError(_unknown("accelerator", name, list(self.accelerators)
                                     + [a for acc in self.accelerators.values() for a in acc.aliases]))
        return self.accelerators[acc_id]

    def model(self, name: str):
        """The :class:`~fleet_tui.core.modelspec.ModelArch` called ``name`` (id or name)."""
        mid = self._model_index.get(str(name).strip().lower())
        if mid is None:
            raise UserError(_unknown("model", name, list(self.models)))
        return self.models[mid]

    # -- instances ----------------------------------------------------------------------------
    def find_instance(self, instance_type: str, region: str | None = None) -> list[Instance]:
        """Offers of ``instance_type`` (case-insensitive), optionally in one ``region``."""
        if self._type_index is None:
            index: dict[str, list[Instance]] = {}
            for inst in self.instances:
                index.setdefault(inst.instance_type.lower(), []).append(inst)
            self._type_index = index
        rows = self._type_index.get(str(instance_type).strip().lower())
        if not rows:
            raise UserError(_unknown("instance type", instance_type,
                                     sorted({i.instance_type for i in self.instances})))
        if region is None:
            return list(rows)
        picked = [r for r in rows if r.region.lower() == region.strip().lower()]
        if not picked:
            regions = sorted({r.region for r in rows})
            raise UserError(_unknown(f"region for {rows[0].instance_type}", region, regions, show_all=True))
        return picked

    def instance_types(self, name: str) -> list[Instance]:
        """Alias of :meth:`find_instance` without a region."""
        return self.find_instance(name)

    @property
    def clouds(self) -> list[str]:
        return sorted({i.cloud for i in self.instances})


def _unknown(kind: str, name: str, known: Sequence[str], show_all: bool = False) -> str:
    known_unique = sorted(set(known), key=str.lower)
    lower = {k.lower(): k for k in known_unique}
    near = difflib.get_close_matches(str(name).lower(), list(lower), n=5, cutoff=0.5)
    msg = f"unknown {kind} '{name}'"
    if near:
        msg += "; did you mean " + ", ".join(lower[n] for n in near) + "?"
    if show_all or not near:
        shown = known_unique[:30]
        msg += " Known: " + ", ".join(shown) + (" …" if len(known_unique) > 30 else "")
    return msg


# -- loading -----------------------------------------------------------------------------------

@dataclass
class _FileResult:
    path: Path
    accelerators: list[Any]
    models: list[Any]
    rows: list[tuple[int, dict[str, Any]]]  # (index, checked row) before accelerator resolution
    meta: dict[str, str]
    doc: TomlDoc | None
    problems: list[str]


def catalog_files(directory: Path) -> list[Path]:
    """The catalog files of one directory, in load order."""
    if not directory.is_dir():
        return []
    top = sorted(p for p in directory.glob("*.toml") if p.name not in SKIPPED_FILES)
    # accelerators first so a directory's instances can use the devices it defines
    top.sort(key=lambda p: (p.name != "accelerators.toml", p.name))
    return top + sorted((directory / "instances").glob("*.toml"))


def _check_meta(doc: TomlDoc, out: list[str]) -> dict[str, str]:
    meta = doc.data.get("meta", {})
    if not isinstance(meta, dict):
        out.append(problem(doc.path, doc.line_of("meta"), "meta", "must be a table ([meta])"))
        return {}
    for k, v in meta.items():
        if k not in _META_KEYS:
            out.append(problem(doc.path, doc.line_of(None, key=k) or doc.line_of("meta"), f"meta.{k}",
                               f"unknown key (allowed: {', '.join(_META_KEYS)})"))
        elif not isinstance(v, str):
            out.append(problem(doc.path, doc.line_of(None, key=k), f"meta.{k}", "must be a string"))
    return {k: v for k, v in meta.items() if isinstance(v, str)}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_instance(doc: TomlDoc, i: int, row: Any, meta: dict[str, str], out: list[str]) -> dict | None:
    """Type-check one instance row; returns the normalised dict or None (problems appended)."""
    path = doc.path
    where = f"instance[{i}]"
    if not isinstance(row, dict):
        out.append(problem(path, doc.line_of("instance", i), where, "must be a table"))
        return None
    bad = False

    def err(key: str, msg: str) -> None:
        nonlocal bad
        bad = True
        out.append(problem(path, doc.line_of("instance", i, key), f"{where}.{key}", msg))

    for k in row:
        if k not in _INSTANCE_FIELDS:
            near = difflib.get_close_matches(k, sorted(_INSTANCE_FIELDS), n=1)
            err(k, f"unknown key '{k}'" + (f"; did you mean '{near[0]}'?" if near else ""))
    d: dict[str, Any] = {}
    for k in _STR_FIELDS:
        v = row.get(k, meta.get(k))
        if v is None:
            if k in ("cloud", "instance_type", "region", "accelerator"):
                err(k, "required field is missing" + (" (or set it in [meta])" if k == "cloud" else ""))
            continue
        if not isinstance(v, str) or (k != "source" and k != "as_of" and not v.strip()):
            err(k, f"must be a non-empty string (got {v!r})")
            continue
        d[k] = v
    for k, kind in _NUMBER_FIELDS.items():
        if k not in row:
            continue
        v = row[k]
        if not _is_number(v) or not math.isfinite(v):
            err(k, f"must be a number (got {v!r})")
        elif kind in ("positive", "price") and v <= 0:
            err(k, f"must be > 0 (got {v!r})" + ("; leave the key out when there is no such price"
                                                  if kind == "price" else ""))
        elif kind == "nonneg" and v < 0:
            err(k, f"must be >= 0 (got {v!r})")
        else:
            d[k] = float(v)
    if "accelerator_count" not in row:
        err("accelerator_count", "required field is missing")
    if "zones" in row:
        z = row["zones"]
        if not isinstance(z, int) or isinstance(z, bool) or z < 0:
            err("zones", f"must be a whole number >= 0 (got {z!r})")
        else:
            d["zones"] = z
    if "reserved_estimated" in row:
        if not isinstance(row["reserved_estimated"], bool):
            err("reserved_estimated", f"must be true or false (got {row['reserved_estimated']!r})")
        else:
            d["reserved_estimated"] = row["reserved_estimated"]
    for k in ("flags", "excluded_pricing"):
        if k in row:
            v = row[k]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                err(k, f"must be a list of strings (got {v!r})")
            elif k == "excluded_pricing" and (unknown := [x for x in v if x not in PRICING_OPTIONS]):
                err(k, f"unknown pricing {unknown[0]!r}; allowed: {', '.join(PRICING_OPTIONS)}")
            else:
                d[k] = tuple(v)
    if "excluded" in row:
        v = row["excluded"]
        if not isinstance(v, str) or not v.strip():
            err("excluded", f"must be a non-empty string giving the reason (got {v!r})")
        else:
            d["excluded"] = v
    if bad:
        return None
    has_price = any(k in d for k in _PRICE_FIELD.values())
    if not has_price and "excluded" not in d:
        err("on_demand_usd_per_hour", "missing price: give on_demand_usd_per_hour and/or "
            "spot_usd_per_hour (USD per hour, > 0), or set `excluded` to say why there is none")
        return None
    return d


def _read_file(path: Path) -> _FileResult:
    from fleet_tui.core.modelspec import ModelArch
    from fleet_tui.core.specs import Accelerator

    res = _FileResult(path, [], [], [], {}, None, [])
    doc, probs = read_toml(path)
    if doc is None:
        res.problems = probs
        return res
    res.doc = doc
    out: list[str] = []
    for key in doc.data:
        if key not in _TABLES:
            near = difflib.get_close_matches(key, _TABLES, n=1)
            out.append(problem(path, doc.line_of(None, key=key) or doc.line_of(key), key,
                               f"unknown table or key '{key}'" + (f"; did you mean '{near[0]}'?" if near else "")
                               + " (allowed: [[accelerator]], [[model]], [[instance]], [meta])"))
    res.meta = _check_meta(doc, out)
    for table, model, sink in (("accelerator", Accelerator, res.accelerators), ("model", ModelArch, res.models)):
        entries, probs = validate_table(doc, table, model)
        out.extend(probs)
        sink.extend(obj for _i, obj in entries)
    raw = doc.data.get("instance", [])
    if not isinstance(raw, list):
        out.append(problem(path, doc.line_of("instance"), "instance", "must be an array of tables ([[instance]])"))
        raw = []
    seen_keys: dict[tuple, int] = {}
    for i, item in enumerate(raw):
        d = _check_instance(doc, i, item, res.meta, out)
        if d is None:
            continue
        key = (d["cloud"].lower(), d["instance_type"].lower(), d["region"].lower())
        if key in seen_keys:
            out.append(problem(path, doc.line_of("instance", i, "instance_type"), f"instance[{i}].instance_type",
                               f"duplicate offer {d['cloud']}/{d['instance_type']}/{d['region']} (first at line "
                               f"{doc.line_of('instance', seen_keys[key])})"))
            continue
        seen_keys[key] = i
        res.rows.append((i, d))
    res.problems = out
    return res


def _build_instance(d: dict[str, Any], acc) -> Instance:
    kw = dict(d)
    kw["accelerator"] = acc.id if acc is not None else d["accelerator"]
    if "accelerator_memory_gib" not in kw:
        kw["accelerator_memory_gib"] = float(acc.memory_gib) if acc is not None else 0.0
    return Instance(**kw)


def build_catalog(files: Sequence[Path], user_files: Iterable[Path] = ()) -> Catalog:
    """Load ``files`` in order (later same id wins) into a :class:`Catalog`.

    A file with any problem is skipped whole and its problems recorded.
    """
    results = [_read_file(p) for p in files]
    cat = Catalog()
    good = [r for r in results if not r.problems]
    for r in results:
        cat.problems.extend(r.problems)
    # accelerators and models from every good file, then instances resolved against them. A file
    # whose instances name an unknown accelerator is dropped whole and the merge redone.
    dropped_all: list = []
    while True:
        accs: dict[str, Any] = {}
        models: dict[str, Any] = {}
        for r in good:
            for a in r.accelerators:
                for k in [k for k in accs if k.lower() == a.id.lower()]:
                    del accs[k]
                accs[a.id] = a
            for m in r.models:
                for k in [k for k in models if k.lower() == m.id.lower()]:
                    del models[k]
                models[m.id] = m
        cat.accelerators, cat.models = accs, models
        cat._reindex()
        dropped = []
        for r in good:
            probs = []
            for i, d in r.rows:
                if cat.resolve_accelerator(d["accelerator"]) is None and "excluded" not in d:
                    names = list(accs) + [a for acc in accs.values() for a in acc.aliases]
                    probs.append(problem(r.path, r.doc.line_of("instance", i, "accelerator"),
                                         f"instance[{i}].accelerator", _unknown("accelerator", d["accelerator"], names)
                                         + " Add it to an accelerators file or fix the name."))
            if probs:
                r.problems = probs
                dropped.append(r)
        if not dropped:
            break
        dropped_all.extend(dropped)
        for r in dropped:
            cat.problems.extend(r.problems)
        good = [r for r in good if r not in dropped]
    # files rejected for other problems: still report instances naming unknown accelerators
    # (validate shows all), once: the files dropped above have reported theirs
    reported = {id(r) for r in dropped_all}
    for r in results:
        if r.problems and r.doc is not None and r not in good and id(r) not in reported:
            for i, d in r.rows:
                if cat.resolve_accelerator(d["accelerator"]) is None and "excluded" not in d:
                    cat.problems.append(problem(
                        r.path, r.doc.line_of("instance", i, "accelerator"), f"instance[{i}].accelerator",
                        _unknown("accelerator", d["accelerator"], list(cat.accelerators))))
    merged: dict[tuple[str, str, str], Instance] = {}
    for r in good:
        for _, d in r.rows:
            acc_id = cat.resolve_accelerator(d["accelerator"])
            inst = _build_instance(d, cat.accelerators.get(acc_id) if acc_id else None)
            merged[(inst.cloud.lower(), inst.instance_type.lower(), inst.region.lower())] = inst
        meta = {k: v for k, v in r.meta.items() if k in ("cloud", "source", "as_of", "notes")}
        if r.accelerators and "source" not in meta:
            meta["source"] = f"{len(r.accelerators)} accelerators"
        cat.sources[str(r.path)] = meta
        cat.files.append(str(r.path))
    cat.instances = list(merged.values())
    cat._reindex()
    return cat


def catalog_dirs(extra_dirs: Sequence[Path | str] = (), include_user: bool = True) -> list[Path]:
    dirs = [paths.bundled_catalog_dir()]
    if include_user:
        dirs.append(paths.user_catalog_dir())
    dirs.extend(Path(d).expanduser() for d in extra_dirs)
    return dirs


_CACHE: dict[tuple, Catalog] = {}
_CACHE_LOCK = threading.Lock()


def load_catalog(extra_dirs: Sequence[Path | str] = (), include_user: bool = True, *,
                 reload: bool = False) -> Catalog:
    """Bundled catalog, then the user's, then each of ``extra_dirs`` (later same id wins).

    Cached per directory list and file modification times, so an edited file is re-read;
    ``reload=True`` forces a fresh load. A ``--catalog-dir`` that does not exist is a UserError;
    a missing user directory is simply empty.
    """
    for d in extra_dirs:
        p = Path(d).expanduser()
        if not p.is_dir():
            raise UserError(f"--catalog-dir {d}: not a directory (it should hold *.toml catalog files, "
                            "instances/*.toml optional)")
    dirs = catalog_dirs(extra_dirs, include_user)
    files = [f for d in dirs for f in catalog_files(d)]
    stamp = []
    for f in files:
        try:
            st = os.stat(f)
            stamp.append((str(f), st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append((str(f), 0, 0))
    key = (tuple(str(d) for d in dirs), tuple(stamp))
    with _CACHE_LOCK:
        if not reload and key in _CACHE:
            return _CACHE[key]
    cat = build_catalog(files)
    with _CACHE_LOCK:
        _CACHE.clear()  # keep only the latest: catalogs are a few MB
        _CACHE[key] = cat
    return cat


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def validate_paths(targets: Sequence[Path | str]) -> tuple[list[str], Catalog]:
    """Check files or directories as a catalog on top of the bundled one.

    Instances may name accelerators from the bundled catalog. Returns ``(problems, catalog)``.
    """
    files: list[Path] = []
    problems: list[str] = []
    for t in targets:
        p = Path(t).expanduser()
        if p.is_dir():
            found = catalog_files(p)
            if not found:
                problems.append(f"{p}: no *.toml catalog files in this directory")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            problems.append(f"{p}: no such file or directory")
    bundled = catalog_files(paths.bundled_catalog_dir())
    bundled_resolved = {b.resolve() for b in bundled}
    extra = [f for f in files if f.resolve() not in bundled_resolved]
    cat = build_catalog(bundled + extra)
    return problems + cat.problems, cat
