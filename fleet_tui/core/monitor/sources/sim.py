"""Deterministic simulated devices for demos and tests (``--source sim[:N]``).

Each device cycles through recognisable behaviours, each held for ``phase_ticks`` ticks, with
numbers shaped like the real H200 trace (``fleet_tui/demo``): idle, healthy compute, memory-bandwidth
bound, input starved, power capped, memory growth, plain-FP32 compute, launch bound, host-transfer
bound, thermal throttling. The behaviour is carried as ``phase`` (ground truth for the analysis).

Determinism: every value is a pure function of (seed, device index, tick), never of the wall clock;
timestamps are ``start_time + tick * interval_s``. Everything is labelled simulated: the source kind
is "simulated" and each device name ends with "(simulated)".
"""

from __future__ import annotations

import time
from typing import NamedTuple

from fleet_tui.core.monitor.snapshot import (
    CLOCK_EVENT_GPU_IDLE,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    DeviceSnapshot,
    HostSnapshot,
    ProcessInfo,
    Snapshot,
)
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.sources import SIM_MAX_DEVICES

GIB = 1024**3
MIB = 1024**2

BEHAVIOURS = (
    "idle",
    "healthy_compute",
    "memory_bandwidth_bound",
    "input_starved",
    "power_capped",
    "memory_growth",
    "compute_no_tensor_cores",
    "launch_bound",
    "host_transfer_bound",
    "thermal_throttled",
)

# One simulated board (H100 SXM-like figures; labelled simulated everywhere).
_NAME = "NVIDIA H100 80GB HBM3 (simulated)"
_MEM_TOTAL = 80 * GIB
_MEM_BASE = 650 * MIB  # driver reserve seen with no process (H200 trace: 615 MiB)
_POWER_LIMIT_W = 700.0
_SM_MAX = 1980.0
_MEM_CLK = 2619.0
_SLOWDOWN_C = 87.0
_HOST_CORES = 8
_MASK64 = (1 << 64) - 1


_SEED64 = 0x9E3779B97F4A7C15


def _mix(x: int, v: int) -> int:
    """One splitmix64 round folding ``v`` into the state ``x``."""
    x = (x ^ (v & _MASK64)) * 0xBF58476D1CE4E5B9 & _MASK64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK64
    return x ^ (x >> 31)


def _prefix(*key: int) -> int:
    """The state after folding ``key``: ``_noise(*key, j) == _noise_after(_prefix(*key), j)``."""
    x = _SEED64
    for v in key:
        x = _mix(x, v)
    return x


def _noise_after(prefix: int, j: int) -> float:
    return (_mix(prefix, j) >> 11) / float(1 << 53)


def _noise(*key: int) -> float:
    """Uniform [0, 1) from integers via splitmix64: stateless, so tick k is the same every run."""
    return (_prefix(*key) >> 11) / float(1 << 53)


class _Load(NamedTuple):
    """One device's activity in one tick: utilisation, power, clocks, PCIe and memory."""

    util: float
    sm: float
    occ: float
    tensor: float
    dram: float
    fp32: float
    fp16: float
    power: float
    temp: float
    sm_clk: float
    reasons: int
    pcie_rx: float
    pcie_tx: float
    mem_used: int


def _load(beh: str, key: int, progress: float) -> _Load:
    """What a device doing ``beh`` reads, its noise drawn from ``key``; ``progress`` (0-1) through the phase."""

    def jitter(j: int, spread: float) -> float:  # centred noise, ± spread/2
        return (_noise_after(key, j) - 0.5) * spread

    util = sm = occ = tensor = dram = fp32 = fp16 = 0.0
    power = 75.0 + jitter(1, 4)
    sm_clk, reasons, temp = 345.0, CLOCK_EVENT_GPU_IDLE, 34.0 + jitter(2, 2)
    pcie_rx = pcie_tx = 0.5 * MIB
    mem_used = _MEM_BASE
    job = beh != "idle"
    if job:
        mem_used = _MEM_BASE + 30 * GIB
        reasons = 0
        sm_clk = _SM_MAX - 20 + jitter(3, 20)
    if beh == "healthy_compute":
        util, sm, occ, tensor, dram, fp16 = 100, 93 + jitter(4, 4), 45, 68 + jitter(5, 8), 32, 2
        power, temp = 560 + jitter(6, 30), 62 + jitter(7, 2)
    elif beh == "power_capped":
        util, sm, occ, tensor, dram = 100, 98, 50, 88 + jitter(4, 4), 25
        power, temp = _POWER_LIMIT_W - 2 + jitter(6, 3), 70 + jitter(7, 2)
        sm_clk, reasons = 1480 + jitter(3, 40), CLOCK_EVENT_SW_POWER_CAP
    elif beh == "compute_no_tensor_cores":
        util, sm, occ, tensor, dram, fp32 = 100, 92 + jitter(4, 4), 40, 0, 12, 75 + jitter(5, 8)
        power, temp = 430 + jitter(6, 30), 58 + jitter(7, 2)
    elif beh == "memory_bandwidth_bound":
        util, sm, occ, tensor, dram = 100, 55 + jitter(4, 6), 30, 1, 88 + jitter(5, 6)
        power, temp = 480 + jitter(6, 30), 55 + jitter(7, 2)
    elif beh == "input_starved":
        busy = _noise_after(key, 9) < 0.3
        util = 100.0 if busy else 8.0
        sm, tensor, dram = (70.0, 50.0, 20.0) if busy else (4.0, 3.0, 1.0)
        occ = sm / 3
        power, temp = (380.0 if busy else 120.0) + jitter(6, 20), 45 + jitter(7, 2)
    elif beh == "launch_bound":
        util, sm, occ, tensor, dram = 96, 6 + jitter(4, 2), 2, 0.1, 1.5
        power, temp = 170 + jitter(6, 10), 44 + jitter(7, 2)
    elif beh == "host_transfer_bound":
        util, sm, occ, tensor, dram = 99, 0.1, 0.05, 0, 1.2
        pcie_rx = (52 + jitter(4, 4)) * 1e9
        pcie_tx = 0.2 * 1e9
        power, temp = 140 + jitter(6, 10), 42 + jitter(7, 2)
    elif beh == "memory_growth":
        util, sm, occ, tensor, dram = 100, 80 + jitter(4, 4), 40, 55, 35
        mem_used = int(_MEM_BASE + (0.2 + 0.75 * progress) * (_MEM_TOTAL - _MEM_BASE))
        power, temp = 520 + jitter(6, 30), 60 + jitter(7, 2)
    elif beh == "thermal_throttled":
        util, sm, occ, tensor, dram = 100, 90, 42, 60, 30
        power, temp = 520 + jitter(6, 20), _SLOWDOWN_C + 1 + jitter(7, 1)
        sm_clk, reasons = 1300 + jitter(3, 40), CLOCK_EVENT_SW_THERMAL
    return _Load(util, sm, occ, tensor, dram, fp32, fp16, power, temp, sm_clk, reasons, pcie_rx, pcie_tx,
                 int(mem_used))


class SimSource(Source):
    name = "sim"
    kind = "simulated"

    def __init__(
        self,
        n: int = 2,
        seed: int = 0,
        *,
        interval_s: float = 1.0,
        phase_ticks: int = 40,
        start_time: float | None = None,
        **_ignored: object,
    ) -> None:
        if not 1 <= n <= SIM_MAX_DEVICES:
            raise ValueError(f"sim device count must be 1-{SIM_MAX_DEVICES}, got {n}")
        self.n = n
        self.seed = seed
        self.interval_s = interval_s
        self.phase_ticks = max(1, phase_ticks)
        self.name = f"sim:{n}"
        self._start_time = start_time
        self._tick = 0
        self._uuids = [f"GPU-5151ca7e-0000-4000-8000-{seed:06x}{i:06x}" for i in range(n)]
        self._procs: dict[tuple[int, str, int], tuple[ProcessInfo, ...]] = {}  # same job, same tuple
        self._keys = [_prefix(seed, i) for i in range(n)]  # each device's (seed, index) folded once

    async def open(self) -> None:
        if self._start_time is None:
            self._start_time = time.time()

    async def sample(self) -> Snapshot:
        if self._start_time is None:
            await self.open()
        snap = self.snapshot_at(self._tick)
        self._tick += 1
        return snap

    def set_interval(self, seconds: float) -> None:
        """Simulated time follows the monitor's interval: the engine calls this when the user
        changes it, and time goes on from the next reading without a jump."""
        if self._start_time is not None:
            next_ts = self._start_time + self._tick * self.interval_s
            self._start_time = next_ts - self._tick * seconds
        self.interval_s = float(seconds)

    def behaviour_of(self, index: int, tick: int) -> str:
        slot = tick // self.phase_ticks + index + self.seed
        return BEHAVIOURS[slot % len(BEHAVIOURS)]

    def snapshot_at(self, tick: int) -> Snapshot:
        ts = (self._start_time or 0.0) + tick * self.interval_s
        devices = tuple(self._device(i, tick, ts) for i in range(self.n))
        return Snapshot(
            timestamp=ts,
            source=self.name,
            source_kind="simulated",
            devices=devices,
            host=self._host(tick, devices),
            message="simulated devices (not real hardware)",
        )

    # -- one device -----------------------------------------------------------------------------

    def _device(self, i: int, tick: int, ts: float) -> DeviceSnapshot:
        beh = self.behaviour_of(i, tick)
        progress = (tick % self.phase_ticks) / self.phase_ticks
        key = _mix(self._keys[i], tick)  # = _prefix(seed, i, tick): each value below folds only its own j
        load = _load(beh, key, progress)
        return DeviceSnapshot(
            index=i,
            name=_NAME,
            uuid=self._uuids[i],
            vendor="nvidia",
            timestamp=ts,
            gpu_util_pct=float(load.util),
            mem_util_pct=round(min(100.0, load.dram * 1.1), 1),
            mem_used_bytes=load.mem_used,
            mem_total_bytes=_MEM_TOTAL,
            temp_c=round(load.temp, 1),
            slowdown_temp_c=_SLOWDOWN_C,
            power_w=round(load.power, 1),
            power_limit_w=_POWER_LIMIT_W,
            sm_clock_mhz=round(load.sm_clk),
            sm_clock_max_mhz=_SM_MAX,
            mem_clock_mhz=_MEM_CLK,
            mem_clock_max_mhz=_MEM_CLK,
            clock_event_reasons=load.reasons,
            pstate=0,
            pcie_tx_bytes_s=float(load.pcie_tx),
            pcie_rx_bytes_s=float(load.pcie_rx),
            nvlink_tx_bytes_s=0.0,
            nvlink_rx_bytes_s=0.0,
            ecc_corrected=0,
            ecc_uncorrected=0,
            sm_active_pct=round(float(load.sm), 2),
            sm_occupancy_pct=round(float(load.occ), 2),
            tensor_active_pct=round(float(load.tensor), 2),
            dram_active_pct=round(float(load.dram), 2),
            fp32_active_pct=round(float(load.fp32), 2),
            fp16_active_pct=float(load.fp16),
            fp64_active_pct=0.0,
            gpm_supported=True,
            processes=self._processes(i, beh, load.mem_used) if beh != "idle" else (),
            phase=beh,
        )

    def _processes(self, i: int, beh: str, mem_used: int) -> tuple[ProcessInfo, ...]:
        """The device's one simulated job, kept while its memory use holds (the cache stays bounded)."""
        cached = self._procs.get((i, beh, mem_used))
        if cached is None:
            if len(self._procs) > 4 * self.n:  # memory growth makes a new one each tick
                self._procs.clear()
            cached = self._procs[(i, beh, mem_used)] = (
                ProcessInfo(
                    pid=40000 + i,
                    device_index=i,
                    used_gpu_bytes=max(0, mem_used - _MEM_BASE),
                    user="sim",
                    command=f"python train.py --job {beh} (simulated)",
                ),
            )
        return cached

    def _host(self, tick: int, devices: tuple[DeviceSnapshot, ...]) -> HostSnapshot:
        starved = sum(1 for d in devices if d.phase == "input_starved")
        base = 6.0 + 10.0 * starved
        cores = tuple(
            round(min(100.0, base + 8.0 * _noise(self.seed, 999, tick, c)), 1) for c in range(_HOST_CORES)
        )
        total = 512 * GIB
        return HostSnapshot(
            cpu_pct=round(sum(cores) / len(cores), 1),
            cpu_per_core_pct=cores,
            mem_used_bytes=int(total * (0.08 + 0.01 * len(devices) / 8)),
            mem_total_bytes=total,
            load_avg=(round(base / 10, 2), round(base / 11, 2), round(base / 12, 2)),
        )
