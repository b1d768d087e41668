"""GPM (GPU Performance Monitoring, Hopper+): open the two samples of a device, read a tick's metrics.

Two samples per device are kept and swapped; metrics describe the interval between the previous tick
and this one (NVML GPM docs), so the first tick has none. GPM's PCIe metrics, when present, replace
the blocking ``nvmlDeviceGetPcieThroughput`` (``gpm_pcie_ok``).
"""

from __future__ import annotations

import ctypes
from typing import Any, get_args

from fleet_tui.core.monitor.sources.nvml.device import Device, DeviceCalls, GpmField, GpmFields

MIB = 1024 * 1024

# GPM metric -> (snapshot field or extra key, scale). IDs from pynvml l.6616-6650 (NVML_GPM_METRIC_*).
GPM_METRICS: tuple[tuple[str, str, float], ...] = (
    ("NVML_GPM_METRIC_SM_UTIL", "sm_active_pct", 1.0),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", "sm_occupancy_pct", 1.0),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", "tensor_active_pct", 1.0),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", "dram_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP32_UTIL", "fp32_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP16_UTIL", "fp16_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP64_UTIL", "fp64_active_pct", 1.0),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", "pcie_tx_bytes_s", MIB),  # MiB/s
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", "pcie_rx_bytes_s", MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "nvlink_tx_bytes_s", MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "nvlink_rx_bytes_s", MIB),
    # NVML_GPM_METRIC_GRAPHICS_UTIL is not asked for: alone it cost 1.39 ms of CPU a call on an H200
    # (every other metric ~1 us; scripts/gpu_gpm_cost.py), and no diagnosis reads it.
    ("NVML_GPM_METRIC_HMMA_TENSOR_UTIL", "extra:hmma_tensor_active_pct", 1.0),
)
_FIELD: dict[str, GpmField] = {f: f for f in get_args(GpmField)}


def open_gpm(calls: DeviceCalls, d: Device) -> None:
    """Allocate ``d``'s two samples and its metrics request, or learn GPM as N/A on this device."""
    nv = calls.nv
    support = calls.get(d, "gpm", getattr(nv, "nvmlGpmQueryDeviceSupport", None))
    if support is None or not getattr(support, "isSupportedDevice", 0):
        if "gpm" not in d.learned:
            d.learn("gpm")
        return
    try:
        d.gpm_samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        req = nv.c_nvmlGpmMetricsGet_t()
    except (nv.NVMLError, AttributeError) as exc:
        calls.errors.append(f"GPU {d.index}: GPM unavailable: {exc}")
        d.learn("gpm")
        return
    slots = []
    for name, target, scale in GPM_METRICS:
        metric_id = getattr(nv, name, None)
        if metric_id is None:
            continue
        req.metrics[len(slots)].metricId = metric_id
        field = _FIELD.get(target)
        slots.append((metric_id, field, "" if field is not None else target.removeprefix("extra:"), scale))
    req.version = nv.NVML_GPM_METRICS_GET_VERSION
    req.numMetrics = len(slots)
    d.gpm_request = req
    d.gpm_slots = tuple(slots)
    d.gpm_views = metric_views(req, len(slots))
    d.gpm_supported = True


def read_gpm(calls: DeviceCalls, d: Device) -> tuple[GpmFields, tuple[tuple[str, float], ...]]:
    """This tick's GPM metrics of ``d``: by snapshot field, and the extra pairs; none on the first tick."""
    nv = calls.nv
    prev, cur = d.gpm_samples
    if calls.get(d, "gpm", nv.nvmlGpmSampleGet, cur) is None:
        return {}, ()
    have_prev = d.gpm_have_prev
    d.gpm_samples = [cur, prev]  # this sample is the next interval's start
    d.gpm_have_prev = True
    if not have_prev:
        return {}, ()
    req = d.gpm_request
    req.sample1 = prev
    req.sample2 = cur
    try:
        nv.nvmlGpmMetricsGet(req)
    except nv.NVMLError as exc:
        calls.failed(d, "gpm", exc, "GPM metrics")
        return {}, ()
    out: GpmFields = {}
    extra: list[tuple[str, float]] = []
    for (ret, val), (_mid, field, extra_key, scale) in zip(d.gpm_views, d.gpm_slots):
        if ret.value != 0:
            continue
        value = val.value * scale
        if field is None:
            extra.append((extra_key, value))
        else:
            out[field] = value
    d.gpm_pcie_ok = "pcie_tx_bytes_s" in out
    return out, tuple(extra)


def prime_gpm(calls: DeviceCalls, d: Device) -> bool:
    """Take ``d``'s first GPM sample ahead of a reading, so that reading has an interval's metrics.
    False when GPM is not read on ``d`` or it already holds a sample."""
    if not d.gpm_supported or "gpm" in d.learned or d.gpm_have_prev:
        return False
    nv = calls.nv
    prev, cur = d.gpm_samples
    if calls.get(d, "gpm", nv.nvmlGpmSampleGet, cur) is None:
        return False
    d.gpm_samples = [cur, prev]
    d.gpm_have_prev = True
    return True


def free_gpm(nv: Any, d: Device) -> None:
    for s in d.gpm_samples:
        try:
            nv.nvmlGpmSampleFree(s)
        except Exception:  # noqa: BLE001 - closing: nothing useful to do
            pass
    d.gpm_samples = []


def metric_views(req: Any, count: int) -> tuple[tuple[Any, Any], ...]:
    """Plain ctypes views of each metric's ``nvmlReturn`` and ``value`` inside the request struct.

    pynvml's structs override ``__getattribute__`` in Python (bytes->str conversion), which made
    reading 13 metrics the most expensive part of a tick; these views read the same memory directly.
    """
    if not isinstance(req, ctypes.Structure):  # a duck-typed stand-in: read through attributes
        return tuple((AttrView(req.metrics[j], "nvmlReturn"), AttrView(req.metrics[j], "value")) for j in range(count))
    metric_t = type(req).metrics.size // max(1, len(req.metrics))
    base = type(req).metrics.offset
    m_cls = type(req.metrics[0])
    ret_t = m_cls._fields_[[f[0] for f in m_cls._fields_].index("nvmlReturn")][1]
    return tuple(
        (
            ret_t.from_buffer(req, base + j * metric_t + m_cls.nvmlReturn.offset),
            ctypes.c_double.from_buffer(req, base + j * metric_t + m_cls.value.offset),
        )
        for j in range(count)
    )


class AttrView:
    """``.value`` read through an attribute of a duck-typed (non-ctypes) metrics request."""

    __slots__ = ("obj", "attr")

    def __init__(self, obj: Any, attr: str) -> None:
        self.obj, self.attr = obj, attr

    @property
    def value(self) -> Any:
        return getattr(self.obj, self.attr)
