"""Filtering and sorting the catalog on typed values (the app shows a bounded page of the result).

``parse_filter("cloud=aws,accelerator=H100,price<40,memory>=80")`` turns the CLI's ``--filter``
mini-language into :class:`Condition` objects; :func:`query_instances` applies keyword filters and
conditions, sorts and cuts. The same conditions work on accelerator and model rows through
:func:`filter_rows`.

Grammar: comma-separated ``FIELD OP VALUE`` with OP one of ``= != < <= > >= ~`` (``~``: contains,
case-insensitive). Text fields compare case-insensitively; ``accelerator=`` accepts any alias.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fleet_tui.core.catalog.models import Catalog, Instance, check_pricing, literal, unknown_message
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.records import record

OPERATORS = ("<=", ">=", "!=", "=", "<", ">", "~")
_OP_RE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(<=|>=|!=|==|=|<|>|~)\s*(.*?)\s*$")

# Instance fields the filter and sort understand: name -> (getter(inst, pricing, catalog), kind)
_TEXT, _NUM = "text", "number"


def _vendor(i: Instance, c: Catalog | None) -> str:
    acc = c.accelerators.get(i.accelerator) if c is not None else None
    return acc.vendor if acc is not None else ""


def _stack(i: Instance, c: Catalog | None) -> str:
    acc = c.accelerators.get(i.accelerator) if c is not None else None
    return acc.software_stack if acc is not None else ""


INSTANCE_FIELDS: dict[str, tuple[Callable[[Instance, str, Catalog | None], Any], str]] = {
    "cloud": (lambda i, p, c: i.cloud, _TEXT),
    "region": (lambda i, p, c: i.region, _TEXT),
    "instance_type": (lambda i, p, c: i.instance_type, _TEXT),
    "accelerator": (lambda i, p, c: i.accelerator, _TEXT),
    "vendor": (lambda i, p, c: _vendor(i, c), _TEXT),
    "software_stack": (lambda i, p, c: _stack(i, c), _TEXT),
    "count": (lambda i, p, c: i.accelerator_count, _NUM),
    "memory": (lambda i, p, c: i.accelerator_memory_gib, _NUM),
    "total_memory": (lambda i, p, c: i.total_accelerator_memory_gib, _NUM),
    "vcpus": (lambda i, p, c: i.vcpus, _NUM),
    "ram": (lambda i, p, c: i.ram_gib, _NUM),
    "zones": (lambda i, p, c: i.zones, _NUM),
    "price": (lambda i, p, c: i.price(p), _NUM),
    "price_per_gpu": (lambda i, p, c: i.usd_per_gpu_hour(p), _NUM),
    "on_demand": (lambda i, p, c: i.price("on-demand"), _NUM),
    "spot": (lambda i, p, c: i.price("spot"), _NUM),
    "reserved_1y": (lambda i, p, c: i.price("reserved-1y"), _NUM),
    "reserved_3y": (lambda i, p, c: i.price("reserved-3y"), _NUM),
    "flagged": (lambda i, p, c: "yes" if i.flags else "no", _TEXT),
    "excluded": (lambda i, p, c: "yes" if i.excluded else "no", _TEXT),
}
FIELD_ALIASES = {
    "type": "instance_type", "instance": "instance_type", "gpu": "accelerator", "acc": "accelerator",
    "gpus": "count", "accelerator_count": "count", "mem": "memory", "memory_gib": "memory",
    "vram": "memory", "ram_gib": "ram", "cpus": "vcpus", "usd": "price", "usd_per_hour": "price",
    "gpu_price": "price_per_gpu", "usd_per_gpu_hour": "price_per_gpu", "stack": "software_stack",
    "on-demand": "on_demand", "ondemand": "on_demand",
}


@record
class Condition:
    field: str
    op: str
    value: str | float

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"


@record
class QueryResult:
    rows: list[Instance]
    total: int  # rows matching before ``limit``


def _canonical(name: str, fields: dict[str, Any], aliases: dict[str, str], expr: str) -> str:
    key = name.strip().lower()
    key = aliases.get(key, key)
    if key not in fields:
        import difflib  # only for an error (bench/bench_catalog.py: every ms of start-up counts)

        near = difflib.get_close_matches(key, list(fields) + list(aliases), n=1)
        raise _filter_error(expr, f"unknown field '{name}'"
                            + (f"; did you mean '{aliases.get(near[0], near[0])}'?" if near else "")
                            + f" Fields: {', '.join(fields)}")
    return key


def _filter_error(expr: str, message: str) -> FieldError:
    return FieldError("filter", "{filter} " + literal(f"{expr!r}: {message}"))


def parse_filter(expr: str, fields: dict[str, str] | None = None,
                 aliases: dict[str, str] | None = None) -> list[Condition]:
    """Parse ``--filter`` text into conditions; ``fields`` maps field name -> "text"|"number"."""
    if fields is None:
        fields = {k: kind for k, (_, kind) in INSTANCE_FIELDS.items()}
        aliases = FIELD_ALIASES if aliases is None else aliases
    aliases = aliases or {}
    out: list[Condition] = []
    if expr is None or not str(expr).strip():
        return out
    for token in str(expr).split(","):
        if not token.strip():
            continue
        m = _OP_RE.match(token)
        if not m or not m.group(3):
            raise _filter_error(expr, f"cannot read '{token.strip()}'; write FIELD OP VALUE with OP one "
                                f"of {' '.join(OPERATORS)} (e.g. cloud=aws,price<40,memory>=80)")
        name, op, raw = m.groups()
        op = "=" if op == "==" else op
        key = _canonical(name, fields, aliases, expr)
        kind = fields[key]
        value: str | float = raw
        if kind == _NUM:
            if op == "~":
                raise _filter_error(expr, f"'~' (contains) works on text fields; '{key}' is a number, "
                                    "use = != < <= > >=")
            try:
                value = float(raw)
            except ValueError:
                raise _filter_error(expr, f"'{key}' takes a number, got '{raw}'") from None
            if not math.isfinite(value):
                raise _filter_error(expr, f"'{key}' takes a finite number, got '{raw}'")
        elif op in ("<", "<=", ">", ">="):
            raise _filter_error(expr, f"'{key}' is text; use = != or ~ (contains), not {op}")
        out.append(Condition(key, op, value))
    return out


def _compare(actual: Any, op: str, value: Any) -> bool:
    if actual is None:
        return op == "!="
    if isinstance(value, float):
        if op == "=":
            return math.isclose(actual, value, rel_tol=1e-9, abs_tol=1e-9)
        if op == "!=":
            return not math.isclose(actual, value, rel_tol=1e-9, abs_tol=1e-9)
        return {"<": actual < value, "<=": actual <= value, ">": actual > value, ">=": actual >= value}[op]
    a, v = str(actual).lower(), str(value).lower()
    if op == "=":
        return a == v
    if op == "!=":
        return a != v
    return v in a  # "~"


def _text_values(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        vals = [v.strip() for v in value.split(",") if v.strip()]
    else:
        vals = [str(v).strip() for v in value if str(v).strip()]
    return vals or None


def _filter_accelerator(catalog: Catalog, cnd: Condition) -> str:
    """The accelerator id a ``--filter accelerator=NAME`` names; unknown: a ``FieldError`` naming
    ``--filter`` with the nearest names."""
    name = str(cnd.value)
    acc_id = catalog.resolve_accelerator(name)
    if acc_id is None:
        known = [*catalog.accelerators, *(a for acc in catalog.accelerators.values() for a in acc.aliases)]
        why = unknown_message("accelerator", name, known).replace(
            f"unknown accelerator '{name}'", "unknown accelerator", 1)
        raise _filter_error(f"{cnd.field}{cnd.op}{name}", why)
    return acc_id


def query_instances(
    catalog: Catalog,
    *,
    cloud: str | Sequence[str] | None = None,
    region: str | Sequence[str] | None = None,
    accelerator: str | Sequence[str] | None = None,
    vendor: str | Sequence[str] | None = None,
    min_memory_gib: float | None = None,
    count: float | None = None,
    max_usd_per_hour: float | None = None,
    pricing: str = "on-demand",
    sort: str = "price",
    descending: bool = False,
    limit: int | None = None,
    conditions: Sequence[Condition] = (),
    include_excluded: bool = True,
) -> QueryResult:
    """Offers matching every filter, sorted by ``sort`` (rows without that value last).

    ``region`` matches a region or its prefix ("us-east" matches us-east-1 and us-east4);
    ``accelerator`` takes ids or aliases (unknown → UserError with suggestions); ``vendor`` matches
    the start of the vendor name ("Intel" matches "Intel (Habana)"); ``min_memory_gib`` is per
    device; ``max_usd_per_hour`` drops rows without a usable price for ``pricing``.
    """
    sort_key = _check_query(pricing, sort, limit, min_memory_gib, count, max_usd_per_hour)
    clouds = {c.lower() for c in _text_values(cloud) or ()}
    regions = {r.lower() for r in _text_values(region) or ()}
    accs: set[str] = set()
    for a in _text_values(accelerator) or ():
        accs.add(catalog.accelerator(a).id)
    vendors = [v.lower() for v in _text_values(vendor) or ()]
    conds = []
    for cnd in conditions:
        if cnd.field == "accelerator" and cnd.op in ("=", "!="):
            cnd = Condition(cnd.field, cnd.op, _filter_accelerator(catalog, cnd))
        conds.append((INSTANCE_FIELDS[cnd.field][0], cnd.op, cnd.value))

    rows: list[Instance] = []
    for inst in catalog.instances:
        if not include_excluded and inst.excluded:
            continue
        if clouds and inst.cloud.lower() not in clouds:
            continue
        if regions and not any(inst.region.lower().startswith(r) for r in regions):
            continue
        if accs and inst.accelerator not in accs:
            continue
        if vendors and not any(_vendor(inst, catalog).lower().startswith(v) for v in vendors):
            continue
        if min_memory_gib is not None and inst.accelerator_memory_gib < min_memory_gib:
            continue
        if count is not None and not math.isclose(inst.accelerator_count, count):
            continue
        if max_usd_per_hour is not None:
            p = inst.price(pricing)
            if p is None or p > max_usd_per_hour:
                continue
        if conds and not all(_compare(get(inst, pricing, catalog), op, v) for get, op, v in conds):
            continue
        rows.append(inst)

    ordered = _sorted(rows, sort_key, pricing, catalog, descending)
    total = len(ordered)
    if limit is not None:
        ordered = ordered[:limit]
    return QueryResult(ordered, total)


def _check_query(pricing: str, sort: str, limit: int | None, min_memory_gib: float | None,
                 count: float | None, max_usd_per_hour: float | None) -> str:
    """The field to sort by; a ``FieldError``/``UserError`` naming the first bad argument."""
    check_pricing(pricing)
    sort_key = FIELD_ALIASES.get(sort.strip().lower(), sort.strip().lower()) if sort else "price"
    if sort_key not in INSTANCE_FIELDS:
        import difflib  # only for an error (bench/bench_catalog.py: every ms of start-up counts)

        near = difflib.get_close_matches(sort_key, list(INSTANCE_FIELDS), n=1)
        raise FieldError("sort", "{sort} " + literal(f"'{sort}': unknown field"
                                                    + (f"; did you mean '{near[0]}'?" if near else "")
                                                    + f" Fields: {', '.join(INSTANCE_FIELDS)}"))
    if limit is not None and limit < 0:
        raise FieldError("limit", f"{{limit}} {limit}: must be 0 or more")
    for label, value, lowest, strict in (("minimum GiB per device", min_memory_gib, 0, False),
                                         ("device count", count, 0, True),
                                         ("maximum $/hour", max_usd_per_hour, 0, False)):
        if value is not None and not (math.isfinite(value) and (value > lowest if strict
                                                                 else value >= lowest)):
            raise UserError(f"{label} {value:g}: must be {'more than' if strict else 'at least'} "
                            f"{lowest} (leave it empty for any)")
    return sort_key


def _sorted(rows: list[Instance], sort_key: str, pricing: str, catalog: Catalog,
            descending: bool) -> list[Instance]:
    """``rows`` by ``sort_key`` (then cloud, type, region), those without a value last."""
    getter, kind = INSTANCE_FIELDS[sort_key]
    present, missing = [], []
    for r in rows:
        (missing if getter(r, pricing, catalog) is None else present).append(r)
    if kind == _NUM:
        present.sort(key=lambda r: (getter(r, pricing, catalog), r.cloud, r.instance_type, r.region),
                     reverse=descending)
    else:
        present.sort(key=lambda r: (str(getter(r, pricing, catalog)).lower(), r.cloud, r.instance_type, r.region),
                     reverse=descending)
    return present + missing


def filter_rows(rows: Iterable[dict[str, Any]], conditions: Sequence[Condition]) -> list[dict[str, Any]]:
    """Apply conditions to plain dict rows (accelerators, models) by key."""
    return [r for r in rows if all(_compare(r.get(c.field), c.op, c.value) for c in conditions)]


def sort_rows(rows: list[dict[str, Any]], key: str, descending: bool = False) -> list[dict[str, Any]]:
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(key=lambda r: (r[key] if isinstance(r[key], (int, float)) else str(r[key]).lower()),
                 reverse=descending)
    return present + missing
