"""Read a whole fleet from the Prometheus that already scrapes its exporters.

One instant query per refresh (``/api/v1/query``) fetches every moving metric fleet-tui maps, from
NVIDIA's dcgm-exporter (``DCGM_FI_*``), Intel's Gaudi exporter (``habanalabs_*``) and AWS
neuron-monitor's Prometheus script (``neuroncore_utilization_ratio``), plus ``up`` for target
health and the sample timestamp of one metric per device for its age; ``max by`` keeps only the
labels that identify a GPU, which halves the answer. A second query, once a minute, reads what
rarely changes (limits, maxima, ECC counters, model names) and is cached per device. Range queries
(``/api/v1/query_range``) backfill history. Metric names, units and labels:
field-notes/monitoring.md §5 (DCGM), §6.3 (Gaudi), §7.1 (Neuron); HTTP API:
prometheus.io/docs/prometheus/latest/querying/api. Cost for 1,024 GPUs: bench/bench_fleet.py.

Robustness, because the UI loop calls this every refresh:
- HTTP runs in a worker thread (``asyncio.to_thread``) with a total deadline, so a slow or hung
  server never blocks the event loop;
- ``sample()`` never raises: a down, slow or garbled Prometheus becomes ``Snapshot.errors``, the last
  good readings are kept with their age, and retries back off exponentially;
- DCGM's blank sentinels (int64 values near 9.2e18) and NaN become ``None``;
- a device whose series vanished (its exporter died: Prometheus writes staleness markers after a
  failed scrape) stays on screen as ``unavailable`` with the age of its last reading, until
  ``forget_after_s``.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import math
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from fleet_tui.core.monitor.snapshot import (
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    DeviceSnapshot,
    Snapshot,
)
from fleet_tui.core.monitor.source import Source, SourceUnavailable

MIB = 1024 * 1024

# DCGM writes int64/float blank sentinels (e.g. 9223372036854775794) for "no value"; anything this
# large is not a reading (field-notes/monitoring.md §5.3).
BLANK_THRESHOLD = 9.0e18
MAX_RESPONSE_BYTES = 512 << 20  # ~20x a 1,024-GPU fleet's answer; more means a runaway query

# -- metric map --------------------------------------------------------------------------------
# name -> (DeviceSnapshot field, scale). Scale converts the exporter's unit to the field's unit.
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("slowdown_temp_c", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_MEM_CLOCK": ("mem_clock_max_mhz", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_s", 1.0),  # bytes/s
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_s", 1.0),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_bytes_s", 1.0),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_bytes_s", 1.0),
    # DCP profiling metrics are ratios 0-1; snapshots hold percent
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_active_pct", 100.0),
}
# read specially (memory sums, bit masks, counters, limits with fallbacks)
DCGM_SPECIAL = (
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_PSTATE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
)
# Violation counters are nanoseconds throttled; their rate / 1e9 is the throttled share of time.
VIOLATION_BITS = {
    "DCGM_FI_DEV_POWER_VIOLATION": ("power_violation_frac", CLOCK_EVENT_SW_POWER_CAP),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("thermal_violation_frac", CLOCK_EVENT_SW_THERMAL),
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": ("board_limit_violation_frac", 0x200),
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": ("reliability_violation_frac", 0x400),
}
VIOLATION_ACTIVE_FRAC = 0.05  # throttled >5% of the interval counts as "this reason is active"

HABANA_FIELDS: dict[str, tuple[str, float]] = {
    "habanalabs_utilization": ("gpu_util_pct", 1.0),
    "habanalabs_memory_used_bytes": ("mem_used_bytes", 1.0),
    "habanalabs_memory_total_bytes": ("mem_total_bytes", 1.0),
    "habanalabs_temperature_onchip": ("temp_c", 1.0),
    "habanalabs_temperature_threshold_slowdown": ("slowdown_temp_c", 1.0),
    "habanalabs_power_mW": ("power_w", 0.001),
    "habanalabs_power_default_limit_mW": ("power_limit_w", 0.001),
    "habanalabs_clock_soc_mhz": ("sm_clock_mhz", 1.0),
    "habanalabs_clock_soc_max_mhz": ("sm_clock_max_mhz", 1.0),
}
NEURON_NAMES = ("neuroncore_utilization_ratio", "neuron_hardware_info",
                "neuron_runtime_memory_used_bytes")

# one series per device whose sample timestamp gives the reading's age
AGE_PROBES = {"DCGM_FI_DEV_GPU_UTIL": "nvidia", "habanalabs_utilization": "intel",
              "neuroncore_utilization_ratio": "aws"}
# Set operators match label sets ignoring __name__, so the timestamp series carry an extra label to
# survive ``or`` next to the series they time.
PROBE_LABEL = "fleet_tui_probe"

ALL_NAMES: tuple[str, ...] = (*DCGM_FIELDS, *DCGM_SPECIAL, *HABANA_FIELDS, *NEURON_NAMES)

# Facts that change rarely (limits, maxima, totals, ECC counters) and the model name are read by a
# second, slower-cadence query and cached per device: the per-refresh query then carries only what
# moves, which keeps a 1,024-GPU refresh within its CPU budget (bench/bench_fleet.py).
STATIC_NAMES: tuple[str, ...] = (
    "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_MAX_MEM_CLOCK",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
    "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "habanalabs_memory_total_bytes", "habanalabs_temperature_threshold_slowdown",
    "habanalabs_power_default_limit_mW", "habanalabs_clock_soc_max_mhz", "neuron_hardware_info",
)
DYNAMIC_NAMES: tuple[str, ...] = tuple(
    n for n in ALL_NAMES if n not in STATIC_NAMES and n != "neuron_runtime_memory_used_bytes")
# The labels that say which device a DCGM series is about (field-notes §5.3); the others
# (pci_bus_id, device, driver version, job, pod/namespace/container, err_msg) are dropped server-side
# by ``max by``, which roughly halves the answer. Gaudi/Neuron label sets are not documented, so
# their series are read whole.
DCGM_ID_LABELS = ("gpu", "UUID", "uuid", "Hostname", "hostname", "instance", "GPU_I_ID")


def _split(names: Iterable[str]) -> tuple[list[str], list[str]]:
    names = list(names)
    return [n for n in names if n.startswith("DCGM_")], [n for n in names if not n.startswith("DCGM_")]


def build_query(names: Iterable[str] = DYNAMIC_NAMES, *, prune_labels: bool = True) -> str:
    """The per-refresh instant query: moving metrics, ``up``, and per-device sample times."""
    dcgm, other = _split(names)
    by = ", ".join(DCGM_ID_LABELS)
    parts = []
    if dcgm:
        sel = '{__name__=~"%s"}' % "|".join(dcgm)
        parts.append(f"max by (__name__, {by}) ({sel})" if prune_labels else sel)
    parts.append('{__name__=~"%s"}' % "|".join([*other, "up"]))
    for probe, vendor in AGE_PROBES.items():
        inner = f"timestamp({probe})"
        if prune_labels and probe.startswith("DCGM_"):
            inner = f"max by ({by}) ({inner})"
        parts.append(f'label_replace({inner}, "{PROBE_LABEL}", "{vendor}", "", "")')
    return " or ".join(parts)


def build_static_query(names: Iterable[str] = STATIC_NAMES) -> str:
    """Slow-changing facts plus each GPU's model name (kept on FB_USED, which every DCGM exports)."""
    dcgm, other = _split(names)
    by = ", ".join((*DCGM_ID_LABELS, "modelName", "GPU_I_PROFILE"))
    sel = '{__name__=~"%s"}' % "|".join([*dcgm, "DCGM_FI_DEV_FB_USED"])
    parts = [f"max by (__name__, {by}) ({sel})"]
    if other:
        parts.append('{__name__=~"%s"}' % "|".join(other))
    return " or ".join(parts)


# -- labels ------------------------------------------------------------------------------------
def node_of(labels: Mapping[str, str]) -> str:
    """Hostname (dcgm-exporter releases), hostname (dcgm-exporter HEAD), else the scrape instance."""
    return (labels.get("Hostname") or labels.get("hostname") or labels.get("instance")
            or labels.get("node") or "")


def parse_value(text: object) -> float | None:
    """Prometheus sample strings -> float; NaN, +-Inf, blank sentinels and junk -> None."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if math.isnan(value) or math.isinf(value) or abs(value) >= BLANK_THRESHOLD:
        return None
    return value


class PrometheusResponseError(Exception):
    """The server answered, but not with what the HTTP API documents."""


def parse_envelope(body: bytes, *, expect: tuple[str, ...] = ("vector",)) -> list[dict]:
    """Validate the API envelope and return ``data.result``; raises PrometheusResponseError."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        snippet = body[:60].decode("utf-8", "replace").replace("\n", " ")
        raise PrometheusResponseError(f"response is not JSON ({exc.__class__.__name__}: "
                                      f"starts {snippet!r})") from None
    if not isinstance(doc, dict):
        raise PrometheusResponseError("response is JSON but not an API object")
    if doc.get("status") != "success":
        raise PrometheusResponseError(
            f"query failed: {doc.get('errorType', 'error')}: {doc.get('error', 'no message')}")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") not in expect:
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusResponseError(f"unexpected result type {got!r} (wanted {'/'.join(expect)})")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusResponseError("data.result is not a list")
    return result


# -- series -> devices -------------------------------------------------------------------------
@dataclass(slots=True)
class _Acc:
    """Values of one device gathered from many series before they become a DeviceSnapshot."""

    vendor: str
    node: str
    ident: str
    index: int
    name: str
    uuid: str
    instance: str
    mig_profile: str = ""
    values: dict | None = None
    sample_ts: float | None = None


def _int_label(labels: Mapping[str, str], *keys: str) -> int | None:
    for key in keys:
        raw = labels.get(key)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                digits = "".join(ch for ch in raw if ch.isdigit())
                if digits:
                    return int(digits)
    return None


def classify_series(labels: Mapping[str, str]) -> tuple | None:
    """What one series' label set means, worked out once per distinct label set (the source caches
    it by the label text, since a fleet's label sets repeat refresh after refresh):

    - ``("dev", key, metric, vendor, node, index, model, default_name, uuid, instance, mig_profile)``
      where ``metric`` is the value's name, or None for an age probe (the value is a sample time);
    - ``("up", instance)``; ``("neuron_hw", node, cores_per_device)``; None: not a series we read.
    """
    name = labels.get("__name__", "")
    if name.startswith("DCGM_") or (not name and labels.get(PROBE_LABEL) == "nvidia"):
        # nearly every series of a GPU fleet
        node = labels.get("Hostname") or labels.get("hostname") or labels.get("instance") or ""
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        gpu = labels.get("gpu")
        if not uuid and gpu is None:
            return None
        mig = labels.get("GPU_I_ID", "")
        key = ("nvidia", node, uuid or f"gpu{gpu}", mig)
        return ("dev", key, name or None, "nvidia", node, _int_label(labels, "gpu") or 0,
                labels.get("modelName") or labels.get("model_name"), "NVIDIA GPU", uuid,
                labels.get("instance", ""), labels.get("GPU_I_PROFILE", mig) if mig else "")
    if name == "up":
        return ("up", labels["instance"]) if "instance" in labels else None
    if name == "neuron_hardware_info":
        per = _int_label(labels, "neuroncore_per_device_count")
        return ("neuron_hw", node_of(labels), per) if per else None
    node = node_of(labels)
    probe = labels.get(PROBE_LABEL)
    if name.startswith("habanalabs_") or probe == "intel":
        ident_index = _int_label(labels, "index", "module_id", "device", "gpu", "hl", "accel")
        uuid = labels.get("uuid") or labels.get("UUID") or labels.get("serial") or ""
        key = ("intel", node, uuid or str(ident_index), "")
        vendor, default_name = "intel", "Intel Gaudi"
        index = ident_index if ident_index is not None else 0
        model = labels.get("name") or labels.get("modelName") or labels.get("device_name")
    elif name.startswith("neuron") or probe == "aws":
        core = _int_label(labels, "neuroncore")
        if core is None:
            return None
        key = ("aws", node, f"nc{core}", "")
        vendor, default_name, index, uuid = "aws", "AWS NeuronCore", core, ""
        model = labels.get("neuron_device_type")
    else:
        return None
    return ("dev", key, None if probe else name, vendor, node, index, model, default_name, uuid,
            labels.get("instance", ""), "")


def group_classified(rows: Iterable[tuple[tuple | None, object]], *,
                     neuron_per_device: dict[str, int] | None = None,
                     ) -> tuple[dict[tuple, _Acc], dict[str, float]]:
    """(classify_series(labels), raw value) pairs -> values grouped by device, ``up`` by instance."""
    devices: dict[tuple, _Acc] = {}
    up: dict[str, float] = {}
    per_device = {} if neuron_per_device is None else neuron_per_device
    get = devices.get
    for entry, raw in rows:
        if entry is None:
            continue
        kind = entry[0]
        if kind == "dev":
            acc = get(entry[1])
            if acc is None:
                acc = devices[entry[1]] = _Acc(
                    vendor=entry[3], node=entry[4], ident=entry[1][2], index=entry[5],
                    name=entry[6] or entry[7], uuid=entry[8], instance=entry[9],
                    mig_profile=entry[10], values={})
            elif entry[6] and acc.name == entry[7]:
                acc.name = entry[6]
            if entry[2] is not None:
                acc.values[entry[2]] = raw
            else:
                acc.sample_ts = parse_value(raw)
        elif kind == "up":
            value = parse_value(raw)
            if value is not None:
                up[entry[1]] = value
        elif kind == "neuron_hw":
            per_device[entry[1]] = entry[2]
    if per_device and any(k[0] == "aws" for k in devices):
        devices = _group_neuron_cores(devices, per_device)
    return devices, up


def _decoded_rows(result: list) -> list[tuple[tuple | None, object]]:
    rows = []
    for item in result:
        try:
            labels = item["metric"]
            raw = item["value"][1]
            entry = classify_series(labels)
        except (KeyError, IndexError, TypeError, AttributeError):
            continue
        rows.append((entry, raw))
    return rows


def group_series(result: list, *, neuron_per_device: dict[str, int] | None = None,
                 ) -> tuple[dict[tuple, _Acc], dict[str, float]]:
    """Group instant-vector samples by device; also return ``up`` per scrape instance.

    ``neuron_per_device`` (node -> NeuronCores per device, from ``neuron_hardware_info``) is read
    and updated in place, so a static query's answer can fold a later refresh's cores."""
    return group_classified(_decoded_rows(result), neuron_per_device=neuron_per_device)


# Prometheus writes its answers compactly, fields in a fixed order (the API's Go structs), so an
# instant vector can be cut into (label text, time, value) by string splits, about 3x faster than
# json.loads building a dict per series, and the label text is a ready cache key. Only an answer
# without backslashes takes this path: then no string can hold a quote, so the separators below
# cannot occur inside a label value and the cut is exact. Anything else goes through json.
_MISSING = object()
_VECTOR_HEAD = '{"status":"success","data":{"resultType":"vector","result":['


def _vector_parts(body: bytes) -> list[str] | None:
    """The series' texts of a compact instant-vector answer (each from after ``{"metric":{``)."""
    if not body.startswith(b'{"status":"success","data":{"resultType":"vector","result":[{') \
            or b"\\" in body:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split('{"metric":{')
    if len(parts) < 2 or parts[0] != _VECTOR_HEAD:
        return None
    del parts[0]
    return parts


def split_vector(body: bytes) -> list[tuple[str, str, str]] | None:
    """A compact instant-vector answer -> (label text, time, value) per series; None when the
    body is not in that form (the caller then decodes it as JSON)."""
    parts = _vector_parts(body)
    if parts is None:
        return None
    rows = []
    last = len(parts) - 1
    for i, chunk in enumerate(parts):
        labels, sep, rest = chunk.partition('},"value":[')
        if not sep:
            return None
        ts, sep, rest = rest.partition(',"')
        if not sep:
            return None
        value, sep, rest = rest.partition('"]}')
        if not sep or (rest != "," if i != last
                       else not (rest.startswith("]}") and rest.rstrip().endswith("}"))):
            return None
        rows.append((labels, ts, value))
    return rows


def split_classified(body: bytes, cache: dict[str, tuple | None],
                     ) -> list[tuple[tuple | None, str]] | None:
    """``split_vector`` and ``classify_series`` in one pass: (classification, raw value) per
    series, each label text classified once and kept in ``cache`` (label text -> classification;
    cleared when it outgrows the answer, as label sets churn). None: decode the body as JSON."""
    parts = _vector_parts(body)
    if parts is None:
        return None
    if len(cache) > 4 * len(parts) + 10_000:
        cache.clear()
    rows: list[tuple[tuple | None, str]] = []
    append = rows.append
    missing = _MISSING
    lookup = cache.get
    last = len(parts) - 1
    for i, chunk in enumerate(parts):
        labels, sep, rest = chunk.partition('},"value":[')
        if not sep:
            return None
        rest = rest.partition(',"')[2]
        raw, sep, rest = rest.partition('"]}')
        if not sep or (rest != "," if i != last
                       else not (rest.startswith("]}") and rest.rstrip().endswith("}"))):
            return None
        entry = lookup(labels, missing)
        if entry is missing:
            try:
                decoded = json.loads("{%s}" % labels)
                entry = classify_series(decoded) if isinstance(decoded, dict) else None
            except (ValueError, TypeError, AttributeError, KeyError):
                return None
            cache[labels] = entry
        append((entry, raw))
    return rows


def _group_neuron_cores(devices: dict[tuple, _Acc], per_device: dict[str, int]) -> dict[tuple, _Acc]:
    """Fold NeuronCores into Neuron devices where neuron_hardware_info says how many per device."""
    out: dict[tuple, _Acc] = {}
    for key, acc in devices.items():
        per = per_device.get(acc.node) if acc.vendor == "aws" else None
        if not per:
            out[key] = acc
            continue
        dev_index = acc.index // per
        new_key = ("aws", acc.node, f"nd{dev_index}", "")
        util = parse_value(acc.values.get("neuroncore_utilization_ratio"))
        target = out.get(new_key)
        if target is None:
            target = _Acc(vendor="aws", node=acc.node, ident=new_key[2], index=dev_index,
                          name=acc.name.replace("NeuronCore", "Neuron device"), uuid="",
                          instance=acc.instance, values={}, sample_ts=acc.sample_ts)
            target.values["_cores"] = []
            out[new_key] = target
        target.values["_cores"].append((acc.index, util))
    return out


def device_from_acc(acc: _Acc, *, timestamp: float,
                    previous_counters: Mapping[str, tuple[float, float]] | None = None,
                    ) -> tuple[DeviceSnapshot, dict[str, tuple[float, float]]]:
    """Build one DeviceSnapshot; returns it with the violation counters seen (for the next rate)."""
    fields: dict[str, object] = {}
    extra: list[tuple[str, float]] = []
    counters: dict[str, tuple[float, float]] = {}
    table = HABANA_FIELDS if acc.vendor == "intel" else DCGM_FIELDS
    # one pass converts every sample string (this runs ~25 times per GPU per refresh); plainly
    # mapped metrics go straight to their field, the rest to ``v`` for the rules below
    v: dict[str, float] = {}
    get = table.get
    for metric, raw in (acc.values or {}).items():
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if value != value or not -BLANK_THRESHOLD < value < BLANK_THRESHOLD:  # NaN, Inf, blank
            continue
        mapped = get(metric)
        if mapped is None:
            v[metric] = value
        elif mapped[1] == 1.0:
            fields[mapped[0]] = value
        else:
            fields[mapped[0]] = value * mapped[1]
    if acc.vendor == "intel":
        for name in ("mem_used_bytes", "mem_total_bytes"):
            if name in fields:
                fields[name] = int(fields[name])
    elif acc.vendor == "aws":
        cores = sorted((acc.values or {}).get("_cores") or [])
        if "neuroncore_utilization_ratio" in (acc.values or {}):
            cores = [(acc.index, v.get("neuroncore_utilization_ratio"))]
        known = [u for _, u in cores if u is not None]
        if known:
            fields["gpu_util_pct"] = 100.0 * sum(known) / len(known)
        extra.extend((f"nc{i}_util_pct", 100.0 * u) for i, u in cores if u is not None)
    else:
        used, free = v.get("DCGM_FI_DEV_FB_USED"), v.get("DCGM_FI_DEV_FB_FREE")
        reserved, total = v.get("DCGM_FI_DEV_FB_RESERVED"), v.get("DCGM_FI_DEV_FB_TOTAL")
        if used is not None:
            fields["mem_used_bytes"] = int(used * MIB)
        if total is None and used is not None and free is not None:
            total = used + free + (reserved or 0.0)  # no FB_TOTAL in the default CSV (§5.4)
        if total is not None:
            fields["mem_total_bytes"] = int(total * MIB)
        limit = v.get("DCGM_FI_DEV_ENFORCED_POWER_LIMIT") or v.get("DCGM_FI_DEV_POWER_MGMT_LIMIT")
        if limit is not None:
            fields["power_limit_w"] = limit
        reasons = v.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
        if reasons is None:
            reasons = v.get("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
        pstate = v.get("DCGM_FI_DEV_PSTATE")
        if pstate is not None:
            fields["pstate"] = int(pstate)
        xid = v.get("DCGM_FI_DEV_XID_ERRORS")
        if xid:
            fields["xid_errors"] = (int(xid),)
        sbe = v.get("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")
        dbe = v.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
        sbe = v.get("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL") if sbe is None else sbe
        dbe = v.get("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL") if dbe is None else dbe
        if sbe is not None:
            fields["ecc_corrected"] = int(sbe)
        if dbe is not None:
            fields["ecc_uncorrected"] = int(dbe)
        gr = v.get("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        if gr is not None:
            extra.append(("gr_engine_active_pct", 100.0 * gr))
        # Violation counters: derive "active" throttle bits when no reason mask is exported.
        derived_mask = 0
        sample_time = acc.sample_ts or timestamp
        for metric, (extra_name, bit) in VIOLATION_BITS.items():
            value = v.get(metric)
            if value is None:
                continue
            counters[metric] = (sample_time, value)
            before = (previous_counters or {}).get(metric)
            if before and sample_time > before[0] and value >= before[1]:
                frac = (value - before[1]) / 1e9 / (sample_time - before[0])
                extra.append((extra_name, frac))
                if frac > VIOLATION_ACTIVE_FRAC:
                    derived_mask |= bit
        if reasons is not None:
            fields["clock_event_reasons"] = int(reasons)
        elif counters:
            fields["clock_event_reasons"] = derived_mask
        if "sm_active_pct" in fields or "tensor_active_pct" in fields \
                or "dram_active_pct" in fields:
            fields["gpm_supported"] = True
    name = acc.name
    if acc.mig_profile:
        name = f"{name} MIG {acc.mig_profile}"
        fields["mig_enabled"] = True
    device = DeviceSnapshot(
        index=acc.index, name=name, uuid=acc.uuid, vendor=acc.vendor, node=acc.node,
        timestamp=acc.sample_ts or timestamp, extra=tuple(extra),
        age_s=max(0.0, timestamp - acc.sample_ts) if acc.sample_ts else None,
        **fields,  # type: ignore[arg-type]
    )
    return device, counters


def snapshot_devices(result: list, *, timestamp: float) -> tuple[list[DeviceSnapshot], dict[str, float]]:
    """Instant-vector result -> devices (sorted by node, index) and ``up`` by instance."""
    groups, up = group_series(result)
    devices = [device_from_acc(acc, timestamp=timestamp)[0] for acc in groups.values()]
    devices.sort(key=lambda d: (d.node, d.vendor, d.index, d.uuid))
    return devices, up


# -- HTTP --------------------------------------------------------------------------------------
def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urllib.parse.urlunsplit(parts)


def _parse_duration_s(text: str) -> float | None:
    """Prometheus durations such as '15s', '1m', '1m30s', '500ms'."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total, num, i = 0.0, "", 0
    try:
        while i < len(text):
            ch = text[i]
            if ch.isdigit() or ch == ".":
                num += ch
                i += 1
                continue
            unit = "ms" if text.startswith("ms", i) else ch
            total += float(num) * units[unit]
            num, i = "", i + len(unit)
    except (KeyError, ValueError):
        return None
    return total if not num and total > 0 else None


@dataclass(frozen=True, slots=True)
class _Cached:
    device: DeviceSnapshot
    seen_at: float  # wall clock when this device's reading was taken (sample time)
    instance: str
    # what the device was built from: the same sample time, identity and raw values next refresh
    # (a scrape not yet repeated) reuse it with only its age updated
    raw: dict | None = None
    ident: tuple = ()


class PrometheusSource(Source):
    """A fleet read through the Prometheus HTTP API. See the module docstring.

    ``url`` is the server's base URL (``http://prom:9090``, also behind a path prefix). Credentials:
    ``token`` (bearer) or ``basic_auth=(user, password)``; when neither is given, the environment's
    ``FLEET_TUI_PROM_TOKEN`` or ``FLEET_TUI_PROM_USER``/``FLEET_TUI_PROM_PASSWORD`` (or user:pass in
    the URL). TLS certificates are verified unless ``verify_tls=False`` (or
    ``FLEET_TUI_PROM_INSECURE=1``); ``ca_file`` adds a CA bundle.
    """

    name = "prometheus"
    kind = "fleet"

    def __init__(self, url: str, *, token: str | None = None,
                 basic_auth: tuple[str, str] | None = None, verify_tls: bool | None = None,
                 ca_file: str | None = None, timeout_s: float = 5.0,
                 stale_after_s: float | None = None, forget_after_s: float = 900.0,
                 min_backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 query: str | None = None, static_every_s: float = 60.0,
                 prune_labels: bool = True, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time, interval_s: float | None = None,
                 **_other_source_opts: object):
        # interval_s and options meant for local sources (open_source passes them to every
        # backend) do not apply: Prometheus' own scrape interval decides how fresh data is.
        del interval_s, _other_source_opts
        env = os.environ if env is None else env
        url = url.strip()
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceUnavailable(
                f"--source prometheus:{_redact(url)}: the Prometheus URL must start with http:// or "
                "https:// and name a host, e.g. prometheus:http://localhost:9090")
        if parts.username and basic_auth is None and token is None:
            basic_auth = (urllib.parse.unquote(parts.username),
                          urllib.parse.unquote(parts.password or ""))
        self.url = _redact(url).rstrip("/")
        if token is None and basic_auth is None:
            token = env.get("FLEET_TUI_PROM_TOKEN") or None
            user = env.get("FLEET_TUI_PROM_USER")
            if token is None and user:
                basic_auth = (user, env.get("FLEET_TUI_PROM_PASSWORD", ""))
        self._auth_header: str | None = None
        if token:
            self._auth_header = f"Bearer {token}"
        elif basic_auth:
            raw = f"{basic_auth[0]}:{basic_auth[1]}".encode()
            self._auth_header = "Basic " + base64.b64encode(raw).decode("ascii")
        if verify_tls is None:
            verify_tls = env.get("FLEET_TUI_PROM_INSECURE", "").lower() not in ("1", "true", "yes")
        self.verify_tls = verify_tls
        self._ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self._ssl = ssl.create_default_context(cafile=ca_file)
            if not verify_tls:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = ssl.CERT_NONE
        self.timeout_s = float(timeout_s)
        # PromQL durations take no fractions ("0.5s" is refused): milliseconds
        self._promql_timeout = f"{max(1, int(self.timeout_s * 1000))}ms"
        self.stale_after_s = stale_after_s
        self.forget_after_s = forget_after_s
        self.min_backoff_s, self.max_backoff_s = min_backoff_s, max_backoff_s
        self.query = query or build_query(prune_labels=prune_labels)
        self.static_query = build_static_query()
        self.static_every_s = static_every_s
        self._static_values: dict[tuple, dict[str, object]] = {}
        self._static_names: dict[tuple, tuple[str, str]] = {}  # key -> (model name, MIG profile)
        self._neuron_per_device: dict[str, int] = {}
        self._classified: dict[str, tuple | None] = {}  # label text -> classify_series()
        self._static_at = -math.inf
        self._static_tried: set[tuple] = set()
        self._static_error: str | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, _Cached] = {}
        self._counters: dict[str, dict[str, tuple[float, float]]] = {}
        self._failures = 0
        self._next_try = 0.0
        self._last_error: str | None = None
        self._last_ok: float | None = None
        self._scrape_interval_s: float | None = None
        self._interval_checked = -math.inf
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self._ssl) if self._ssl else urllib.request.HTTPHandler(),
            urllib.request.ProxyHandler({}),  # a fleet's Prometheus is reached directly
        )

    @property
    def spec(self) -> str:
        return f"prometheus:{self.url}"

    # -- HTTP ----------------------------------------------------------------------------------
    def _get(self, path: str, params: Mapping[str, str] | None = None, *, post: bool = False) -> bytes:
        """One request with a total deadline; raises OSError / PrometheusResponseError."""
        url = self.url + path
        data = None
        if params:
            encoded = urllib.parse.urlencode(params)
            if post:
                data = encoded.encode()
            else:
                url = f"{url}?{encoded}"
        request = urllib.request.Request(url, data=data, method="POST" if post else "GET")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", "fleet-tui")
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        if self._auth_header:
            request.add_header("Authorization", self._auth_header)
        deadline = time.monotonic() + self.timeout_s
        try:
            response = self._opener.open(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            body = exc.read(4096) if exc.fp else b""
            detail = ""
            try:
                doc = json.loads(body)
                detail = f": {doc.get('errorType', '')}: {doc.get('error', '')}"
            except ValueError:
                pass
            if exc.code in (401, 403):
                detail += " (check FLEET_TUI_PROM_TOKEN or FLEET_TUI_PROM_USER/PASSWORD)"
            raise PrometheusResponseError(f"HTTP {exc.code} {exc.reason}{detail}") from None
        with response:
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no complete answer within {self.timeout_s:g} s")
                # read1: what has arrived, so a server trickling bytes meets the deadline too
                chunk = response.read1(1 << 20)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise PrometheusResponseError(
                        f"answer larger than {MAX_RESPONSE_BYTES >> 20} MiB; narrow the query")
                chunks.append(chunk)
            return b"".join(chunks)

    def query_instant(self, query: str) -> list[dict]:
        body = self._get("/api/v1/query", {"query": query, "timeout": self._promql_timeout},
                         post=True)
        return parse_envelope(body)

    def query_classified(self, query: str) -> list[tuple[tuple | None, object]]:
        """An instant query's series as (classify_series(labels), raw value) pairs, for
        ``group_classified``. Compact answers are split without a JSON decode and each distinct
        label text is classified once for the source's lifetime (the per-refresh hot path)."""
        body = self._get("/api/v1/query", {"query": query, "timeout": self._promql_timeout},
                         post=True)
        rows = split_classified(body, self._classified)
        return _decoded_rows(parse_envelope(body)) if rows is None else rows

    def query_range(self, query: str, start: float, end: float, step_s: float) -> list[dict]:
        body = self._get("/api/v1/query_range",
                         {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                          "step": f"{step_s:g}", "timeout": self._promql_timeout}, post=True)
        return parse_envelope(body, expect=("matrix",))

    def _refresh_scrape_interval(self, now: float) -> None:
        """Median scrape interval of the active targets (for the stale threshold), every 5 min."""
        if now - self._interval_checked < 300:
            return
        self._interval_checked = now
        try:
            doc = json.loads(self._get("/api/v1/targets", {"state": "active"}))
            targets = doc["data"]["activeTargets"]
            intervals = sorted(
                s for s in (_parse_duration_s(t.get("scrapeInterval", "")) for t in targets) if s)
        except Exception:  # noqa: BLE001 - optional endpoint (absent behind some proxies)
            return
        if intervals:
            self._scrape_interval_s = intervals[len(intervals) // 2]

    @property
    def stale_threshold_s(self) -> float:
        if self.stale_after_s is not None:
            return self.stale_after_s
        interval = self._scrape_interval_s or 30.0  # dcgm-exporter's default collect interval
        return max(3.0 * interval, 10.0)

    # -- Source API ----------------------------------------------------------------------------
    async def open(self) -> None:
        """Nothing to acquire: an unreachable server is reported by ``sample`` and retried."""

    async def sample(self) -> Snapshot:
        return await asyncio.to_thread(self.sample_blocking)

    async def history(self, seconds: float, step_s: float = 15.0) -> list[Snapshot]:
        """Backfill: one Snapshot per step over the last ``seconds`` (empty list on failure)."""
        return await asyncio.to_thread(self.history_blocking, seconds, step_s)

    def sample_blocking(self) -> Snapshot:
        """One refresh; never raises (errors become ``Snapshot.errors``)."""
        with self._lock:
            # A refresh allocates tens of thousands of short-lived objects and frees them all at
            # the end; collecting mid-way only re-walks the long-lived analysis windows (gen-2
            # passes of 10-25 ms on a 1,024-GPU fleet, the worst refreshes), so pause it.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                return self._sample_locked()
            except Exception as exc:  # noqa: BLE001 - the UI loop must never see an exception
                return self._degraded(self._clock(), f"internal error reading Prometheus: {exc!r}")
            finally:
                if gc_was_enabled:
                    gc.enable()

    def _sample_locked(self) -> Snapshot:
        now = self._clock()
        if now < self._next_try:
            wait = self._next_try - now
            return self._degraded(now, f"{self._last_error}; retrying in {wait:.2g} s")
        try:
            rows = self.query_classified(self.query)
        except (OSError, PrometheusResponseError, ValueError) as exc:
            return self._fail(now, exc)
        self._failures, self._next_try, self._last_error = 0, 0.0, None
        self._last_ok = now
        self._refresh_scrape_interval(now)
        if now - self._static_at >= self.static_every_s:
            self._refresh_static(now)
        groups, up = group_classified(rows, neuron_per_device=self._neuron_per_device)
        new = [k for k in groups if k not in self._static_values and k not in self._static_tried]
        if new and now - self._static_at >= 5.0:
            self._refresh_static(now)  # new devices: learn their names and limits now
            self._static_tried.update(new)  # (some exporters export no static facts at all)
        self._apply_static(groups)
        return self._merge(now, groups, up)

    def _refresh_static(self, now: float) -> None:
        """Re-read slow-changing facts; a failure keeps the old ones and is reported."""
        self._static_at = now
        try:
            rows = self.query_classified(self.static_query)
        except (OSError, PrometheusResponseError, ValueError) as exc:
            self._static_error = f"Prometheus {self.url}: device facts not read ({exc})"
            return
        self._static_error = None
        groups, _ = group_classified(rows, neuron_per_device=self._neuron_per_device)
        # replaced wholesale, so devices gone from the fleet do not accumulate
        self._static_values, self._static_names, self._static_tried = {}, {}, set()
        for key, acc in groups.items():
            values = dict(acc.values or {})
            values.pop("DCGM_FI_DEV_FB_USED", None)  # carried the name; its value is dynamic
            self._static_values[key] = values
            self._static_names[key] = (acc.name, acc.mig_profile)

    def _apply_static(self, groups: dict[tuple, _Acc]) -> None:
        for key, acc in groups.items():
            static = self._static_values.get(key)
            if static:
                values = acc.values if acc.values is not None else {}
                for name, raw in static.items():
                    values.setdefault(name, raw)
                acc.values = values
            named = self._static_names.get(key)
            if named is not None:
                if acc.name in ("NVIDIA GPU", "Intel Gaudi", "AWS NeuronCore"):
                    acc.name = named[0]
                if key[3] and named[1]:
                    acc.mig_profile = named[1]

    def _fail(self, now: float, exc: BaseException) -> Snapshot:
        self._failures += 1
        delay = min(self.max_backoff_s, self.min_backoff_s * 2 ** (self._failures - 1))
        # count the back-off from when the attempt ended (a timeout may have taken a while)
        now = max(now, self._clock())
        self._next_try = now + delay
        reason = str(exc)
        if isinstance(exc, urllib.error.URLError):
            reason = str(exc.reason)
        if isinstance(exc, PrometheusResponseError):
            self._last_error = f"Prometheus {self.url} answered badly: {reason}"
        else:
            if isinstance(exc, TimeoutError) and "timed out" not in reason:
                reason = f"timed out ({reason})" if reason else "timed out"
            self._last_error = f"Prometheus {self.url} unreachable: {reason}"
        return self._degraded(now, f"{self._last_error}; retrying in {delay:.3g} s")

    def _degraded(self, now: float, error: str) -> Snapshot:
        """The last good devices with their current age, and the error."""
        self._forget(now)
        devices = tuple(self._aged(c, now, force_stale=False) for c in self._cache.values())
        errors = [error]
        if self._last_ok is not None and devices:
            errors.append(f"showing the last data read {now - self._last_ok:.0f} s ago")
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet", devices=devices,
                        message=None if devices else error, errors=tuple(errors))

    def _aged(self, cached: _Cached, now: float, *, force_stale: bool) -> DeviceSnapshot:
        age = max(0.0, now - cached.seen_at)
        stale = force_stale or age > self.stale_threshold_s
        device = cached.device
        if stale:
            return replace(device, age_s=age, state="unavailable",
                           error=f"no data for {age:.0f} s (exporter down or not scraped)")
        return replace(device, age_s=age)

    def _forget(self, now: float) -> None:
        for key in [k for k, c in self._cache.items() if now - c.seen_at > self.forget_after_s]:
            del self._cache[key]
            self._counters.pop(key, None)

    def _merge(self, now: float, groups: dict[tuple, _Acc], up: dict[str, float]) -> Snapshot:
        seen: set[str] = set()
        cache = self._cache
        for acc in groups.values():
            key = f"{acc.node}/{acc.uuid or acc.index}"  # == DeviceSnapshot.key
            if key in seen:  # two series sets collide (e.g. instance fallback); keep both apart
                key = f"{key}#{acc.ident}"
            seen.add(key)
            ident = (acc.index, acc.name, acc.mig_profile, acc.vendor, acc.uuid)
            sample_ts = acc.sample_ts
            before = cache.get(key)
            if (before is not None and sample_ts is not None and before.seen_at == sample_ts
                    and before.ident == ident and before.raw == acc.values):
                # the same scrape as last refresh (dcgm-exporter collects every 30 s by default,
                # so most devices on most refreshes): only the reading's age moved
                cache[key] = _Cached(device=replace(before.device, age_s=max(0.0, now - sample_ts)),
                                     seen_at=sample_ts, instance=acc.instance, raw=acc.values,
                                     ident=ident)
                continue
            device, counters = device_from_acc(acc, timestamp=now,
                                               previous_counters=self._counters.get(key))
            if counters:
                self._counters[key] = counters
            cache[key] = _Cached(device=device, seen_at=sample_ts or now, instance=acc.instance,
                                 raw=acc.values, ident=ident)
        self._forget(now)
        down_instances = {inst for inst, value in up.items() if value == 0}
        errors: list[str] = []
        devices: list[DeviceSnapshot] = []
        stale_nodes: dict[str, float] = {}
        threshold = self.stale_threshold_s
        for key, cached in self._cache.items():
            gone = key not in seen
            if not gone and (cached.device.age_s or 0.0) <= threshold:
                devices.append(cached.device)  # fresh: built this refresh with its age
                continue
            exporter_down = cached.instance in down_instances
            device = self._aged(cached, now, force_stale=gone and exporter_down)
            if device.state != "ok":
                stale_nodes[device.node] = max(stale_nodes.get(device.node, 0.0), device.age_s or 0)
            devices.append(device)
        devices.sort(key=lambda d: (d.node, d.vendor, d.index, d.uuid))
        nodes_by_instance = {c.instance: c.device.node for c in self._cache.values()}
        for inst in sorted(down_instances):
            node = nodes_by_instance.get(inst)
            if node is not None:
                errors.append(f"{node}: exporter {inst} is down (up == 0)"
                              + (f"; last data {stale_nodes[node]:.0f} s old"
                                 if node in stale_nodes else ""))
        named = {e.partition(":")[0] for e in errors}
        for node, age in sorted(stale_nodes.items()):
            if node not in named:
                errors.append(f"{node}: no data for {age:.0f} s")
        if self._static_error:
            errors.append(self._static_error)
        message = None
        if not devices:
            message = (f"Prometheus {self.url} answered but has no DCGM, Gaudi or Neuron metrics "
                       "(is dcgm-exporter scraped?)")
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet",
                        devices=tuple(devices), message=message, errors=tuple(errors))

    def history_blocking(self, seconds: float, step_s: float = 15.0) -> list[Snapshot]:
        """Range query of the per-refresh query -> one Snapshot per step (oldest first); device
        timestamps are their samples' own, so a reading repeated across steps is recognisable.
        Returns [] when Prometheus cannot answer (the live refresh reports why)."""
        try:
            return self._history_locked(seconds, step_s)
        except Exception:  # noqa: BLE001 - a backfill is optional; never raise into the UI loop
            return []

    def _history_locked(self, seconds: float, step_s: float) -> list[Snapshot]:
        with self._lock:
            end = self._clock()
            try:
                if end - self._static_at >= self.static_every_s:
                    self._refresh_static(end)
                matrix = self.query_range(self.query, end - seconds, end, step_s)
            except (OSError, PrometheusResponseError, ValueError):
                return []
            by_time: dict[float, list[dict]] = {}
            for series in matrix:
                labels = series.get("metric") if isinstance(series, dict) else None
                values = series.get("values") if isinstance(series, dict) else None
                if not isinstance(labels, dict) or not isinstance(values, list):
                    continue
                for pair in values:
                    try:
                        ts, raw = float(pair[0]), pair[1]
                    except (TypeError, ValueError, IndexError):
                        continue
                    by_time.setdefault(ts, []).append({"metric": labels, "value": [ts, raw]})
            snapshots = []
            for ts in sorted(by_time):
                groups, _ = group_series(by_time[ts], neuron_per_device=self._neuron_per_device)
                self._apply_static(groups)
                devices = [device_from_acc(acc, timestamp=ts)[0] for acc in groups.values()]
                devices.sort(key=lambda d: (d.node, d.vendor, d.index, d.uuid))
                snapshots.append(Snapshot(timestamp=ts, source=self.spec, source_kind="fleet",
                                          devices=tuple(devices)))
            return snapshots
