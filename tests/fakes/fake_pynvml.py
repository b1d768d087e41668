"""A fake ``pynvml`` module that serves values recorded on a real H200 and injects NVML errors.

Values come from the labelled NVML+GPM trace (``fleet_tui/demo/h200_trace_labelled.jsonl``: its
static line and one sample row per fake tick) and from ``tests/fixtures/h200/nvidia_smi_q.xml``
(PCI bus id, driver-reserved memory, ECC volatile counters). Constants, structs and the NVMLError
class hierarchy are the REAL ones from the installed nvidia-ml-py, so the source under test handles
exactly the exceptions and ctypes structs it meets on a GPU (``c_nvmlGpmMetricsGet_t`` included).

Usage::

    fake = FakeNvml.h200(devices=2)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)   # or NvmlSource(nvml=fake.module)
    fake.fail("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED, device=1)
    fake.lose(0)            # every call on GPU 0 now raises GPU_IS_LOST
    fake.advance()          # next recorded row
    fake.calls[("nvmlDeviceGetPowerUsage", 1)]  # how often the source called it

Nothing here talks to a driver; ``nvmlInit`` can be made to fail with LIBRARY_NOT_FOUND or
DRIVER_NOT_LOADED (``FakeNvml(init_error=...)``).
"""

from __future__ import annotations

import ctypes
import json
import queue
import re
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml as real

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fleet_tui" / "demo" / "h200_trace_labelled.jsonl"
SMI_XML = REPO / "tests" / "fixtures" / "h200" / "nvidia_smi_q.xml"
MIB = 1024 * 1024

NVMLError = real.NVMLError
# GPM metric id -> trace key (units as recorded: % or MiB/s)
GPM_TRACE_KEYS = {
    real.NVML_GPM_METRIC_GRAPHICS_UTIL: "gpm_graphics_util",
    real.NVML_GPM_METRIC_SM_UTIL: "gpm_sm_util",
    real.NVML_GPM_METRIC_SM_OCCUPANCY: "gpm_sm_occupancy",
    real.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "gpm_any_tensor_util",
    real.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: "gpm_hmma_tensor_util",
    real.NVML_GPM_METRIC_DRAM_BW_UTIL: "gpm_dram_bw_util",
    real.NVML_GPM_METRIC_FP32_UTIL: "gpm_fp32_util",
    real.NVML_GPM_METRIC_FP16_UTIL: "gpm_fp16_util",
    real.NVML_GPM_METRIC_PCIE_TX_PER_SEC: "gpm_pcie_tx_mib_s",
    real.NVML_GPM_METRIC_PCIE_RX_PER_SEC: "gpm_pcie_rx_mib_s",
    real.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: "gpm_nvlink_rx_mib_s",
    real.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: "gpm_nvlink_tx_mib_s",
}


def load_trace() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    static, rows = None, []
    with TRACE.open() as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("kind") == "static":
                static = rec
            elif rec.get("kind") == "sample":
                rows.append(rec)
    assert static is not None
    return static, rows


def smi_facts() -> dict[str, Any]:
    """The few nvidia-smi -q -x values the trace lacks."""
    xml = SMI_XML.read_text()

    def tag(path_re: str) -> str:
        m = re.search(path_re, xml, re.S)
        assert m, path_re
        return m.group(1).strip()

    volatile = tag(r"<volatile>(.*?)</volatile>")
    corrected = sum(int(v) for v in re.findall(r"<(?:sram|dram)_correctable>(\d+)<", volatile))
    uncorrected = sum(int(v) for v in re.findall(r"<(?:sram_uncorrectable_\w+|dram_uncorrectable)>(\d+)<", volatile))
    return {
        "pci_bus_id": tag(r"<pci_bus_id>(.*?)</pci_bus_id>"),
        "reserved_bytes": int(tag(r"<fb_memory_usage>.*?<reserved>(\d+) MiB</reserved>")) * MIB,
        "ecc_corrected": corrected,
        "ecc_uncorrected": uncorrected,
        "product_name": tag(r"<product_name>(.*?)</product_name>"),
    }


@dataclass
class FakeGpu:
    index: int
    static: dict[str, Any]
    rows: list[dict[str, Any]]
    offset: int = 0
    uuid: str = ""
    reserved_bytes: int = 616 * MIB
    ecc: tuple[int, int] = (0, 0)
    mig: bool = False
    # MIG devices: (gpu instance id, used bytes, total bytes)
    mig_devices: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class FakeHandle:
    index: int
    mig_slot: int | None = None


class _Obj(types.SimpleNamespace):
    pass


class FakeNvml:
    """State behind one fake pynvml module."""

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None, timing: bool = False):
        self.gpus = gpus
        self.init_error = init_error
        self.tick = 0
        self.calls: Counter[tuple[str, int | None]] = Counter()
        self.failures: dict[tuple[str, int | None], int] = {}
        self.lost: set[int] = set()
        self.initialised = 0
        self.events: queue.Queue = queue.Queue()
        self.registered: set[int] = set()
        self.timing = timing
        self.time_in_calls = 0.0
        self._gpm_samples: dict[int, tuple[int, int] | None] = {}
        self._gpm_buffers: list[Any] = []
        self.module = self._build_module()

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def h200(cls, devices: int = 1, **kw: Any) -> "FakeNvml":
        static, rows = load_trace()
        facts = smi_facts()
        # nvidia-smi rounds the driver reserve to 616 MiB; with no process NVML's v1 "used" is the
        # reserve itself (644939776 B in the trace), so serve that exact figure as v2's "reserved".
        reserved = min(facts["reserved_bytes"], min(r["mem_used_bytes"] for r in rows))
        gpus = []
        for i in range(devices):
            uuid = static["uuid"] if i == 0 else static["uuid"][:-2] + f"{i:02x}"
            gpus.append(
                FakeGpu(
                    index=i, static=static, rows=rows, offset=(i * 97) % len(rows), uuid=uuid,
                    reserved_bytes=reserved,
                    ecc=(facts["ecc_corrected"], facts["ecc_uncorrected"]),
                )
            )
        return cls(gpus, **kw)

    def row(self, index: int) -> dict[str, Any]:
        g = self.gpus[index]
        return g.rows[(g.offset + self.tick) % len(g.rows)]

    # -- test controls --------------------------------------------------------------------------

    def advance(self, n: int = 1) -> None:
        self.tick += n

    def fail(self, fn: str, code: int, device: int | None = None) -> None:
        self.failures[(fn, device)] = code

    def clear_failure(self, fn: str, device: int | None = None) -> None:
        self.failures.pop((fn, device), None)

    def lose(self, index: int) -> None:
        self.lost.add(index)

    def emit_xid(self, index: int, xid: int) -> None:
        if index in self.registered:
            self.events.put(_Obj(device=FakeHandle(index), eventType=real.nvmlEventTypeXidCriticalError, eventData=xid))

    def count(self, fn: str, device: int | None = None) -> int:
        if device is None:
            return sum(v for (name, _), v in self.calls.items() if name == fn)
        return self.calls[(fn, device)]

    def total_calls(self) -> int:
        return sum(self.calls.values())

    # -- the module -----------------------------------------------------------------------------

    def _build_module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")
        mod.__file__ = __file__
        for name, value in vars(real).items():
            if name.startswith("__"):
                continue
            # keep constants, structs and NVMLError classes; drop every real C-calling function
            if isinstance(value, types.FunctionType) and name.startswith("nvml"):
                continue
            setattr(mod, name, value)
        for name in dir(self):
            if name.startswith("nvml"):
                impl = getattr(self, name)
                per_device = name.startswith(("nvmlDevice", "nvmlGpmSampleGet", "nvmlGpmQueryDeviceSupport"))
                per_device = per_device and name not in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")
                setattr(mod, name, self._wrap(name, impl, per_device))
        mod.FAKE = self
        return mod

    def _wrap(self, name: str, impl: Any, per_device: bool) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter() if self.timing else 0.0
            try:
                idx = None
                if per_device and args and isinstance(args[0], FakeHandle):
                    idx = args[0].index
                self.calls[(name, idx)] += 1
                if name not in ("nvmlInit", "nvmlInitWithFlags") and not self.initialised:
                    raise NVMLError(real.NVML_ERROR_UNINITIALIZED)
                if idx is not None and idx in self.lost:
                    raise NVMLError(real.NVML_ERROR_GPU_IS_LOST)
                code = self.failures.get((name, idx)) or self.failures.get((name, None))
                if code:
                    raise NVMLError(code)
                return impl(*args, **kw)
            finally:
                if self.timing:
                    self.time_in_calls += time.perf_counter() - t0

        call.__name__ = name
        return call

    # -- library --------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self.initialised = max(0, self.initialised - 1)

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.gpus[0].static["driver"]

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if not 0 <= index < len(self.gpus):
            raise NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        if index in self.lost:
            raise NVMLError(real.NVML_ERROR_GPU_IS_LOST)
        return FakeHandle(index)

    # -- static ---------------------------------------------------------------------------------

    def nvmlDeviceGetName(self, h: FakeHandle) -> str:
        return self.gpus[h.index].static["name"]

    def nvmlDeviceGetUUID(self, h: FakeHandle) -> str:
        return self.gpus[h.index].uuid

    def nvmlDeviceGetIndex(self, h: FakeHandle) -> int:
        return h.index

    def nvmlDeviceGetMaxClockInfo(self, h: FakeHandle, clock: int) -> int:
        s = self.gpus[h.index].static
        sm = clock in (real.NVML_CLOCK_SM, real.NVML_CLOCK_GRAPHICS)
        return s["max_sm_clock_mhz"] if sm else s["max_mem_clock_mhz"]

    def nvmlDeviceGetTemperatureThreshold(self, h: FakeHandle, kind: int) -> int:
        s = self.gpus[h.index].static
        if kind == real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return s["slowdown_temp_c"]
        if kind == real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return s["shutdown_temp_c"]
        raise NVMLError(real.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetMigMode(self, h: FakeHandle) -> list[int]:
        m = int(self.gpus[h.index].mig)
        return [m, m]

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeHandle) -> int:
        return self.gpus[h.index].static["enforced_power_limit_mw"]

    def nvmlDeviceGetTotalEccErrors(self, h: FakeHandle, error_type: int, counter: int) -> int:
        return self.gpus[h.index].ecc[error_type]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeHandle) -> int:
        return self.gpus[h.index].static["pcie_gen_cur"]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeHandle) -> int:
        return self.gpus[h.index].static["pcie_width_cur"]

    # -- per tick -------------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, h: FakeHandle) -> Any:
        if self.gpus[h.index].mig:
            raise NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        r = self.row(h.index)
        return _Obj(gpu=r["gpu_util"], memory=r["mem_util"])

    def nvmlDeviceGetMemoryInfo(self, h: FakeHandle, version: int | None = None) -> Any:
        if h.mig_slot is not None:
            gi, used, total = self.gpus[h.index].mig_devices[h.mig_slot]
            return _Obj(total=total, used=used, free=total - used)
        g = self.gpus[h.index]
        total = g.static["memory_total_bytes"]
        used = self.row(h.index)["mem_used_bytes"]  # NVML v1 "used" (driver reserve included)
        if not version:
            return _Obj(total=total, used=used, free=total - used)
        used_v2 = max(0, used - g.reserved_bytes)
        return _Obj(version=version, total=total, reserved=g.reserved_bytes, used=used_v2,
                    free=total - g.reserved_bytes - used_v2)

    def nvmlDeviceGetTemperature(self, h: FakeHandle, sensor: int) -> int:
        return self.row(h.index)["temp_c"]

    def nvmlDeviceGetPowerUsage(self, h: FakeHandle) -> int:
        return self.row(h.index)["power_mw"]

    def nvmlDeviceGetClockInfo(self, h: FakeHandle, clock: int) -> int:
        r = self.row(h.index)
        return r["sm_clock_mhz"] if clock in (real.NVML_CLOCK_SM, real.NVML_CLOCK_GRAPHICS) else r["mem_clock_mhz"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeHandle) -> int:
        return self.row(h.index)["clock_event_reasons"]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeHandle) -> int:
        return self.row(h.index)["clock_event_reasons"]

    def nvmlDeviceGetPerformanceState(self, h: FakeHandle) -> int:
        return self.row(h.index)["pstate"]

    def nvmlDeviceGetPcieThroughput(self, h: FakeHandle, counter: int) -> int:
        r = self.row(h.index)
        return r["pcie_tx_kb_s"] if counter == real.NVML_PCIE_UTIL_TX_BYTES else r["pcie_rx_kb_s"]

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeHandle) -> list[Any]:
        return [_Obj(pid=p["pid"], usedGpuMemory=p["used_bytes"], gpuInstanceId=0xFFFFFFFF,
                     computeInstanceId=0xFFFFFFFF) for p in self.row(h.index)["procs"]]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: FakeHandle) -> list[Any]:
        return []

    # -- MIG ------------------------------------------------------------------------------------

    def nvmlDeviceGetMaxMigDeviceCount(self, h: FakeHandle) -> int:
        return 7 if self.gpus[h.index].mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: FakeHandle, slot: int) -> FakeHandle:
        if slot >= len(self.gpus[h.index].mig_devices):
            raise NVMLError(real.NVML_ERROR_NOT_FOUND)
        return FakeHandle(h.index, slot)

    def nvmlDeviceGetGpuInstanceId(self, h: FakeHandle) -> int:
        return self.gpus[h.index].mig_devices[h.mig_slot][0]

    # -- GPM ------------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, h: FakeHandle) -> Any:
        ok = bool(self.gpus[h.index].static.get("gpm_supported")) and not self.gpus[h.index].mig
        return _Obj(version=1, isSupportedDevice=int(ok))

    def nvmlGpmSampleAlloc(self) -> Any:
        buf = ctypes.create_string_buffer(16)
        self._gpm_buffers.append(buf)  # keep the memory alive for the pointer's lifetime
        ptr = ctypes.cast(buf, real.c_nvmlGpmSample_t)
        self._gpm_samples[_addr(ptr)] = None
        return ptr

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._gpm_samples.pop(_addr(sample), None)

    def nvmlGpmSampleGet(self, h: FakeHandle, sample: Any) -> Any:
        key = _addr(sample)
        if key not in self._gpm_samples:
            raise NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        self._gpm_samples[key] = (h.index, self.tick)
        return sample

    def nvmlGpmMetricsGet(self, req: Any) -> Any:
        s1 = self._gpm_samples.get(_addr(req.sample1))
        s2 = self._gpm_samples.get(_addr(req.sample2))
        if req.version != real.NVML_GPM_METRICS_GET_VERSION or s1 is None or s2 is None or s1[0] != s2[0]:
            raise NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        # NVML computes each metric over the interval between the two samples; the trace row of the
        # later sample holds exactly that interval's values.
        row = self.gpus[s2[0]].rows[(self.gpus[s2[0]].offset + s2[1]) % len(self.gpus[s2[0]].rows)]
        for j in range(req.numMetrics):
            m = req.metrics[j]
            key = GPM_TRACE_KEYS.get(m.metricId)
            if key is None or key not in row or s2[1] <= s1[1]:
                m.nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED if key is None else real.NVML_ERROR_INVALID_ARGUMENT
                m.value = 0.0
            else:
                m.nvmlReturn = real.NVML_SUCCESS
                m.value = float(row[key])
        return req

    # -- events ---------------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> Any:
        return _Obj(kind="event-set")

    def nvmlDeviceRegisterEvents(self, h: FakeHandle, types_mask: int, es: Any) -> None:
        self.registered.add(h.index)

    def nvmlEventSetWait_v2(self, es: Any, timeout_ms: int) -> Any:
        try:
            return self.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise NVMLError(real.NVML_ERROR_TIMEOUT) from None

    def nvmlEventSetFree(self, es: Any) -> None:
        pass


def _addr(ptr: Any) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0
