"""Checking one catalog file: every problem as ``file:line: field: message``.

A file may hold ``[[accelerator]]``, ``[[model]]`` and ``[[instance]]`` entries plus a ``[meta]``
table (``cloud``, ``source``, ``as_of`` defaults for its instances). Accelerators and models are
validated by pydantic (:func:`fleet_tui.core.tomlio.validate_table`, :mod:`fleet_tui.core.records`);
instance rows are type-checked by hand here (thousands of them: see :mod:`fleet_tui.core.catalog.models`).

Whether an instance's accelerator exists is decided later, across files, by
:func:`fleet_tui.core.catalog.loading.build_catalog`.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fleet_tui.core.catalog.clouds import registered_cloud
from fleet_tui.core.catalog.models import PRICE_FIELD, PRICING_OPTIONS, Instance, unknown_message
from fleet_tui.core.limits import MIN_PRICE_USD_PER_HOUR, limit
from fleet_tui.core.modelspec import ModelArch
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.tomlio import TomlDoc, problem, read_toml, validate_table

TABLES = ("accelerator", "model", "instance", "meta")
META_KEYS = {"cloud": str, "source": str, "as_of": str, "notes": str, "generated_by": str}
REQUIRED_TEXT = ("cloud", "instance_type", "region", "accelerator")

_INSTANCE_FIELDS = {f.name for f in fields(Instance)}
_NUMBER_FIELDS = {
    "accelerator_count": "positive", "accelerator_memory_gib": "positive", "vcpus": "nonneg",
    "ram_gib": "nonneg", "on_demand_usd_per_hour": "price", "spot_usd_per_hour": "price",
    "reserved_1y_usd_per_hour": "price", "reserved_3y_usd_per_hour": "price",
}
_STR_FIELDS = ("cloud", "instance_type", "region", "accelerator", "source", "as_of")
# physical ranges: beyond them a value is a typo or a unit slip, and one such offer would rank
# first (1e12 devices, a price of 1e-300). Devices: core.limits; memory: the largest device has
# 288 GB; vCPUs and RAM: ~16x today's largest machines.
_NUMBER_RANGE = {
    "accelerator_count": (0.0, limit("instance_devices")),
    "accelerator_memory_gib": (0.0, 4096.0),
    "vcpus": (0.0, 16384.0),
    "ram_gib": (0.0, 262144.0),
    **{k: (MIN_PRICE_USD_PER_HOUR, limit("price_usd_per_hour"))
       for k, kind in _NUMBER_FIELDS.items() if kind == "price"},
}


def _in_range(key: str, value: float) -> bool:
    low, high = _NUMBER_RANGE[key]
    return value <= high and (value >= low or low == 0.0)


@dataclass
class FileResult:
    """One file read and checked. ``rows`` are ``(index, checked row)`` before their accelerator
    is resolved; a file with any ``problems`` must load nothing."""

    path: Path
    accelerators: list[Accelerator] = field(default_factory=list)
    models: list[ModelArch] = field(default_factory=list)
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    doc: TomlDoc | None = None
    problems: list[str] = field(default_factory=list)


def check_meta(doc: TomlDoc, out: list[str]) -> dict[str, str]:
    """The file's ``[meta]`` strings; problems appended to ``out``."""
    meta = doc.data.get("meta", {})
    if not isinstance(meta, dict):
        out.append(problem(doc.path, doc.line_of("meta"), "meta", "must be a table ([meta])"))
        return {}
    for k, v in meta.items():
        if k not in META_KEYS:
            out.append(problem(doc.path, doc.line_of(None, key=k) or doc.line_of("meta"), f"meta.{k}",
                               f"unknown key (allowed: {', '.join(META_KEYS)})"))
        elif not isinstance(v, str):
            out.append(problem(doc.path, doc.line_of(None, key=k), f"meta.{k}", "must be a string"))
    return {k: v for k, v in meta.items() if isinstance(v, str)}


def _is_number(v: Any) -> bool:
    """A TOML int or float a float can hold (a 400-digit int is not one: float() overflows)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return isinstance(v, float) or abs(v) <= 2**1023


class _RowProblems:
    """The problems of one instance row, each naming the file, line and ``instance[i].key``."""

    def __init__(self, doc: TomlDoc, i: int, out: list[str]) -> None:
        self.doc, self.i, self.out = doc, i, out
        self.bad = False

    def __call__(self, key: str, msg: str) -> None:
        self.bad = True
        self.out.append(problem(self.doc.path, self.doc.line_of("instance", self.i, key),
                                f"instance[{self.i}].{key}", msg))


def check_instance(doc: TomlDoc, i: int, row: Any, meta: dict[str, str], out: list[str]) -> dict | None:
    """Type-check one instance row; returns the normalised dict or None (problems appended)."""
    if not isinstance(row, dict):
        out.append(problem(doc.path, doc.line_of("instance", i), f"instance[{i}]", "must be a table"))
        return None
    err = _RowProblems(doc, i, out)
    for k in row:
        if k not in _INSTANCE_FIELDS:
            near = difflib.get_close_matches(k, sorted(_INSTANCE_FIELDS), n=1)
            err(k, f"unknown key '{k}'" + (f"; did you mean '{near[0]}'?" if near else ""))
    d: dict[str, Any] = {}
    _text_fields(row, meta, err, d)
    _number_fields(row, err, d)
    if "accelerator_count" not in row:
        err("accelerator_count", "required field is missing")
    _other_fields(row, err, d)
    if err.bad:
        return None
    has_price = any(k in d for k in PRICE_FIELD.values())
    if not has_price and "excluded" not in d:
        err("on_demand_usd_per_hour", "missing price: give on_demand_usd_per_hour and/or "
            "spot_usd_per_hour (USD per hour, > 0), or set `excluded` to say why there is none")
        return None
    return d


def _text_fields(row: dict, meta: dict[str, str], err: _RowProblems, d: dict[str, Any]) -> None:
    """The text fields (``[meta]`` fills the missing ones): required, non-empty, a registered cloud spelt
    as registered."""
    for k in _STR_FIELDS:
        v = row.get(k, meta.get(k))
        if v is None:
            if k in REQUIRED_TEXT:
                err(k, "required field is missing" + (" (or set it in [meta])" if k == "cloud" else ""))
            continue
        if not isinstance(v, str) or (k != "source" and k != "as_of" and not v.strip()):
            err(k, f"must be a non-empty string (got {v!r})")
            continue
        if k == "cloud" and (known := registered_cloud(v)) is not None and v != known.id:
            err(k, f"'{v}' is the registered cloud '{known.id}' ({known.name}): write '{known.id}' so its "
                "offers, filters and prices count as one cloud")
            continue
        d[k] = v


def _number_fields(row: dict, err: _RowProblems, d: dict[str, Any]) -> None:
    """The numeric fields: finite, of the right sign and within their physical range."""
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
        elif not _in_range(k, v):
            low, high = _NUMBER_RANGE[k]
            err(k, f"{v!r} is outside the physical range {low:g}-{high:g}"
                + (" USD per hour" if kind == "price" else ""))
        else:
            d[k] = float(v)


def _other_fields(row: dict, err: _RowProblems, d: dict[str, Any]) -> None:
    """Zones, the reserved-estimated mark, flags, excluded pricing options and the exclusion reason."""
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


def _check_tables(doc: TomlDoc, out: list[str]) -> None:
    for key in doc.data:
        if key not in TABLES:
            near = difflib.get_close_matches(key, TABLES, n=1)
            out.append(problem(doc.path, doc.line_of(None, key=key) or doc.line_of(key), key,
                               f"unknown table or key '{key}'" + (f"; did you mean '{near[0]}'?" if near else "")
                               + " (allowed: [[accelerator]], [[model]], [[instance]], [meta])"))


def read_catalog_file(path: Path) -> FileResult:
    """Parse and check one catalog file (every entry, every problem)."""
    res = FileResult(path)
    doc, probs = read_toml(path)
    if doc is None:
        res.problems = probs
        return res
    res.doc = doc
    out: list[str] = []
    _check_tables(doc, out)
    res.meta = check_meta(doc, out)
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
        d = check_instance(doc, i, item, res.meta, out)
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


def unknown_accelerator_problems(r: FileResult, index: dict[str, str], names: list[str],
                                 hint: str = "") -> list[str]:
    """A problem for each offer of ``r`` naming an accelerator missing from ``index`` (lower-case
    name -> id); offers ``excluded`` anyway may name any device."""
    assert r.doc is not None
    return [problem(r.path, r.doc.line_of("instance", i, "accelerator"), f"instance[{i}].accelerator",
                    unknown_message("accelerator", d["accelerator"], names) + hint)
            for i, d in r.rows
            if d["accelerator"].strip().lower() not in index and "excluded" not in d]
