"""Immutable readings that cross from sources to analysis, history, recorder and UI.

Units are in the names; percentages are 0-100; ``None`` means "not available on this device/source"
(and ``DeviceSnapshot.unsupported`` says which metrics were learned to be N/A). Every source (nvml,
hpu, neuron, replay, sim, prometheus) produces these, so the analysis and the panes never care where
a reading came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Literal

from fleet_tui.core.monitor.rollup import FleetAggregate
from fleet_tui.core.records import record

DeviceState = Literal["ok", "lost", "unavailable"]
SourceKind = Literal["live", "replay", "simulated", "fleet", "none"]

# NVML clock-event (throttle) reason bits (nvmlClocksEventReason*, nvidia-ml-py's pynvml.py).
CLOCK_EVENT_GPU_IDLE = 0x1
CLOCK_EVENT_APP_CLOCKS = 0x2
CLOCK_EVENT_SW_POWER_CAP = 0x4
CLOCK_EVENT_HW_SLOWDOWN = 0x8
CLOCK_EVENT_SYNC_BOOST = 0x10
CLOCK_EVENT_SW_THERMAL = 0x20
CLOCK_EVENT_HW_THERMAL = 0x40
CLOCK_EVENT_HW_POWER_BRAKE = 0x80

CLOCK_EVENT_NAMES = {
    CLOCK_EVENT_GPU_IDLE: "gpu_idle",
    CLOCK_EVENT_APP_CLOCKS: "clocks_setting",
    CLOCK_EVENT_SW_POWER_CAP: "power_cap",
    CLOCK_EVENT_HW_SLOWDOWN: "hw_slowdown",
    CLOCK_EVENT_SYNC_BOOST: "sync_boost",
    CLOCK_EVENT_SW_THERMAL: "sw_thermal",
    CLOCK_EVENT_HW_THERMAL: "hw_thermal",
    CLOCK_EVENT_HW_POWER_BRAKE: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}


def clock_event_names(mask: int | None) -> tuple[str, ...]:
    if not mask:
        return ()
    return tuple(name for bit, name in CLOCK_EVENT_NAMES.items() if mask & bit)


@record
class ProcessInfo:
    pid: int
    device_index: int
    used_gpu_bytes: int | None = None
    user: str | None = None
    command: str | None = None


@record
class DeviceSnapshot:
    index: int
    name: str
    uuid: str = ""
    vendor: str = "nvidia"  # nvidia | intel | aws | amd
    node: str = ""  # host name; set by fleet sources, "" = this machine
    timestamp: float = 0.0  # seconds since the epoch (replay: trace start + t)
    state: DeviceState = "ok"
    error: str | None = None  # why state is not ok
    # activity
    gpu_util_pct: float | None = None  # NVML: % of time a kernel ran (NOT how busy the SMs are)
    mem_util_pct: float | None = None  # NVML: % of time memory was read/written
    # memory
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    # thermals and power
    temp_c: float | None = None
    slowdown_temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    # clocks
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    clock_event_reasons: int | None = None  # NVML bit mask (see CLOCK_EVENT_*)
    pstate: int | None = None
    # transfers (bytes per second)
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    nvlink_tx_bytes_s: float | None = None
    nvlink_rx_bytes_s: float | None = None
    # reliability
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    xid_errors: tuple[int, ...] = ()
    # GPM (Hopper+) / DCGM profiling equivalents, %
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    fp32_active_pct: float | None = None
    fp16_active_pct: float | None = None
    fp64_active_pct: float | None = None
    gpm_supported: bool | None = None
    mig_enabled: bool = False
    unsupported: frozenset[str] = frozenset()  # metric names learned to be N/A on this device
    processes: tuple[ProcessInfo, ...] = ()
    phase: str | None = None  # ground-truth label when replaying a labelled trace
    extra: tuple[tuple[str, float], ...] = ()  # vendor extras (e.g. per-NeuronCore utilization)
    # fleet sources: seconds between the reading (its scrape) and the snapshot; None = just read.
    # A reading that only grew older may be handed on as the same object, its age as first read:
    # the snapshot's ``age_of(device)`` is the age in that snapshot.
    age_s: float | None = None

    @property
    def mem_used_frac(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return self.mem_used_bytes / self.mem_total_bytes

    @property
    def key(self) -> str:
        """Stable identity across snapshots: node + uuid (or index)."""
        return f"{self.node}/{self.uuid or self.index}"

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        return clock_event_names(self.clock_event_reasons)


@record
class HostSnapshot:
    cpu_pct: float | None = None
    cpu_per_core_pct: tuple[float, ...] = ()
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    load_avg: tuple[float, float, float] | None = None


@record
class Snapshot:
    timestamp: float
    source: str  # e.g. "nvml", "sim:8", "replay:trace.jsonl", "prometheus:http://..."
    source_kind: SourceKind
    devices: tuple[DeviceSnapshot, ...] = ()
    host: HostSnapshot | None = None
    node: str = ""
    message: str | None = None  # e.g. "no accelerator found: NVML library not found"
    errors: tuple[str, ...] = field(default=())  # non-fatal problems this tick (a node down, ...)
    # device key -> age in this snapshot, for the readings handed on unchanged from an earlier
    # snapshot (a fleet source: ~7/8 of 4,096 GPUs scraped every 15 s and refreshed every 2 s,
    # where a copy per reading per refresh only to update its age cost ~20 ms); not compared or
    # hashed (a snapshot stays hashable)
    device_ages: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)
    # a fleet too large to read device by device: its roll-ups as the server computed them
    # (``sources.prometheus.aggregate``); ``devices`` is then empty
    aggregate: FleetAggregate | None = field(default=None, repr=False, compare=False)

    def age_of(self, device: DeviceSnapshot) -> float | None:
        """``device``'s reading age in this snapshot (``DeviceSnapshot.age_s`` unless handed on)."""
        return self.device_ages.get(device.key, device.age_s)
