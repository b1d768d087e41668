"""Snapshots to plain dicts and back (JSON lines recordings, ``monitor --json``, the recorder).

The dict mirrors the dataclass fields one to one, so a reader of a recording sees the same names as
the code. Reading is lenient: unknown keys are ignored (a newer recording read by an older
fleet-tui) and missing keys take the dataclass default (an older recording read by a newer one).
Values are checked against the field types: NaN/inf readings become ``None`` (a missing value, never
a zero), and a wrong type (a string where a number belongs, ``devices: "x"``, ``processes: [1]``)
raises ``BadField`` naming the field, which the trace reader turns into ``file:line: field: ...``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo, Snapshot

RECORDING_FORMAT = "fleet-tui-recording/1"

_DEVICE_FIELD_ORDER = tuple(f.name for f in dataclasses.fields(DeviceSnapshot))
_DEVICE_FIELDS = set(_DEVICE_FIELD_ORDER)
_HOST_FIELDS = {f.name for f in dataclasses.fields(HostSnapshot)}
_PROCESS_FIELDS = {f.name for f in dataclasses.fields(ProcessInfo)}
_SNAPSHOT_FIELDS = {f.name for f in dataclasses.fields(Snapshot)}


def _numeric(cls: type) -> dict[str, bool]:
    """name -> whether None is allowed, for the int/float fields of a snapshot dataclass."""
    # the annotations are strings here: snapshot.py postpones their evaluation
    return {f.name: "None" in str(f.type) for f in dataclasses.fields(cls)
            if str(f.type).split(" |")[0] in ("int", "float")}


_DEVICE_NUMBERS = _numeric(DeviceSnapshot)
_HOST_NUMBERS = _numeric(HostSnapshot)
_PROCESS_NUMBERS = _numeric(ProcessInfo)


class BadField(ValueError):
    """A value of the wrong type in a recorded snapshot; ``str()`` is ``"field: expected ..."``."""

    def __init__(self, field: str, expected: str = "a number"):
        super().__init__(f"{field}: expected {expected}")
        self.field = field


def number(value: Any, field: str, scale: float = 1.0) -> float | int | None:
    """A finite number (ints stay ints when not scaled), ``None`` for null, NaN or inf (missing
    readings), ``BadField`` for anything else (strings, booleans, lists)."""
    if value is None:
        return None
    t = type(value)
    if t is int:
        return value if scale == 1.0 else value * scale
    if t is float:
        return value * scale if value - value == 0.0 else None  # inf - inf and NaN give NaN
    raise BadField(field)


def _numbers(kw: dict[str, Any], fields: dict[str, bool], prefix: str) -> None:
    """Check the numeric fields of ``kw`` in place (NaN/inf -> None where None is allowed)."""
    for name, nullable in fields.items():
        if name in kw:
            v = number(kw[name], prefix + name)
            if v is None and not nullable:
                raise BadField(prefix + name, "a finite number")
            kw[name] = v


def _list(value: Any, field: str, of: type | None = None) -> list:
    if value is None:
        return []
    if not isinstance(value, list) or (of is not None and
                                       not all(isinstance(x, of) for x in value)):
        raise BadField(field, "a list" + (f" of {'objects' if of is dict else 'numbers'}"
                                          if of is not None else ""))
    return value


def process_to_dict(p: ProcessInfo) -> dict[str, Any]:
    return {"pid": p.pid, "device_index": p.device_index, "used_gpu_bytes": p.used_gpu_bytes,
            "user": p.user, "command": p.command}


def device_to_dict(d: DeviceSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _DEVICE_FIELD_ORDER:
        value = getattr(d, name)
        if name == "processes":
            value = [process_to_dict(p) for p in value]
        elif name == "unsupported":
            value = sorted(value)
        elif name == "extra":
            value = {k: v for k, v in value}
        elif name == "xid_errors":
            value = list(value)
        out[name] = value
    return out


def host_to_dict(h: HostSnapshot) -> dict[str, Any]:
    return {"cpu_pct": h.cpu_pct, "cpu_per_core_pct": list(h.cpu_per_core_pct),
            "mem_used_bytes": h.mem_used_bytes, "mem_total_bytes": h.mem_total_bytes,
            "load_avg": list(h.load_avg) if h.load_avg is not None else None}


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    """A JSON-ready dict of one snapshot (no NaN: sources report N/A as None); each device's
    ``age_s`` is its age in this snapshot (``Snapshot.age_of``)."""
    out = {
        "timestamp": s.timestamp,
        "source": s.source,
        "source_kind": s.source_kind,
        "node": s.node,
        "message": s.message,
        "errors": list(s.errors),
        "host": host_to_dict(s.host) if s.host is not None else None,
        "devices": [device_to_dict(d) for d in s.devices],
    }
    if s.device_ages:
        for device, d in zip(out["devices"], s.devices):
            device["age_s"] = s.age_of(d)
    return out


def _pick(data: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in allowed}


def process_from_dict(data: dict[str, Any]) -> ProcessInfo:
    kw = _pick(data, _PROCESS_FIELDS)
    _numbers(kw, _PROCESS_NUMBERS, "processes.")
    return ProcessInfo(**kw)


def device_from_dict(data: dict[str, Any]) -> DeviceSnapshot:
    if not isinstance(data, dict):
        raise BadField("devices", "a list of objects")
    kw = _pick(data, _DEVICE_FIELDS)
    _numbers(kw, _DEVICE_NUMBERS, "")
    if "processes" in kw:
        kw["processes"] = tuple(process_from_dict(p) for p in
                                _list(kw["processes"], "processes", dict))
    if "unsupported" in kw:
        kw["unsupported"] = frozenset(map(str, _list(kw["unsupported"], "unsupported")))
    if "extra" in kw:
        extra = kw["extra"] or {}
        if isinstance(extra, dict):
            items = extra.items()
        else:
            items = [tuple(x) if isinstance(x, list) and len(x) == 2 else (None, None)
                     for x in _list(extra, "extra")]
        kw["extra"] = tuple((str(k), v) for k, v in
                            ((k, number(v, f"extra.{k}")) for k, v in items) if v is not None)
    if "xid_errors" in kw:
        kw["xid_errors"] = tuple(int(x) for x in _list(kw["xid_errors"], "xid_errors", int))
    for name in ("name", "uuid", "state"):
        if name in kw and not isinstance(kw[name], str):
            raise BadField(name, "a string")
    return DeviceSnapshot(**kw)


def host_from_dict(data: dict[str, Any]) -> HostSnapshot:
    if not isinstance(data, dict):
        raise BadField("host", "an object")
    kw = _pick(data, _HOST_FIELDS)
    _numbers(kw, _HOST_NUMBERS, "host.")
    if "cpu_per_core_pct" in kw:
        kw["cpu_per_core_pct"] = tuple(
            v for v in (number(x, "host.cpu_per_core_pct") for x in
                        _list(kw["cpu_per_core_pct"], "host.cpu_per_core_pct")) if v is not None)
    if kw.get("load_avg") is not None:
        la = tuple(number(x, "host.load_avg") for x in _list(kw["load_avg"], "host.load_avg"))
        kw["load_avg"] = la if len(la) == 3 and None not in la else None
    return HostSnapshot(**kw)


def snapshot_from_dict(data: dict[str, Any]) -> Snapshot:
    kw = _pick(data, _SNAPSHOT_FIELDS)
    ts = number(kw.get("timestamp", 0.0), "timestamp")
    if ts is None:
        raise BadField("timestamp", "a finite number")
    kw["timestamp"] = ts
    kw["devices"] = tuple(device_from_dict(d) for d in _list(data.get("devices"), "devices", dict))
    kw["host"] = host_from_dict(data["host"]) if data.get("host") else None
    kw["errors"] = tuple(data.get("errors") or ())
    kw.setdefault("timestamp", 0.0)
    kw.setdefault("source", "replay")
    kw.setdefault("source_kind", "replay")
    return Snapshot(**kw)
