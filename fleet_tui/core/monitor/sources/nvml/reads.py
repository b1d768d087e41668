"""What one device is read for: static facts at open, the per-tick values, and the slow group.

Per tick: utilization, memory, temperature, power, clocks, clock-event reasons, P-state, processes,
and GPM (``gpm``). PCIe throughput comes from GPM when present; otherwise from
``nvmlDeviceGetPcieThroughput``, which blocks ~21 ms per call (it samples a 20 ms window;
``tests/fixtures/h200/nvml_latency.json``), so it is read for at most ONE device per tick (the
``pcie_budget``), and for each device at most every ``pcie_interval_s``; the last value is reused in
between. The slow group (enforced power limit, ECC volatile counters, PCIe link, MIG memory) is read
every ``slow_interval_s``. MIG-enabled GPUs: utilization rates and GPM of the parent are not
supported (NVML docs) and are learned as N/A; memory is read per MIG device into ``extra``.
"""

from __future__ import annotations

from collections.abc import Callable

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, ProcessInfo
from fleet_tui.core.monitor.sources.host import ProcessResolver
from fleet_tui.core.monitor.sources.nvml.codes import ERR_GPU_IS_LOST, LOST, GpuLost, num, text
from fleet_tui.core.monitor.sources.nvml.device import Device, DeviceCalls, GpmFields
from fleet_tui.core.monitor.sources.nvml.gpm import open_gpm, read_gpm

NVML_KB = 1024  # NVML's PCIe throughput "KB/s"; read as KiB like nvitop and trace.py


class DeviceReader:
    """Reads devices through ``calls``; ``procs`` names process owners, ``xids_of(index)`` gives XIDs."""

    def __init__(
        self,
        calls: DeviceCalls,
        *,
        pcie_interval_s: float | None,
        slow_interval_s: float,
        processes: bool,
        procs: ProcessResolver,
        xids_of: Callable[[int], tuple[int, ...]],
    ) -> None:
        nv = calls.nv
        self.calls = calls
        self.pcie_interval_s = pcie_interval_s
        self.slow_interval_s = slow_interval_s
        self.want_processes = processes
        self.xids_of = xids_of
        self.procs = procs
        self._reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._throttle_fn = getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        self._mem_v2 = getattr(nv, "nvmlMemory_v2", None)

    # -- open -----------------------------------------------------------------------------------

    def open_device(self, i: int) -> Device:
        """Device ``i`` with its static facts read, MIG detected and GPM opened (or why it is lost)."""
        calls, nv = self.calls, self.calls.nv
        static = calls.get
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(i)
        except nv.NVMLError as exc:
            d = Device(index=i, handle=None, name=f"GPU {i}")
            d.lost = f"NVML could not open GPU {i}: {exc}"
            d.state = "lost" if getattr(exc, "value", None) == ERR_GPU_IS_LOST else "unavailable"
            return d
        d = Device(index=i, handle=handle)
        try:
            d.name = text(static(d, "name", nv.nvmlDeviceGetName)) or d.name
            d.uuid = text(static(d, "uuid", nv.nvmlDeviceGetUUID)) or ""
            d.sm_clock_max = num(static(d, "sm_clock_max", nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_SM))
            d.mem_clock_max = num(static(d, "mem_clock_max", nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_MEM))
            d.slowdown_temp = num(
                static(
                    d, "slowdown_temp", nv.nvmlDeviceGetTemperatureThreshold,
                    nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
                )
            )
            mig = static(d, "mig", getattr(nv, "nvmlDeviceGetMigMode", None))
            d.mig_enabled = bool(mig and mig[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
            if d.mig_enabled:
                # "On MIG-enabled GPUs, querying device utilization rates is not currently supported"
                d.learn("utilization")
                d.learn("gpm")  # per-instance GPM (nvmlGpmMigSampleGet) is not read here
            else:
                open_gpm(calls, d)
        except GpuLost:
            d.lost, d.state = LOST, "lost"
        return d

    # -- one tick -------------------------------------------------------------------------------

    def lost_snapshot(self, d: Device, ts: float) -> DeviceSnapshot:
        return DeviceSnapshot(
            index=d.index, name=d.name, uuid=d.uuid, timestamp=ts,
            state=d.state, error=d.lost,
            mig_enabled=d.mig_enabled, unsupported=d.unsupported, xid_errors=self.xids_of(d.index),
        )

    def read(self, d: Device, now: float, ts: float, pcie_budget: list[int]) -> DeviceSnapshot:
        """This tick's snapshot of ``d``; raises ``GpuLost``. ``pcie_budget[0]``: blocking PCIe reads left."""
        calls = self.calls
        nv = calls.nv
        get = calls.get
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
        temp = get(d, "temperature", nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU)
        power_mw = get(d, "power", nv.nvmlDeviceGetPowerUsage)
        sm_clk = get(d, "sm_clock", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
        mem_clk = get(d, "mem_clock", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM)
        if "clock_events_api" not in d.learned:
            reasons = get(d, "clock_events_api", self._reasons_fn)
        if "clock_events_api" in d.learned:  # driver older than the *ClocksEvent* names (< 535)
            reasons = get(d, "clock_event_reasons", self._throttle_fn)
        pstate = get(d, "pstate", nv.nvmlDeviceGetPerformanceState)
        processes = self.processes(d) if self.want_processes else ()
        if now - d.slow_at >= self.slow_interval_s:
            self.read_slow(d)
            d.slow_at = now
        gpm: GpmFields = {}
        ex_gpm: tuple[tuple[str, float], ...] = ()
        if d.gpm_supported and "gpm" not in d.learned:
            gpm, ex_gpm = read_gpm(calls, d)
        gpm_live = d.gpm_supported and "gpm" not in d.learned
        if self.pcie_interval_s is not None and (not gpm_live or d.gpm_pcie_ok is False):
            if pcie_budget[0] > 0 and now - d.pcie_at >= self.pcie_interval_s and "pcie_throughput" not in d.learned:
                pcie_budget[0] -= 1
                d.pcie_at = now
                tx = get(d, "pcie_throughput", nv.nvmlDeviceGetPcieThroughput, nv.NVML_PCIE_UTIL_TX_BYTES)
                rx = get(d, "pcie_throughput", nv.nvmlDeviceGetPcieThroughput, nv.NVML_PCIE_UTIL_RX_BYTES)
                d.pcie = (tx * NVML_KB, rx * NVML_KB) if tx is not None and rx is not None else None
            if d.pcie is not None:
                gpm["pcie_tx_bytes_s"], gpm["pcie_rx_bytes_s"] = d.pcie
        extra = d.slow_extra
        if reserved is not None:
            extra = (*extra, ("mem_reserved_bytes", float(reserved)))
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
            xid_errors=self.xids_of(d.index),
            gpm_supported=d.gpm_supported and "gpm" not in d.learned,
            mig_enabled=d.mig_enabled,
            unsupported=d.unsupported,
            processes=processes,
            extra=extra,
            **gpm,
        )

    def processes(self, d: Device) -> tuple[ProcessInfo, ...]:
        """Compute and graphics processes on ``d``, one per PID (the larger memory figure kept)."""
        nv = self.calls.nv
        get = self.calls.get
        compute = get(d, "processes", nv.nvmlDeviceGetComputeRunningProcesses) or ()
        graphics = get(d, "graphics_processes", nv.nvmlDeviceGetGraphicsRunningProcesses) or ()
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
            user, command = self.procs.lookup(pid)
            out.append(ProcessInfo(pid=pid, device_index=d.index, used_gpu_bytes=mem, user=user, command=command))
        return tuple(out)

    def read_slow(self, d: Device) -> None:
        """The slow group: enforced power limit, volatile ECC counters, PCIe link, MIG memory."""
        nv = self.calls.nv
        get = self.calls.get
        limit_mw = get(d, "power_limit", nv.nvmlDeviceGetEnforcedPowerLimit)
        d.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None
        corrected = get(d, "ecc", nv.nvmlDeviceGetTotalEccErrors, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                        nv.NVML_VOLATILE_ECC)
        uncorrected = get(d, "ecc", nv.nvmlDeviceGetTotalEccErrors, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                          nv.NVML_VOLATILE_ECC)
        d.ecc = (
            int(corrected) if corrected is not None else None,
            int(uncorrected) if uncorrected is not None else None,
        )
        extra: list[tuple[str, float]] = []
        gen = get(d, "pcie_link", getattr(nv, "nvmlDeviceGetCurrPcieLinkGeneration", None))
        width = get(d, "pcie_link", getattr(nv, "nvmlDeviceGetCurrPcieLinkWidth", None))
        if gen is not None:
            extra.append(("pcie_link_gen", float(gen)))
        if width is not None:
            extra.append(("pcie_link_width", float(width)))
        if d.mig_enabled:
            extra.extend(self.mig_memory(d))
        d.slow_extra = tuple(extra)

    def mig_memory(self, d: Device) -> list[tuple[str, float]]:
        nv = self.calls.nv
        out: list[tuple[str, float]] = []
        count = self.calls.get(d, "mig", nv.nvmlDeviceGetMaxMigDeviceCount) or 0
        for j in range(int(count)):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(d.handle, j)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == ERR_GPU_IS_LOST:
                    raise GpuLost from exc
                continue  # NOT_FOUND: empty slot
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(mh)
                gi = nv.nvmlDeviceGetGpuInstanceId(mh)
            except nv.NVMLError as exc:
                self.calls.errors.append(f"GPU {d.index} MIG {j}: {exc}")
                continue
            out += [
                (f"mig{j}.mem_used_bytes", float(mem.used)),
                (f"mig{j}.mem_total_bytes", float(mem.total)),
                (f"mig{j}.gpu_instance_id", float(gi)),
            ]
        return out
