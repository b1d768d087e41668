"""Prometheus HTTP API answers -> per-device groups of raw values.

``parse_envelope`` checks the JSON envelope; ``classify_series`` says what one label set means
(which vendor's device, which metric, or ``up``); ``group_classified`` gathers the values of each
device in an ``Acc`` (NeuronCores folded into devices where ``neuron_hardware_info`` says how)."""

from __future__ import annotations

import json

try:  # a declared dependency; the standard library only where it cannot import
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - orjson ships wheels for every supported platform
    json_loads = json.loads
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from fleet_tui.core.monitor.sources.prometheus.metrics import AMD_FIELDS, AMD_SPECIAL, BLANK_THRESHOLD, PROBE_LABEL
from fleet_tui.core.textsafe import clean


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
        doc = json_loads(body)  # orjson: ~1.4x json's speed on range answers; see fastparse
    except (ValueError, UnicodeDecodeError) as exc:
        snippet = clean(body[:60].decode("utf-8", "replace"))
        raise PrometheusResponseError(f"response is not JSON ({exc.__class__.__name__}: "
                                      f"starts {snippet!r})") from None
    if not isinstance(doc, dict):
        raise PrometheusResponseError("response is JSON but not an API object")
    if doc.get("status") != "success":
        raise PrometheusResponseError(
            f"query failed: {clean(doc.get('errorType', 'error'))}: "
            f"{clean(doc.get('error', 'no message'))}")
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
class Acc:
    """Values of one device gathered from many series before they become a DeviceSnapshot."""

    vendor: str
    node: str
    ident: str
    index: int
    name: str
    uuid: str
    instance: str
    mig_profile: str = ""
    values: dict = field(default_factory=dict)  # metric -> raw value text ("_cores": Neuron cores)
    sample_ts: float | None = None
    # the sample-time probe's classification and text (``delta.ChangedOnly`` compares them)
    probe_entry: tuple | None = None
    probe_raw: object = None


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
    elif name in AMD_FIELDS or name in AMD_SPECIAL or probe == "amd":  # device-metrics-exporter
        index = _int_label(labels, "gpu_id", "gpu") or 0
        uuid = labels.get("gpu_uuid") or labels.get("serial_number") or ""
        part = labels.get("gpu_partition_id", "0")
        key = ("amd", node, uuid or f"gpu{index}", "" if part == "0" else part)
        vendor, default_name = "amd", "AMD GPU"
        model = labels.get("card_series") or labels.get("card_model")
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
                     skip: Callable[[tuple, object], bool] | None = None,
                     ) -> tuple[dict[tuple, Acc], dict[str, float]]:
    """(classify_series(labels), raw value) pairs -> values grouped by device, ``up`` by instance.
    ``skip(entry, raw)``: True for a series to leave out (a sample time that did not move)."""
    devices: dict[tuple, Acc] = {}
    up: dict[str, float] = {}
    per_device = {} if neuron_per_device is None else neuron_per_device
    get = devices.get
    for entry, raw in rows:
        if entry is None or (skip is not None and skip(entry, raw)):
            continue
        kind = entry[0]
        if kind == "dev":
            acc = get(entry[1])
            if acc is None:
                acc = devices[entry[1]] = Acc(
                    vendor=entry[3], node=entry[4], ident=entry[1][2], index=entry[5],
                    name=entry[6] or entry[7], uuid=entry[8], instance=entry[9],
                    mig_profile=entry[10], values={})
            elif entry[6] and acc.name == entry[7]:
                acc.name = entry[6]
            if entry[2] is not None:
                acc.values[entry[2]] = raw
            else:
                acc.sample_ts = parse_value(raw)
                acc.probe_entry, acc.probe_raw = entry, raw
        elif kind == "up":
            value = parse_value(raw)
            if value is not None:
                up[entry[1]] = value
        elif kind == "neuron_hw":
            per_device[entry[1]] = entry[2]
    if per_device and any(k[0] == "aws" for k in devices):
        devices = _group_neuron_cores(devices, per_device)
    return devices, up


def decoded_rows(result: list) -> list[tuple[tuple | None, object]]:
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
                 ) -> tuple[dict[tuple, Acc], dict[str, float]]:
    """Group instant-vector samples by device; also return ``up`` per scrape instance.

    ``neuron_per_device`` (node -> NeuronCores per device, from ``neuron_hardware_info``) is read
    and updated in place, so a static query's answer can fold a later refresh's cores."""
    return group_classified(decoded_rows(result), neuron_per_device=neuron_per_device)


def _group_neuron_cores(devices: dict[tuple, Acc], per_device: dict[str, int]) -> dict[tuple, Acc]:
    """Fold NeuronCores into Neuron devices where neuron_hardware_info says how many per device."""
    out: dict[tuple, Acc] = {}
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
            target = Acc(vendor="aws", node=acc.node, ident=new_key[2], index=dev_index,
                          name=acc.name.replace("NeuronCore", "Neuron device"), uuid="",
                          instance=acc.instance, values={}, sample_ts=acc.sample_ts)
            target.values["_cores"] = []
            out[new_key] = target
        target.values["_cores"].append((acc.index, util))
    return out

