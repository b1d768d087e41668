"""``NvmlSource``: open NVML, read every device once per tick in one worker-thread call, close.

The package's design is described in ``fleet_tui/core/monitor/sources/nvml/__init__.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.host import HostReader, ProcessResolver
from fleet_tui.core.monitor.sources.nvml.codes import LOST, GpuLost, init_library, text
from fleet_tui.core.monitor.sources.nvml.device import Device, DeviceCalls
from fleet_tui.core.monitor.sources.nvml.events import XidWatcher
from fleet_tui.core.monitor.sources.nvml.gpm import free_gpm, prime_gpm
from fleet_tui.core.monitor.sources.nvml.reads import DeviceReader


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
        self._devices: list[Device] = []
        self._opened = False
        self._lock = threading.Lock()
        self._host = None
        self._procs = ProcessResolver()
        self._calls: DeviceCalls | None = None
        self._reader: DeviceReader | None = None
        self._xids = XidWatcher()
        self.driver_version: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        if not self._opened:
            await asyncio.to_thread(self.open_blocking)

    async def sample(self) -> Snapshot:
        if not self._opened:
            await self.open()
        return await asyncio.to_thread(self.sample_blocking)

    async def prime(self) -> bool:
        if not self._opened:
            await self.open()
        return await asyncio.to_thread(self.prime_blocking)

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
            init_library(nv)
            try:
                count = nv.nvmlDeviceGetCount()
            except nv.NVMLError as exc:
                self._shutdown_quietly()
                raise SourceUnavailable(f"NVML could not count GPUs: {exc}.") from exc
            if count == 0:
                self._shutdown_quietly()
                raise SourceUnavailable("NVML found no NVIDIA GPU on this machine.")
            self._calls = DeviceCalls(nv)
            self._reader = DeviceReader(
                self._calls,
                pcie_interval_s=self.pcie_interval_s,
                slow_interval_s=self.slow_interval_s,
                processes=self._want_processes,
                procs=self._procs,
                xids_of=self._xids.of,
            )
            try:
                self.driver_version = text(nv.nvmlSystemGetDriverVersion())
            except (nv.NVMLError, AttributeError):
                self.driver_version = None
            self._devices = [self._reader.open_device(i) for i in range(count)]
            if self._want_host:
                self._host = HostReader()
            self._opened = True
            if self._want_xid:
                self._xids.start(nv, self._devices)

    def close_blocking(self) -> None:
        with self._lock:
            if not self._opened:
                return
            self._opened = False
            nv = self._nv
            self._xids.stop(nv)
            for d in self._devices:
                free_gpm(nv, d)
            self._shutdown_quietly()

    def _shutdown_quietly(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a half-initialised library
            pass

    def _open_parts(self) -> tuple[DeviceCalls, DeviceReader]:
        """The calls and the reader ``open_blocking`` made (SourceUnavailable once closed)."""
        calls, reader = self._calls, self._reader
        if not self._opened or calls is None or reader is None:
            raise SourceUnavailable("the NVML source is closed")
        return calls, reader

    def prime_blocking(self) -> bool:
        """Every GPM device's first sample (``Source.prime``); True when any was taken."""
        with self._lock:
            calls, _reader = self._open_parts()
            primed = False
            for d in self._devices:
                if d.lost is None:
                    try:
                        primed = prime_gpm(calls, d) or primed
                    except GpuLost:
                        d.lost, d.state = LOST, "lost"
            return primed

    # -- one tick -------------------------------------------------------------------------------

    def sample_blocking(self) -> Snapshot:
        with self._lock:
            calls, reader = self._open_parts()
            calls.errors = []
            now_wall = time.time()
            now = self._clock()
            pcie_budget = [1]  # at most one blocking PCIe read per tick
            devices = []
            live_pids: set[int] = set()
            for d in self._devices:
                if d.lost is None:
                    try:
                        snap = reader.read(d, now, now_wall, pcie_budget)
                    except GpuLost:
                        d.lost, d.state = LOST, "lost"
                        snap = reader.lost_snapshot(d, now_wall)
                    else:
                        live_pids.update(p.pid for p in snap.processes)
                else:
                    snap = reader.lost_snapshot(d, now_wall)
                devices.append(snap)
            self._procs.forget_except(live_pids)
            host = self._host.read() if self._host is not None else None
            return Snapshot(
                timestamp=now_wall,
                source="nvml",
                source_kind="live",
                devices=tuple(devices),
                host=host,
                errors=tuple(calls.errors),
            )
