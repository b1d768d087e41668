"""NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``).

Exact calls and their caveats: ``reference/field-notes/monitoring.md`` section 4. How this source
treats them:

* All NVML work of one tick happens in ONE worker-thread call (``asyncio.to_thread``) that reads
  every device, so the event loop never blocks and a tick costs one thread hop.
* A function that answers NOT_SUPPORTED / FUNCTION_NOT_FOUND / NO_PERMISSION is learned once per
  (device, function): it is never called again and the metrics it feeds are listed in
  ``DeviceSnapshot.unsupported``. Other errors (TIMEOUT, UNKNOWN...) are reported for that tick only.
* ``NVML_ERROR_GPU_IS_LOST`` marks that device ``state="lost"`` (not retried: a lost GPU needs a
  reset or reboot); the other devices keep updating.
* No driver / no library -> ``SourceUnavailable`` with a sentence saying so.
* GPM (Hopper+): two samples per device are kept and swapped; metrics describe the interval between
  the previous tick and this one (NVML GPM docs), so the first tick has none.
* PCIe: GPM's PCIe metrics when present; otherwise ``nvmlDeviceGetPcieThroughput``, which blocks
  ~21 ms per call (it samples a 20 ms window; ``tests/fixtures/h200/nvml_latency.json``). It is read
  for at most ONE device per tick, and for each device at most every ``pcie_interval_s`` seconds;
  the last value is reused in between.
* MIG: utilization rates and GPM of the parent are not supported on MIG-enabled GPUs (NVML docs);
  they are marked unsupported, and memory is read per MIG device into ``extra``
  (``mig<N>.mem_used_bytes`` / ``mig<N>.mem_total_bytes`` / ``mig<N>.gpu_instance_id``).
* XID: there is no "last XID" query, only events. A daemon thread waits on an event set registered
  for ``nvmlEventTypeXidCriticalError``; ``DeviceSnapshot.xid_errors`` holds the XIDs seen since the
  source opened (last 16, oldest first). Events before ``open()`` are not seen (NVML docs).
* Slow-changing values (enforced power limit, ECC volatile counters, PCIe link, MIG memory) are read
  every ``slow_interval_s`` (default 10 s) to keep the per-tick call count low.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, ProcessInfo, Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.host import HostReader, ProcessResolver

# NVML return codes (pynvml l.226-254); kept here so the hot path compares ints.
_ERR_NO_PERMISSION = 4
_ERR_NOT_SUPPORTED = 3
_ERR_DRIVER_NOT_LOADED = 9
_ERR_TIMEOUT = 10
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18
_LEARNED = frozenset({_ERR_NOT_SUPPORTED, _ERR_NO_PERMISSION, _ERR_FUNCTION_NOT_FOUND})

_MIB = 1024 * 1024
_NVML_KB = 1024  # NVML's PCIe throughput "KB/s"; read as KiB like nvitop and trace.py
_XID_KEEP = 16
_EVENT_WAIT_MS = 200

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

# GPM metric -> (snapshot field or extra key, scale). IDs from pynvml l.6616-6650 (NVML_GPM_METRIC_*).
_GPM_METRICS: tuple[tuple[str, str, float], ...] = (
    ("NVML_GPM_METRIC_SM_UTIL", "sm_active_pct", 1.0),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", "sm_occupancy_pct", 1.0),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", "tensor_active_pct", 1.0),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", "dram_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP32_UTIL", "fp32_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP16_UTIL", "fp16_active_pct", 1.0),
    ("NVML_GPM_METRIC_FP64_UTIL", "fp64_active_pct", 1.0),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", "pcie_tx_bytes_s", _MIB),  # MiB/s
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", "pcie_rx_bytes_s", _MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "nvlink_tx_bytes_s", _MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "nvlink_rx_bytes_s", _MIB),
    ("NVML_GPM_METRIC_GRAPHICS_UTIL", "extra:gpm_graphics_util_pct", 1.0),
    ("NVML_GPM_METRIC_HMMA_TENSOR_UTIL", "extra:hmma_tensor_active_pct", 1.0),
)

_LIBRARY_MISSING = (
    "NVML library not found: is the NVIDIA driver installed? (libnvidia-ml.so could not be loaded)"
)


_LOST = "GPU is lost (NVML_ERROR_GPU_IS_LOST): it fell off the bus or needs a reset."


class _GpuLost(Exception):
    pass


@dataclass(eq=False)
class _Device:
    """Mutable per-device state. Only the worker thread touches it (one tick at a time)."""

    index: int
    handle: Any
    name: str = "NVIDIA GPU"
    uuid: str = ""
    lost: str | None = None  # why the device is not polled any more
    state: str = "ok"
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
    gpm_slots: tuple[tuple[int, str, float], ...] = ()
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


class NvmlSource(Source):
    """Live NVIDIA source. ``nvml`` injects a pynvml-compatible module (tests use a fake)."""

    name = "nvml"
    kind = "live"

    def __init__(
        self,
        *,
        nvml: Any = None,
        pcie_interval_s: float | None = 5.0,
        slow_interval_s: float = 10.0,
        processes: bool = True,
        host: bool = True,
        xid_events: bool = True,
        clock=time.monotonic,
        **_ignored: Any,
    ) -> None:
        self._nv = nvml
        self.pcie_interval_s = pcie_interval_s
        self.slow_interval_s = slow_interval_s
        self._want_processes = processes
        self._want_host = host
        self._want_xid = xid_events
        self._clock = clock
        self._devices: list[_Device] = []
        self._opened = False
        self._lock = threading.Lock()
        self._host = None
        self._procs = ProcessResolver()
        self._tick_errors: list[str] = []
        self._reasons_fn: Any = None
        self._throttle_fn: Any = None
        self._mem_v2: Any = None
        self._xids: dict[int, deque[int]] = {}
        self._xid_lock = threading.Lock()
        self._xid_stop = threading.Event()
        self._xid_thread: threading.Thread | None = None
        self._event_set: Any = None
        self.driver_version: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        if not self._opened:
            await asyncio.to_thread(self.open_blocking)

    async def sample(self) -> Snapshot:
        if not self._opened:
            await self.open()
        return await asyncio.to_thread(self.sample_blocking)

    async def close(self) -> None:
        if self._opened:
            await asyncio.to_thread(self.close_blocking)

    def open_blocking(self) -> None:
        with self._lock:
            if self._opened:
                return
            nv = self._nv
            if nv is None:
                try:
                    import pynvml as nv  # noqa: PLC0415 - optional at import time
                except ImportError as exc:
                    raise SourceUnavailable(
                        "NVML bindings (the nvidia-ml-py package, module pynvml) are not installed."
                    ) from exc
                self._nv = nv
            self._init_library(nv)
            try:
                count = nv.nvmlDeviceGetCount()
            except nv.NVMLError as exc:
                self._shutdown_quietly()
                raise SourceUnavailable(f"NVML could not count GPUs: {exc}.") from exc
            if count == 0:
                self._shutdown_quietly()
                raise SourceUnavailable("NVML found no NVIDIA GPU on this machine.")
            self._reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            self._throttle_fn = getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
            try:
                self.driver_version = _text(nv.nvmlSystemGetDriverVersion())
            except (nv.NVMLError, AttributeError):
                self.driver_version = None
            self._mem_v2 = getattr(nv, "nvmlMemory_v2", None)
            self._devices = [self._open_device(nv, i) for i in range(count)]
            if self._want_host:
                self._host = HostReader()
            self._opened = True
            if self._want_xid:
                self._start_xid_thread()

    def _init_library(self, nv: Any) -> None:
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _ERR_LIBRARY_NOT_FOUND:
                raise SourceUnavailable(_LIBRARY_MISSING) from exc
            if code == _ERR_DRIVER_NOT_LOADED:
                raise SourceUnavailable(
                    "NVIDIA driver not loaded: NVML is installed but the kernel driver is not running "
                    "(check `nvidia-smi`)."
                ) from exc
            if code == _ERR_NO_PERMISSION:
                raise SourceUnavailable("NVML refused access to the GPUs (no permission).") from exc
            if code == _ERR_LIB_RM_VERSION_MISMATCH:
                raise SourceUnavailable(
                    "NVML and the NVIDIA kernel driver versions differ (driver updated without a "
                    "reboot?)."
                ) from exc
            raise SourceUnavailable(f"NVML failed to initialise: {exc}.") from exc
        except OSError as exc:  # a broken/stub libnvidia-ml.so (nvtop #291)
            raise SourceUnavailable(f"{_LIBRARY_MISSING}: {exc}") from exc

    def _open_device(self, nv: Any, i: int) -> _Device:
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(i)
        except nv.NVMLError as exc:
            d = _Device(index=i, handle=None, name=f"GPU {i}")
            d.lost = f"NVML could not open GPU {i}: {exc}"
            d.state = "lost" if getattr(exc, "value", None) == _ERR_GPU_IS_LOST else "unavailable"
            return d
        d = _Device(index=i, handle=handle)
        try:
            d.name = _text(self._static(d, "name", nv.nvmlDeviceGetName)) or d.name
            d.uuid = _text(self._static(d, "uuid", nv.nvmlDeviceGetUUID)) or ""
            d.sm_clock_max = _num(self._static(d, "sm_clock_max", nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_SM))
            d.mem_clock_max = _num(
                self._static(d, "mem_clock_max", nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_MEM)
            )
            d.slowdown_temp = _num(
                self._static(
                    d, "slowdown_temp", nv.nvmlDeviceGetTemperatureThreshold,
                    nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
                )
            )
            mig = self._static(d, "mig", getattr(nv, "nvmlDeviceGetMigMode", None))
            d.mig_enabled = bool(mig and mig[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
            if d.mig_enabled:
                # "On MIG-enabled GPUs, querying device utilization rates is not currently supported"
                d.learn("utilization")
                d.learn("gpm")  # per-instance GPM (nvmlGpmMigSampleGet) is not read here
            else:
                self._open_gpm(nv, d)
        except _GpuLost:
            d.lost, d.state = _LOST, "lost"
        return d

    def _open_gpm(self, nv: Any, d: _Device) -> None:
        support = self._static(d, "gpm", getattr(nv, "nvmlGpmQueryDeviceSupport", None))
        if support is None or not getattr(support, "isSupportedDevice", 0):
            if "gpm" not in d.learned:
                d.learn("gpm")
            return
        try:
            d.gpm_samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
            req = nv.c_nvmlGpmMetricsGet_t()
        except (nv.NVMLError, AttributeError) as exc:
            self._tick_errors.append(f"GPU {d.index}: GPM unavailable: {exc}")
            d.learn("gpm")
            return
        slots = []
        for name, target, scale in _GPM_METRICS:
            metric_id = getattr(nv, name, None)
            if metric_id is None:
                continue
            req.metrics[len(slots)].metricId = metric_id
            slots.append((metric_id, target, scale))
        req.version = nv.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(slots)
        d.gpm_request = req
        d.gpm_slots = tuple(slots)
        d.gpm_views = _metric_views(req, len(slots))
        d.gpm_supported = True

    def close_blocking(self) -> None:
        with self._lock:
            if not self._opened:
                return
            self._opened = False
            nv = self._nv
            self._xid_stop.set()
            if self._xid_thread is not None:
                self._xid_thread.join(timeout=2 * _EVENT_WAIT_MS / 1000 + 1)
                self._xid_thread = None
            if self._event_set is not None:
                try:
                    nv.nvmlEventSetFree(self._event_set)
                except Exception:  # noqa: BLE001 - closing: nothing useful to do
                    pass
                self._event_set = None
            for d in self._devices:
                for s in d.gpm_samples:
                    try:
                        nv.nvmlGpmSampleFree(s)
                    except Exception:  # noqa: BLE001
                        pass
                d.gpm_samples = []
            self._shutdown_quietly()

    def _shutdown_quietly(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a half-initialised library
            pass

    # -- calls ----------------------------------------------------------------------------------

    def _static(self, d: _Device, key: str, fn: Any, *args: Any) -> Any:
        return self._get(d, key, fn, *args)

    def _get(self, d: _Device, key: str, fn: Any, *args: Any) -> Any:
        """One NVML call for device ``d``; None when unsupported (learned) or failed this tick."""
        if key in d.learned:
            return None
        if fn is None:  # older bindings without this function
            d.learn(key)
            return None
        try:
            return fn(d.handle, *args)
        except self._nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _LEARNED:
                d.learn(key)
            elif code == _ERR_GPU_IS_LOST:
                raise _GpuLost from exc
            else:
                self._tick_errors.append(f"GPU {d.index}: {key}: {exc}")
            return None

    # -- one tick -------------------------------------------------------------------------------

    def sample_blocking(self) -> Snapshot:
        with self._lock:
            if not self._opened:
                raise SourceUnavailable("the NVML source is closed")
            self._tick_errors = []
            now_wall = time.time()
            now = self._clock()
            pcie_budget = [1]  # at most one blocking PCIe read per tick
            devices = []
            live_pids: set[int] = set()
            for d in self._devices:
                if d.lost is None:
                    try:
                        snap = self._read_device(d, now, now_wall, pcie_budget)
                    except _GpuLost:
                        d.lost, d.state = _LOST, "lost"
                        snap = self._lost_snapshot(d, now_wall)
                    else:
                        live_pids.update(p.pid for p in snap.processes)
                else:
                    snap = self._lost_snapshot(d, now_wall)
                devices.append(snap)
            self._procs.forget_except(live_pids)
            host = self._host.read() if self._host is not None else None
            return Snapshot(
                timestamp=now_wall,
                source="nvml",
                source_kind="live",
                devices=tuple(devices),
                host=host,
                errors=tuple(self._tick_errors),
            )

    def _lost_snapshot(self, d: _Device, ts: float) -> DeviceSnapshot:
        return DeviceSnapshot(
            index=d.index, name=d.name, uuid=d.uuid, timestamp=ts,
            state=d.state, error=d.lost,
            mig_enabled=d.mig_enabled, unsupported=d.unsupported, xid_errors=self._xids_of(d.index),
        )

    def _read_device(self, d: _Device, now: float, ts: float, pcie_budget: list[int]) -> DeviceSnapshot:
        nv = self._nv
        get = self._get
        util = get(d, "utilization", nv.nvmlDeviceGetUtilizationRates)
        mem = get(d, "memory_v2", nv.nvmlDeviceGetMemoryInfo, self._mem_v2) if self._mem_v2 else None
        reserved = None
        if mem is not None:
            reserved = getattr(mem, "reserved", None)
            # Report "used" as NVML v1 does (driver reserve included), matching the recorded trace
            # and the sizing ground truth; the reserve itself goes to extra.
            used = mem.used + (reserved or 0)
            total = mem.total
        else:
            mem = get(d, "memory", nv.nvmlDeviceGetMemoryInfo)
            used = mem.used if mem is not None else None
            total = mem.total if mem is not None else None
        temp = get(d, "temperature", nv.nvmlDeviceGetTemperature, 0)
        power_mw = get(d, "power", nv.nvmlDeviceGetPowerUsage)
        sm_clk = get(d, "sm_clock", nv.nvmlDeviceGetClockInfo, 1)
        mem_clk = get(d, "mem_clock", nv.nvmlDeviceGetClockInfo, 2)
        if "clock_events_api" not in d.learned:
            reasons = get(d, "clock_events_api", self._reasons_fn)
        if "clock_events_api" in d.learned:  # driver older than the *ClocksEvent* names (< 535)
            reasons = get(d, "clock_event_reasons", self._throttle_fn)
        pstate = get(d, "pstate", nv.nvmlDeviceGetPerformanceState)
        processes = self._processes(d) if self._want_processes else ()
        if now - d.slow_at >= self.slow_interval_s:
            self._read_slow(d)
            d.slow_at = now
        gpm: dict[str, float] = {}
        if d.gpm_supported and "gpm" not in d.learned:
            gpm = self._read_gpm(d)
        gpm_live = d.gpm_supported and "gpm" not in d.learned
        if self.pcie_interval_s is not None and (not gpm_live or d.gpm_pcie_ok is False):
            if pcie_budget[0] > 0 and now - d.pcie_at >= self.pcie_interval_s and "pcie_throughput" not in d.learned:
                pcie_budget[0] -= 1
                d.pcie_at = now
                tx = get(d, "pcie_throughput", nv.nvmlDeviceGetPcieThroughput, 0)
                rx = get(d, "pcie_throughput", nv.nvmlDeviceGetPcieThroughput, 1)
                d.pcie = (tx * _NVML_KB, rx * _NVML_KB) if tx is not None and rx is not None else None
            if d.pcie is not None:
                gpm["pcie_tx_bytes_s"], gpm["pcie_rx_bytes_s"] = d.pcie
        extra = d.slow_extra
        if reserved is not None:
            extra = (*extra, ("mem_reserved_bytes", float(reserved)))
        ex_gpm = gpm.pop("extra", None)
        if ex_gpm:
            extra = (*extra, *ex_gpm)
        return DeviceSnapshot(
            index=d.index,
            name=d.name,
            uuid=d.uuid,
            timestamp=ts,
            gpu_util_pct=float(util.gpu) if util is not None else None,
            mem_util_pct=float(util.memory) if util is not None else None,
            mem_used_bytes=used,
            mem_total_bytes=total,
            temp_c=float(temp) if temp is not None else None,
            slowdown_temp_c=d.slowdown_temp,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            power_limit_w=d.power_limit_w,
            sm_clock_mhz=float(sm_clk) if sm_clk is not None else None,
            sm_clock_max_mhz=d.sm_clock_max,
            mem_clock_mhz=float(mem_clk) if mem_clk is not None else None,
            mem_clock_max_mhz=d.mem_clock_max,
            clock_event_reasons=int(reasons) if reasons is not None else None,
            pstate=int(pstate) if pstate is not None else None,
            ecc_corrected=d.ecc[0],
            ecc_uncorrected=d.ecc[1],
            xid_errors=self._xids_of(d.index),
            gpm_supported=d.gpm_supported and "gpm" not in d.learned,
            mig_enabled=d.mig_enabled,
            unsupported=d.unsupported,
            processes=processes,
            extra=extra,
            **gpm,
        )

    def _processes(self, d: _Device) -> tuple[ProcessInfo, ...]:
        nv = self._nv
        compute = self._get(d, "processes", nv.nvmlDeviceGetComputeRunningProcesses) or ()
        graphics = self._get(d, "graphics_processes", nv.nvmlDeviceGetGraphicsRunningProcesses) or ()
        if not compute and not graphics:
            return ()
        used: dict[int, int | None] = {}
        for p in (*compute, *graphics):
            pid = int(p.pid)
            mem = getattr(p, "usedGpuMemory", None)  # None under WDDM (pynvml l.4217)
            prev = used.get(pid)
            used[pid] = mem if prev is None else (max(prev, mem) if mem is not None else prev)
        out = []
        for pid, mem in used.items():
            user, command = self._procs.lookup(pid)
            out.append(ProcessInfo(pid=pid, device_index=d.index, used_gpu_bytes=mem, user=user, command=command))
        return tuple(out)

    def _read_gpm(self, d: _Device) -> dict[str, Any]:
        nv = self._nv
        prev, cur = d.gpm_samples
        if self._get(d, "gpm", nv.nvmlGpmSampleGet, cur) is None:
            return {}
        have_prev = d.gpm_have_prev
        d.gpm_samples = [cur, prev]  # this sample is the next interval's start
        d.gpm_have_prev = True
        if not have_prev:
            return {}
        req = d.gpm_request
        req.sample1 = prev
        req.sample2 = cur
        try:
            nv.nvmlGpmMetricsGet(req)
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _LEARNED:
                d.learn("gpm")
            elif code == _ERR_GPU_IS_LOST:
                raise _GpuLost from exc
            else:
                self._tick_errors.append(f"GPU {d.index}: GPM metrics: {exc}")
            return {}
        out: dict[str, Any] = {}
        extra = []
        for (ret, val), (_mid, target, scale) in zip(d.gpm_views, d.gpm_slots):
            if ret.value != 0:
                continue
            value = val.value * scale
            if target[:6] == "extra:":
                extra.append((target[6:], value))
            else:
                out[target] = value
        if extra:
            out["extra"] = tuple(extra)
        d.gpm_pcie_ok = "pcie_tx_bytes_s" in out
        return out

    def _read_slow(self, d: _Device) -> None:
        nv = self._nv
        limit_mw = self._get(d, "power_limit", nv.nvmlDeviceGetEnforcedPowerLimit)
        d.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None
        corrected = self._get(d, "ecc", nv.nvmlDeviceGetTotalEccErrors, 0, 0)  # CORRECTED, VOLATILE
        uncorrected = self._get(d, "ecc", nv.nvmlDeviceGetTotalEccErrors, 1, 0)
        d.ecc = (
            int(corrected) if corrected is not None else None,
            int(uncorrected) if uncorrected is not None else None,
        )
        extra: list[tuple[str, float]] = []
        gen = self._get(d, "pcie_link", getattr(nv, "nvmlDeviceGetCurrPcieLinkGeneration", None))
        width = self._get(d, "pcie_link", getattr(nv, "nvmlDeviceGetCurrPcieLinkWidth", None))
        if gen is not None:
            extra.append(("pcie_link_gen", float(gen)))
        if width is not None:
            extra.append(("pcie_link_width", float(width)))
        if d.mig_enabled:
            extra.extend(self._mig_memory(d))
        d.slow_extra = tuple(extra)

    def _mig_memory(self, d: _Device) -> list[tuple[str, float]]:
        nv = self._nv
        out: list[tuple[str, float]] = []
        count = self._get(d, "mig", nv.nvmlDeviceGetMaxMigDeviceCount) or 0
        for j in range(int(count)):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(d.handle, j)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == _ERR_GPU_IS_LOST:
                    raise _GpuLost from exc
                continue  # NOT_FOUND: empty slot
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(mh)
                gi = nv.nvmlDeviceGetGpuInstanceId(mh)
            except nv.NVMLError as exc:
                self._tick_errors.append(f"GPU {d.index} MIG {j}: {exc}")
                continue
            out += [
                (f"mig{j}.mem_used_bytes", float(mem.used)),
                (f"mig{j}.mem_total_bytes", float(mem.total)),
                (f"mig{j}.gpu_instance_id", float(gi)),
            ]
        return out

    # -- XID events -----------------------------------------------------------------------------

    def _xids_of(self, index: int) -> tuple[int, ...]:
        q = self._xids.get(index)
        if not q:
            return ()
        with self._xid_lock:
            return tuple(q)

    def _start_xid_thread(self) -> None:
        nv = self._nv
        try:
            es = nv.nvmlEventSetCreate()
        except (nv.NVMLError, AttributeError):
            for d in self._devices:
                d.learn("xid")
            return
        registered = 0
        for d in self._devices:
            if d.lost is not None:
                continue
            try:
                nv.nvmlDeviceRegisterEvents(d.handle, nv.nvmlEventTypeXidCriticalError, es)
                registered += 1
            except nv.NVMLError:
                d.learn("xid")
        if not registered:
            try:
                nv.nvmlEventSetFree(es)
            except nv.NVMLError:
                pass
            return
        self._event_set = es
        self._xid_stop.clear()
        self._xid_thread = threading.Thread(target=self._xid_loop, args=(es,), name="nvml-xid", daemon=True)
        self._xid_thread.start()

    def _xid_loop(self, es: Any) -> None:
        nv = self._nv
        while not self._xid_stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(es, _EVENT_WAIT_MS)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == _ERR_TIMEOUT:
                    continue
                time.sleep(_EVENT_WAIT_MS / 1000)  # e.g. GPU lost: do not spin
                continue
            try:
                index = int(nv.nvmlDeviceGetIndex(data.device))
            except nv.NVMLError:
                continue
            with self._xid_lock:
                self._xids.setdefault(index, deque(maxlen=_XID_KEEP)).append(int(data.eventData))


def _metric_views(req: Any, count: int) -> tuple[tuple[Any, Any], ...]:
    """Plain ctypes views of each metric's ``nvmlReturn`` and ``value`` inside the request struct.

    pynvml's structs override ``__getattribute__`` in Python (bytes->str conversion), which made
    reading 13 metrics the most expensive part of a tick; these views read the same memory directly.
    """
    if not isinstance(req, ctypes.Structure):  # a duck-typed stand-in: read through attributes
        return tuple((_AttrView(req.metrics[j], "nvmlReturn"), _AttrView(req.metrics[j], "value")) for j in range(count))
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


class _AttrView:
    __slots__ = ("obj", "attr")

    def __init__(self, obj: Any, attr: str) -> None:
        self.obj, self.attr = obj, attr

    @property
    def value(self) -> Any:
        return getattr(self.obj, self.attr)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _num(value: Any) -> float | None:
    return float(value) if value is not None else None
