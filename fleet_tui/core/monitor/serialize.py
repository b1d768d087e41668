"""Snapshots to plain dicts and back (JSON lines recordings, ``monitor --json``, the recorder).

The dict mirrors the dataclass fields one to one, so a reader of a recording sees the same names as
the code. Reading is lenient: unknown keys are ignored (a newer recording read by an older
fleet-tui) and missing keys take the dataclass default (an older recording read by a newer one).
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
    """A JSON-ready dict of one snapshot (no NaN: sources report N/A as None)."""
    return {
        "timestamp": s.timestamp,
        "source": s.source,
        "source_kind": s.source_kind,
        "node": s.node,
        "message": s.message,
        "errors": list(s.errors),
        "host": host_to_dict(s.host) if s.host is not None else None,
        "devices": [device_to_dict(d) for d in s.devices],
    }


def _pick(data: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in allowed}


def process_from_dict(data: dict[str, Any]) -> ProcessInfo:
    return ProcessInfo(**_pick(data, _PROCESS_FIELDS))


def device_from_dict(data: dict[str, Any]) -> DeviceSnapshot:
    kw = _pick(data, _DEVICE_FIELDS)
    if "processes" in kw:
        kw["processes"] = tuple(process_from_dict(p) for p in kw["processes"] or ())
    if "unsupported" in kw:
        kw["unsupported"] = frozenset(kw["unsupported"] or ())
    if "extra" in kw:
        extra = kw["extra"] or {}
        items = extra.items() if isinstance(extra, dict) else (tuple(x) for x in extra)
        kw["extra"] = tuple((str(k), v) for k, v in items)
    if "xid_errors" in kw:
        kw["xid_errors"] = tuple(kw["xid_errors"] or ())
    return DeviceSnapshot(**kw)


def host_from_dict(data: dict[str, Any]) -> HostSnapshot:
    kw = _pick(data, _HOST_FIELDS)
    if "cpu_per_core_pct" in kw:
        kw["cpu_per_core_pct"] = tuple(kw["cpu_per_core_pct"] or ())
    if kw.get("load_avg") is not None:
        kw["load_avg"] = tuple(kw["load_avg"])
    return HostSnapshot(**kw)


def snapshot_from_dict(data: dict[str, Any]) -> Snapshot:
    kw = _pick(data, _SNAPSHOT_FIELDS)
    kw["devices"] = tuple(device_from_dict(d) for d in data.get("devices") or ())
    kw["host"] = host_from_dict(data["host"]) if data.get("host") else None
    kw["errors"] = tuple(data.get("errors") or ())
    kw.setdefault("timestamp", 0.0)
    kw.setdefault("source", "replay")
    kw.setdefault("source_kind", "replay")
    return Snapshot(**kw)
