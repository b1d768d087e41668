"""NVML's return codes, what each one means to the source, and the sentences for a library that won't start.

A function answering one of ``LEARNED`` is learned as N/A once per (device, function) and its
snapshot fields (``FIELDS_OF``) are listed in ``DeviceSnapshot.unsupported``; ``ERR_GPU_IS_LOST``
retires the device (``GpuLost``); anything else is an error of that tick only.
"""

from __future__ import annotations

from typing import Any

from fleet_tui.core.monitor.source import SourceUnavailable

# NVML return codes (pynvml l.226-254); kept here so the hot path compares ints.
ERR_NO_PERMISSION = 4
ERR_NOT_SUPPORTED = 3
ERR_DRIVER_NOT_LOADED = 9
ERR_TIMEOUT = 10
ERR_LIBRARY_NOT_FOUND = 12
ERR_FUNCTION_NOT_FOUND = 13
ERR_GPU_IS_LOST = 15
ERR_LIB_RM_VERSION_MISMATCH = 18
LEARNED = frozenset({ERR_NOT_SUPPORTED, ERR_NO_PERMISSION, ERR_FUNCTION_NOT_FOUND})

# What each NVML read feeds, so a learned-unsupported read names the snapshot fields it leaves N/A.
FIELDS_OF = {
    "utilization": ("gpu_util_pct", "mem_util_pct"),
    "memory": ("mem_used_bytes", "mem_total_bytes"),
    "temperature": ("temp_c",),
    "slowdown_temp": ("slowdown_temp_c",),
    "power": ("power_w",),
    "power_limit": ("power_limit_w",),
    "sm_clock": ("sm_clock_mhz",),
    "mem_clock": ("mem_clock_mhz",),
    "sm_clock_max": ("sm_clock_max_mhz",),
    "mem_clock_max": ("mem_clock_max_mhz",),
    "clock_events_api": (),  # nvmlDeviceGetCurrentClocksEventReasons; falls back to the Throttle name
    "clock_event_reasons": ("clock_event_reasons",),
    "pstate": ("pstate",),
    "ecc": ("ecc_corrected", "ecc_uncorrected"),
    "pcie_throughput": ("pcie_tx_bytes_s", "pcie_rx_bytes_s"),
    "processes": ("processes",),
    "graphics_processes": (),
    "gpm": (
        "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
        "fp32_active_pct", "fp16_active_pct", "fp64_active_pct", "nvlink_tx_bytes_s",
        "nvlink_rx_bytes_s",
    ),
    "xid": ("xid_errors",),
    "mig": (),
    "memory_v2": (),
    "pcie_link": (),
}

LIBRARY_MISSING = (
    "NVML library not found: is the NVIDIA driver installed? (libnvidia-ml.so could not be loaded)"
)

LOST = "GPU is lost (NVML_ERROR_GPU_IS_LOST): it fell off the bus or needs a reset."


class GpuLost(Exception):
    """NVML answered GPU_IS_LOST for a device: stop polling it (a lost GPU needs a reset or reboot)."""


def init_library(nv: Any) -> None:
    """``nvmlInit``, turning each failure into a ``SourceUnavailable`` sentence that says what to check."""
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == ERR_LIBRARY_NOT_FOUND:
            raise SourceUnavailable(LIBRARY_MISSING) from exc
        if code == ERR_DRIVER_NOT_LOADED:
            raise SourceUnavailable(
                "NVIDIA driver not loaded: NVML is installed but the kernel driver is not running "
                "(check `nvidia-smi`)."
            ) from exc
        if code == ERR_NO_PERMISSION:
            raise SourceUnavailable("NVML refused access to the GPUs (no permission).") from exc
        if code == ERR_LIB_RM_VERSION_MISMATCH:
            raise SourceUnavailable(
                "NVML and the NVIDIA kernel driver versions differ (driver updated without a "
                "reboot?)."
            ) from exc
        raise SourceUnavailable(f"NVML failed to initialise: {exc}.") from exc
    except OSError as exc:  # a broken/stub libnvidia-ml.so (nvtop #291)
        raise SourceUnavailable(f"{LIBRARY_MISSING}: {exc}") from exc


def text(value: Any) -> str | None:
    """An NVML string (bytes from older bindings, str from newer) as str."""
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def num(value: Any) -> float | None:
    return float(value) if value is not None else None
