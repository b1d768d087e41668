"""What one device's window of samples says: signal means, shares, tallies, how its time is spent.

``window_stats`` builds a ``WindowStats`` once per device per window; every rule reads it. The
activity reading (``classify_activity``) is one decision per window — is the GPU idle, waiting
(and on what), computing (and how) — so the kinds built on it exclude each other by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, truediv
from typing import NamedTuple

from fleet_tui.core.monitor.analysis.roofline import Roofline, roofline_of
from fleet_tui.core.monitor.analysis.tallies import Counts, col_means
from fleet_tui.core.monitor.analysis.thresholds import (
    ACTIVITY_MIN_PCT,
    BURSTY_WAIT_SHARE,
    BUSY_SM_MIN_PCT,
    DRAM_BOUND_PCT,
    HOST_BUSY_CORES_MIN,
    HOST_SATURATED_PCT,
    KERNEL_TRICKLE_SM_PCT,
    LAUNCH_MAX_FILL,
    LAUNCH_MIN_DUTY_PCT,
    MEM_UTIL_BOUND_PCT,
    NVLINK_ASSUMED_PEAK_BYTES_S,
    NVLINK_BUSY_FRAC,
    NVLINK_PEAK_BYTES_S,
    PCIE_ASSUMED_GEN,
    PCIE_ASSUMED_WIDTH,
    PCIE_COPY_EXPLAINS_FRAC,
    PCIE_ENCODING,
    PCIE_GT_S,
    PCIE_SATURATED_FRAC,
    POWER_BITS,
    POWER_LOW_FRAC,
    SERVING_ENGINES,
    SPARSE_DUTY_MAX_PCT,
    TENSOR_ACTIVE_MIN_PCT,
    TENSOR_UNUSED_MAX_PCT,
    THERMAL_BITS,
)
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo

GrowthPoints = Sequence[tuple[float, float]]  # (timestamp, mem_used_bytes), oldest first


def pcie_link_bytes_s(gen: float | None, width: float | None) -> float:
    """Theoretical per-direction PCIe rate in bytes/s for a generation and lane count."""
    g = int(gen) if gen else PCIE_ASSUMED_GEN
    w = int(width) if width else PCIE_ASSUMED_WIDTH
    g = 1 if g < 1 else 6 if g > 6 else g
    return PCIE_GT_S[g] * 1e9 * PCIE_ENCODING[g] * w / 8


def link_of(extra: tuple[tuple[str, float], ...]) -> tuple[float, bool]:
    """(per-direction link bytes/s, whether the source reported the link) from a device's extras."""
    gen = width = None
    for k, v in extra:
        if k == "pcie_link_gen":
            gen = v
        elif k == "pcie_link_width":
            width = v
    return pcie_link_bytes_s(gen, width), gen is not None and width is not None


@dataclass(slots=True)
class WindowStats:
    """One device over one window. Built once per window and never changed afterwards (the
    diagnoses' sentences read it when first shown)."""

    n: int
    gpu_util: float | None
    mem_util: float | None
    sm: float | None
    tensor: float | None
    dram: float | None
    fp32: float | None
    fp16: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock: float | None
    sm_clock_max: float | None
    temp_c: float | None
    slowdown_temp_c: float | None
    pcie_rx: float | None
    pcie_tx: float | None
    link_bytes_s: float
    link_known: bool
    mem_used: float | None
    mem_total: float | None
    power_share: float | None
    thermal_share: float | None
    reasons_seen: int
    procs: int
    proc_bytes: int
    ecc_uncorrected_delta: int
    ecc_uncorrected_last: int | None
    xids: tuple[int, ...]
    lost: bool
    wait_share: float | None  # share of samples in which kernels ran under half the time
    pcie_frac: float | None  # busier PCIe direction / link rate
    growth_points: GrowthPoints  # memory over the growth lookback
    activity: Activity | None = None  # classify_activity(self); None while lost
    nvlink_frac: float | None = None  # busier NVLink direction / the link's peak
    host: HostLoad | None = None  # the host's CPUs (psutil), where the caller has them
    mig: bool = False  # a MIG instance
    tenants: int = 0  # distinct users among the device's processes (0: unknown)
    name: str = ""  # the device's name ("NVIDIA H200"): its peaks for the roofline
    engine: str | None = None  # a serving engine among its processes ("vLLM"), see memory
    # memory in use at the newest reading (finite), else the window's mean: capacity is judged on
    # the freshest value (a step to 96 % in the newest of 25 readings averages to 8 %)
    mem_now: float | None = None
    # PCIe host-to-device at the newest reading: a copy under way (a load) against an allocation
    pcie_rx_now: float | None = None


class HostLoad(NamedTuple):
    """The host's CPU load over a window: mean % of all cores, and mean count of saturated cores
    (``HOST_SATURATED_PCT``) out of ``cores``."""

    cpu_pct: float | None
    busy_cores: float
    cores: int

    @classmethod
    def of(cls, host: HostSnapshot | None) -> HostLoad | None:
        if host is None:
            return None
        return cls.from_values(host.cpu_pct, host.cpu_per_core_pct)

    @classmethod
    def from_values(cls, cpu_pct: float | None,
                    per_core: Sequence[float]) -> HostLoad | None:
        """``of`` from a host's readings: its mean CPU % and per-core CPU %."""
        if not per_core:
            return None if cpu_pct is None else cls(cpu_pct, 0.0, 0)
        return cls(cpu_pct, float(sum(1 for c in per_core if c >= HOST_SATURATED_PCT)),
                   len(per_core))


class DeviceFacts(NamedTuple):
    """What a window's statistics read of its newest sample besides its readings (``stats_from``;
    a ``DeviceSnapshot`` has the same attributes). ``analysis.readings`` builds these for a
    phase's newest sample instead of its whole ``DeviceSnapshot`` (bench_analysis --lines: ~20 of
    a phase's ~130 us)."""

    index: int
    name: str
    state: str
    power_limit_w: float | None
    sm_clock_max_mhz: float | None
    slowdown_temp_c: float | None
    mem_total_bytes: int | None
    mig_enabled: bool
    extra: tuple[tuple[str, float], ...]
    processes: tuple[ProcessInfo, ...]
    mem_used_bytes: int | float | None = None
    pcie_rx_bytes_s: float | None = None

    @classmethod
    def of(cls, d: DeviceSnapshot, extra: tuple[tuple[str, float], ...] | None = None,
           processes: tuple[ProcessInfo, ...] | None = None,
           mem_used_bytes: int | float | None = None,
           pcie_rx_bytes_s: float | None = None) -> DeviceFacts:
        """``d``'s facts (with ``extra``, ``processes`` and ``mem_used_bytes`` in place of its own
        where given)."""
        return cls(d.index, d.name, d.state, d.power_limit_w, d.sm_clock_max_mhz,
                   d.slowdown_temp_c, d.mem_total_bytes, d.mig_enabled,
                   d.extra if extra is None else extra,
                   d.processes if processes is None else processes,
                   d.mem_used_bytes if mem_used_bytes is None else mem_used_bytes,
                   d.pcie_rx_bytes_s if pcie_rx_bytes_s is None else pcie_rx_bytes_s)


def serving_engine(procs: Sequence[ProcessInfo]) -> str | None:
    """The serving engine one of the processes runs, by its command line (see
    ``thresholds.SERVING_ENGINES``), or None."""
    for p in procs:
        cmd = (p.command or "").lower()
        if cmd:
            for needle, engine in SERVING_ENGINES:
                if needle in cmd:
                    return engine
    return None


def nvlink_peak_bytes_s(name: str) -> float:
    for key, peak in NVLINK_PEAK_BYTES_S:
        if key in name:
            return peak
    return NVLINK_ASSUMED_PEAK_BYTES_S


class Activity(NamedTuple):
    """How the device spent the window. With SM activity (GPM/DCGM, ``gpm``) the reading is direct;
    without it, utilization, memory activity, power and PCIe stand in."""

    gpm: bool
    scale: float  # confidence multiplier: 1.0, or 0.8 for partial GPM (SM activity only)
    state: str  # "idle" | "active" | "unknown" (no duty-cycle signal at all)
    duty: float  # % of time kernels ran (NVML util, else SM activity)
    sm: float  # SM active % (0 without GPM)
    fill: float | None  # sm / duty: how much of the GPU the kernels fill while they run
    pf: float  # pcie_frac, 0 when unknown
    power_frac: float | None  # power / limit (fallback rules only)
    # why an active GPU waits: "pcie" (saturated link), "copies" (copies keep it busy), "launch"
    # (tiny kernels), "sparse" (kernels run under half the time), "bursty" (waits between bursts),
    # "nvlink" (collectives over NVLink), "host_cpu" (sparse or bursty with the host's CPUs busy)
    waiting: str | None
    # how it computes: "tensor" (tensor cores busy), "simt" (busy SMs, tensor cores unused),
    # "busy" (fallback: busy, nothing known against it), "memory" (fallback: memory-bound)
    compute: str | None
    dram_bound: bool  # below the ridge point with HBM bandwidth >= DRAM_BOUND_PCT of peak (GPM)
    roof: Roofline | None = None  # the window on the roofline (GPM with DRAM bandwidth)


def classify_activity(st: WindowStats) -> Activity:
    """How the window's time was spent (one decision; the activity rules read it)."""
    pf = st.pcie_frac or 0.0
    if st.sm is not None:
        return _classify_gpm(st, pf)
    util = st.gpu_util
    power_frac = (st.power_w / st.power_limit_w) if st.power_w and st.power_limit_w else None
    state = "unknown" if util is None else "idle" if util < ACTIVITY_MIN_PCT else "active"
    waiting = compute = None
    if state == "active" and util is not None:  # (active: util is known)
        bursty = st.wait_share is not None and st.wait_share >= BURSTY_WAIT_SHARE and st.n >= 3
        if pf >= PCIE_SATURATED_FRAC:
            waiting = "pcie"
        elif util >= SPARSE_DUTY_MAX_PCT and bursty:
            waiting = "bursty"
        elif util >= SPARSE_DUTY_MAX_PCT:
            if st.mem_util is not None and st.mem_util >= MEM_UTIL_BOUND_PCT:
                compute = "memory"
            elif power_frac is not None and power_frac < POWER_LOW_FRAC:
                waiting = "launch"
            else:
                compute = "busy"
        else:
            waiting = "sparse"
    if state == "active" and util is not None and (st.nvlink_frac or 0.0) >= NVLINK_BUSY_FRAC and \
            util < SPARSE_DUTY_MAX_PCT:
        waiting = "nvlink"
    waiting = _host_wait(st, waiting)
    return Activity(False, 1.0, state, util or 0.0, 0.0, None, pf, power_frac, waiting, compute,
                    False)


def _host_saturated(h: HostLoad | None) -> bool:
    return h is not None and ((h.cpu_pct or 0.0) >= HOST_SATURATED_PCT
                              or h.busy_cores >= HOST_BUSY_CORES_MIN)


def _host_wait(st: WindowStats, waiting: str | None) -> str | None:
    """A GPU that waits for input while the host's CPUs are saturated waits on the host."""
    if waiting in ("sparse", "bursty") and _host_saturated(st.host):
        return "host_cpu"
    return waiting


def _classify_gpm(st: WindowStats, pf: float) -> Activity:
    sm = st.sm or 0.0
    util = st.gpu_util
    tensor, dram = st.tensor, st.dram
    duty = util if util is not None else sm
    # Partial GPM (e.g. SM activity without tensor/DRAM) lowers confidence a little.
    scale = 1.0 if tensor is not None and dram is not None else 0.8
    fill = (sm / duty) if duty and duty > 0 else None
    active = duty >= ACTIVITY_MIN_PCT or sm >= ACTIVITY_MIN_PCT
    waiting = compute = None
    dram_bound = False
    if not active and sm >= KERNEL_TRICKLE_SM_PCT and st.procs and _host_saturated(st.host):
        # a trickle of kernels from a process whose host is pegged: starved, not idle
        return Activity(True, scale, "active", duty, sm, fill, pf, None, "host_cpu", None, False)
    if active:
        if (st.nvlink_frac or 0.0) >= NVLINK_BUSY_FRAC and sm < BUSY_SM_MIN_PCT:
            waiting = "nvlink"
        elif pf >= PCIE_SATURATED_FRAC and sm < BUSY_SM_MIN_PCT:
            waiting = "pcie"
        elif (duty >= LAUNCH_MIN_DUTY_PCT and fill is not None and fill < LAUNCH_MAX_FILL
              and sm < BUSY_SM_MIN_PCT):
            waiting = "copies" if pf >= PCIE_COPY_EXPLAINS_FRAC else "launch"
        elif duty < SPARSE_DUTY_MAX_PCT and sm < BUSY_SM_MIN_PCT:
            waiting = "sparse"
        elif (sm < BUSY_SM_MIN_PCT and st.wait_share is not None
              and st.wait_share >= BURSTY_WAIT_SHARE and st.n >= 3):
            # Sampled at ~1 Hz, starvation shows as whole samples of waiting between busy ones.
            waiting = "bursty"
        roof = roofline_of(tensor, st.fp32, st.fp16, dram, st.sm_clock, st.sm_clock_max)
        # Physics: the nearer roof limits. Memory-bound when achieved intensity is below the
        # ridge point (DRAM share >= compute share) and DRAM runs at a high share of its peak.
        dram_bound = (dram is not None and dram >= DRAM_BOUND_PCT
                      and (roof is None or roof.below_ridge))
        if (sm >= BUSY_SM_MIN_PCT and tensor is not None and tensor >= TENSOR_ACTIVE_MIN_PCT
                and not dram_bound):
            compute = "tensor"
        elif (sm >= BUSY_SM_MIN_PCT and (tensor is None or tensor < TENSOR_UNUSED_MAX_PCT)
              and not dram_bound):
            compute = "simt"
    else:
        roof = None
    return Activity(True, scale, "active" if active else "idle", duty, sm, fill, pf, None,
                    _host_wait(st, waiting), compute, dram_bound, roof)


def window_stats(rows: Sequence[tuple], samples: Sequence[DeviceSnapshot], counts: Counts,
                 growth_points: GrowthPoints, host: HostLoad | None = None) -> WindowStats:
    """Window statistics from the samples (oldest first), their signal rows (``read_row``) and
    their tallies."""
    n = len(rows)
    last = samples[-1]
    if counts.gaps:
        means = col_means(tuple(zip(*rows)), n)
    else:  # no N/A reading in the window: every column summed in C, in window order
        means = list(map(truediv, map(sum, zip(*rows)), repeat(n)))
    ecc_last = None
    if counts.ecc:
        ecc_last = last.ecc_uncorrected
        if ecc_last is None:  # the newest count the window has
            ecc_last = next(e for e in map(attrgetter("ecc_uncorrected"), reversed(samples))
                            if e is not None)
    xids: list[int] = []
    if counts.xid_n:
        for d in samples:
            for x in d.xid_errors:
                if x not in xids:
                    xids.append(x)
    return stats_from(n, means, last, counts, tuple(xids), ecc_last, growth_points, host)


def stats_from(n: int, means: Sequence[float | None], last: DeviceSnapshot | DeviceFacts,
               counts: Counts, xids: tuple[int, ...], ecc_last: int | None,
               growth_points: GrowthPoints, host: HostLoad | None = None) -> WindowStats:
    """``WindowStats`` from the means of the ``MEAN_FIELDS`` columns over ``n`` samples, the newest
    sample (or its ``DeviceFacts``), the tallies, the XID codes seen and the newest
    uncorrected-ECC count: what a window (``window_stats``) or a streamed phase (``stream``)
    knows."""
    total = 0.0
    for m in means:
        if m is not None:
            total += m
    if total - total != 0.0:  # some mean is NaN or inf
        # a NaN/inf reading from a live source (trace files already read them as N/A): missing,
        # never a diagnosis built on NaN
        means = [None if m is None or m - m != 0.0 else m for m in means]
    (gpu_util, mem_util, sm, tensor, dram, fp32, fp16, power_w, sm_clock, temp_c, pcie_rx,
     pcie_tx, mem_used, nvlink_rx, nvlink_tx) = means
    mask = power_n = thermal_n = nr = 0
    for r, k in counts.reasons.items():
        mask |= r
        nr += k
        if r & POWER_BITS:
            power_n += k
        if r & THERMAL_BITS:
            thermal_n += k
    ecc = counts.ecc
    ecc_delta = (max(ecc) - min(ecc)) if ecc else 0
    link_bytes_s, link_known = link_of(last.extra)
    pcie_frac = None
    if pcie_rx is not None or pcie_tx is not None:
        pcie_frac = max(pcie_rx or 0.0, pcie_tx or 0.0) / link_bytes_s
    procs = last.processes
    lost = last.state == "lost"
    st = WindowStats(  # positional, in field order (keywords cost a third of the call)
        n, gpu_util, mem_util, sm, tensor, dram, fp32, fp16, power_w, last.power_limit_w,
        sm_clock, last.sm_clock_max_mhz, temp_c, last.slowdown_temp_c, pcie_rx, pcie_tx,
        link_bytes_s, link_known, mem_used, last.mem_total_bytes,
        (power_n / nr) if nr else None,  # power_share
        (thermal_n / nr) if nr else None,  # thermal_share
        mask,  # reasons_seen
        len(procs),
        sum(p.used_gpu_bytes or 0 for p in procs) if procs else 0,  # proc_bytes
        ecc_delta,  # ecc_uncorrected_delta
        ecc_last if ecc else None,  # ecc_uncorrected_last
        xids,
        lost,
        # wait_share: samples in which kernels ran under half the time
        (counts.wait_n / counts.util_n) if counts.util_n else None,
        pcie_frac,
        growth_points,
    )
    if nvlink_rx is not None or nvlink_tx is not None:
        st.nvlink_frac = max(nvlink_rx or 0.0, nvlink_tx or 0.0) / nvlink_peak_bytes_s(last.name)
    st.host = host
    st.mig = last.mig_enabled
    st.name = last.name
    now = last.mem_used_bytes
    st.mem_now = float(now) if now is not None and now - now == 0 else mem_used
    st.pcie_rx_now = last.pcie_rx_bytes_s
    if procs:
        st.engine = serving_engine(procs)
    if len(procs) > 1:
        st.tenants = len({p.user for p in procs if p.user})
    if not lost:
        st.activity = classify_activity(st)
    return st


def missing_signals(st: WindowStats) -> list[str]:
    """The signals the rules are designed around that this window lacks."""
    if st.sm is None or st.tensor is None or st.dram is None or st.fp32 is None:
        missing = [name for name, v in (("sm_active_pct", st.sm), ("tensor_active_pct", st.tensor),
                                        ("dram_active_pct", st.dram), ("fp32_active_pct", st.fp32))
                   if v is None]
    else:  # full GPM, the common case
        missing = []
    if st.gpu_util is None:
        missing.append("gpu_util_pct")
    if st.pcie_rx is None and st.pcie_tx is None:
        missing.append("pcie")
    elif not st.link_known:
        missing.append("pcie_link")
    if not st.mem_total:
        missing.append("mem_total_bytes")
    return missing
