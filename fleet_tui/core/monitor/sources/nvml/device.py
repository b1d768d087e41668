"""One NVIDIA GPU's handle and what has been learned about it, and the one way NVML is called for it.

``DeviceCalls.get`` is every per-device NVML call: a function answering NOT_SUPPORTED /
FUNCTION_NOT_FOUND / NO_PERMISSION is learned once per (device, function) and never called again;
GPU_IS_LOST raises ``GpuLost``; other errors are collected for this tick's ``Snapshot.errors``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from fleet_tui.core.monitor.snapshot import DeviceState
from fleet_tui.core.monitor.sources.nvml.codes import ERR_GPU_IS_LOST, FIELDS_OF, LEARNED, GpuLost

# The DeviceSnapshot fields GPM fills (gpm.GPM_METRICS maps NVML's metric ids onto them).
GpmField = Literal[
    "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct",
    "fp16_active_pct", "fp64_active_pct", "pcie_tx_bytes_s", "pcie_rx_bytes_s", "nvlink_tx_bytes_s",
    "nvlink_rx_bytes_s",
]


class GpmFields(TypedDict, total=False):
    """One tick's GPM metrics by DeviceSnapshot field; a metric not read this tick is absent."""

    sm_active_pct: float
    sm_occupancy_pct: float
    tensor_active_pct: float
    dram_active_pct: float
    fp32_active_pct: float
    fp16_active_pct: float
    fp64_active_pct: float
    pcie_tx_bytes_s: float
    pcie_rx_bytes_s: float
    nvlink_tx_bytes_s: float
    nvlink_rx_bytes_s: float


@dataclass(eq=False)
class Device:
    """Mutable per-device state. Only the worker thread touches it (one tick at a time)."""

    index: int
    handle: Any
    name: str = "NVIDIA GPU"
    uuid: str = ""
    lost: str | None = None  # why the device is not polled any more
    state: DeviceState = "ok"
    learned: set[str] = field(default_factory=set)
    unsupported: frozenset[str] = frozenset()
    sm_clock_max: float | None = None
    mem_clock_max: float | None = None
    slowdown_temp: float | None = None
    mig_enabled: bool = False
    # GPM
    gpm_supported: bool = False
    gpm_samples: list[Any] = field(default_factory=list)
    gpm_have_prev: bool = False
    gpm_request: Any = None
    # (metric id, the snapshot field it fills or None, else its extra key, scale)
    gpm_slots: tuple[tuple[int, GpmField | None, str, float], ...] = ()
    gpm_views: tuple[tuple[Any, Any], ...] = ()  # (nvmlReturn, value) ctypes views into gpm_request
    gpm_pcie_ok: bool | None = None  # None until the first GPM metrics arrive
    # PCIe fallback and slow group
    pcie: tuple[float, float] | None = None
    pcie_at: float = float("-inf")
    slow_at: float = float("-inf")
    power_limit_w: float | None = None
    ecc: tuple[int | None, int | None] = (None, None)
    slow_extra: tuple[tuple[str, float], ...] = ()

    def learn(self, key: str) -> None:
        self.learned.add(key)
        self.unsupported = frozenset(f for k in self.learned for f in FIELDS_OF.get(k, (k,)))


class DeviceCalls:
    """NVML calls on devices through one pynvml-compatible module; ``errors`` holds this tick's failures."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.errors: list[str] = []

    def failed(self, d: Device, key: str, exc: BaseException, what: str) -> None:
        """Sort one NVMLError of ``d``: learned as N/A, GPU lost (raises), or an error of this tick."""
        code = getattr(exc, "value", None)
        if code in LEARNED:
            d.learn(key)
        elif code == ERR_GPU_IS_LOST:
            raise GpuLost from exc
        else:
            self.errors.append(f"GPU {d.index}: {what}: {exc}")

    def get(self, d: Device, key: str, fn: Any, *args: Any) -> Any:
        """One NVML call for device ``d``; None when unsupported (learned) or failed this tick."""
        if key in d.learned:
            return None
        if fn is None:  # older bindings without this function
            d.learn(key)
            return None
        try:
            return fn(d.handle, *args)
        except self.nv.NVMLError as exc:
            self.failed(d, key, exc, key)
            return None
