"""Bottleneck diagnosis: what limits each device over a window of samples, and what to do about it.

Every rule reads what a signal *means* (NVML / GPM documentation), not numbers fitted to one trace:

* ``gpu_util_pct`` (nvmlDeviceGetUtilizationRates.gpu) is the % of time *any* kernel or copy ran. It
  says nothing about how much of the GPU the kernel used: on an H200 it read 99% during PCIe copies
  with the SMs idle, and 31% while thousands of tiny kernels kept 0.1% of SMs busy.
* ``sm_active_pct`` (GPM SM_UTIL / DCGM SM_ACTIVE) is the time-averaged fraction of SMs with at least
  one warp resident. A kernel that fills the GPU keeps it close to ``gpu_util``; a kernel with a few
  blocks leaves most SMs empty, so ``sm_active / gpu_util`` is how much of the GPU the kernels fill
  while they run ("fill").
* ``tensor_active_pct`` (GPM ANY_TENSOR_UTIL) is the fraction of cycles the tensor pipes were busy;
  ``fp32_active_pct`` the same for the FP32 pipe.
* ``dram_active_pct`` (GPM DRAM_BW_UTIL) is achieved HBM bandwidth as a fraction of peak.
* PCIe throughput compared with the link's theoretical per-direction rate (generation x width).
* Clock-event reasons (nvmlDeviceGetCurrentClocksEventReasons) say *why* clocks are below max.

Without GPM (pre-Hopper, MIG, containers, Prometheus without profiling fields) the rules fall back
to utilization, memory activity, power and PCIe, name the missing signals, and lower confidence.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from itertools import repeat
from operator import attrgetter, truediv
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fleet_tui.core.monitor.snapshot import (CLOCK_EVENT_HW_POWER_BRAKE, CLOCK_EVENT_HW_SLOWDOWN,
                                             CLOCK_EVENT_HW_THERMAL, CLOCK_EVENT_SW_POWER_CAP,
                                             CLOCK_EVENT_SW_THERMAL, DeviceSnapshot, Snapshot)

# ---------------------------------------------------------------------------------------------
# Thresholds. Each one is derived from what the signal means; none is fitted to a trace.
# ---------------------------------------------------------------------------------------------
# NVML utilization is reported in whole percent and GPM's SM activity reads ~0.0-0.01% on an idle
# GPU, so a window mean under half a percent on both means no kernel ran in most samples.
ACTIVITY_MIN_PCT = 0.5
# "Busy": on average at least half the SMs hold a warp (GPM SM active). Below that, more of the
# GPU waits than works, whatever the cause.
BUSY_SM_MIN_PCT = 50.0
# Kernel duty cycle (NVML gpu_util) under which the GPU waits more than it works.
SPARSE_DUTY_MAX_PCT = 50.0
# Bursty starvation: SMs under "busy" on average and at least 30% of the samples are waits
# (a third of the time lost between bursts is worth fixing).
BURSTY_WAIT_SHARE = 0.3
# Launch-bound: kernels run a noticeable share of the time (>= 10% duty, well above noise) but fill
# under a fifth of the SMs while they run (sm_active / gpu_util < 0.2), i.e. each kernel is a few
# thread blocks on a GPU with over a hundred SMs.
LAUNCH_MIN_DUTY_PCT = 10.0
LAUNCH_MAX_FILL = 0.2
# Tensor cores "busy": a quarter of cycles issue tensor instructions. A large bf16 GEMM reaches
# 90%+; well-tuned LLM training runs at 40-60% (MFU-level); plain FP32 code is ~0.
TENSOR_ACTIVE_MIN_PCT = 25.0
# Tensor cores essentially unused (below a tenth of cycles) while SMs are busy and the FP32 pipe
# is issuing on at least a fifth of cycles: the math runs on CUDA cores in FP32.
TENSOR_UNUSED_MAX_PCT = 10.0
FP32_ACTIVE_MIN_PCT = 20.0
# HBM bandwidth bound: achieved bandwidth >= 60% of peak. Roofline practice (Nsight Compute
# marks throughput over 60% of peak as high); a device-to-device copy on the H200 sustains ~88% of
# peak, so 60% is within ~70% of what is attainable.
DRAM_BOUND_PCT = 60.0
# NVML mem_util is the % of *time* memory was read or written (not bandwidth), and overstates
# bandwidth (98.6% time vs 87% bandwidth on a copy); the fallback rule asks more of it.
MEM_UTIL_BOUND_PCT = 80.0
# Host transfer bound: PCIe traffic in one direction >= 40% of the link's theoretical rate. Pinned
# copies reach ~85-90% of it (TLP overhead), pageable ones roughly half: both are "saturated" for
# what the software path allows. Busy time with no SM activity and >= 10% of the link is also
# explained by copies rather than tiny kernels.
PCIE_SATURATED_FRAC = 0.40
PCIE_COPY_EXPLAINS_FRAC = 0.10
# Per-lane rates (GT/s) and line-code efficiency by PCIe generation (PCI-SIG specifications).
PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
PCIE_ASSUMED_GEN, PCIE_ASSUMED_WIDTH = 5, 16  # when the source does not report the link
# Memory capacity pressure: under 10% of device memory free. The caching allocator rounds and
# fragments blocks, and activation/KV spikes are larger than that on a big model: the next one OOMs.
MEM_PRESSURE_FRAC = 0.90
# Memory growth: a robust (Theil-Sen) slope over a longer lookback, counted from the last release
# of memory (a fall of >= 1% of the device), with at least 3 separate rises over >= 4 s and few
# falls (one allocation step is not a leak), growth of at least 1% of the device memory, and
# memory full within a day at that rate.
GROWTH_LOOKBACK_S = 60.0
GROWTH_MIN_SPAN_S = 4.0
GROWTH_MIN_RISES = 3
GROWTH_MIN_FRAC_OF_TOTAL = 0.01
GROWTH_HORIZON_S = 24 * 3600.0
GROWTH_MAX_POINTS = 40  # Theil-Sen is O(n^2): subsample
# A leak grows in many small steps; one allocation is one big step. Ignore changes under 1 MiB
# (driver bookkeeping) and reject growth where one step makes up more than half of it.
GROWTH_NOISE_BYTES = 2**20
GROWTH_MAX_SINGLE_STEP_FRAC = 0.5
# Power/thermal: the reason bit is set in at least half (power) / a third (thermal) of the samples
# and the SM clock averages at least 5% below its maximum (otherwise the cap costs nothing).
POWER_CAP_MIN_SHARE = 0.5
THERMAL_MIN_SHARE = 0.3
CLOCK_BELOW_MAX_FRAC = 0.95
# Fallback power rule (no GPM): switching activity drives power, so a GPU kept "busy" by NVML's
# measure at under 30% of its power limit does little work per unit time; above 50% it computes.
POWER_LOW_FRAC = 0.30
POWER_HIGH_FRAC = 0.50
# Confidence multiplier when the signals a rule is designed around are missing.
FALLBACK_CONFIDENCE = 0.6

THERMAL_BITS = CLOCK_EVENT_SW_THERMAL | CLOCK_EVENT_HW_THERMAL | CLOCK_EVENT_HW_SLOWDOWN
POWER_BITS = CLOCK_EVENT_SW_POWER_CAP | CLOCK_EVENT_HW_POWER_BRAKE

GPM_SIGNALS = ("sm_active_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct")

# Order of importance for ``primary``: alarms, then what will make the job fail (memory), then what
# limits a working GPU, then states.
PRIORITY = {
    "device_lost": 100, "xid": 95, "ecc_errors": 90, "thermal_throttled": 80,
    "memory_capacity_pressure": 70, "memory_growth": 65, "host_transfer_bound": 60,
    "launch_bound": 58, "input_starved": 56, "memory_bandwidth_bound": 54,
    "compute_no_tensor_cores": 52, "healthy_compute": 40, "power_capped": 30, "idle": 10, "unknown": 0,
}
SEVERITY = {
    "device_lost": "critical", "xid": "critical", "ecc_errors": "critical",
    "thermal_throttled": "warning", "memory_capacity_pressure": "warning",
    "memory_growth": "warning", "host_transfer_bound": "warning", "launch_bound": "warning",
    "input_starved": "warning", "memory_bandwidth_bound": "info",
    "compute_no_tensor_cores": "warning", "healthy_compute": "ok", "power_capped": "info",
    "idle": "info", "unknown": "info",
}
KINDS = tuple(PRIORITY)

ACTIONS = {
    "idle": "Nothing runs on this GPU. Schedule work or stop the instance; if a process holds "
            "memory without running kernels, end it to free the GPU.",
    "healthy_compute": "Tensor cores are busy: the GPU does useful work. Further gains come from "
                       "fused kernels (FlashAttention, torch.compile), FP8 where accuracy allows, "
                       "or more GPUs.",
    "compute_no_tensor_cores": "SMs are busy on plain FP32 math. Enable TF32 "
                               "(torch.set_float32_matmul_precision('high')) or run in bf16 with "
                               "torch.autocast so matmuls use tensor cores.",
    "memory_bandwidth_bound": "HBM bandwidth is the limit: fuse element-wise ops "
                              "(torch.compile), use FlashAttention, raise arithmetic intensity "
                              "with larger batches, or move fewer bytes (bf16/FP8, quantized KV "
                              "cache).",
    "input_starved": "The GPU waits for work: raise DataLoader num_workers, set pin_memory=True "
                     "and prefetch_factor, move preprocessing to the GPU, cache data on local "
                     "NVMe, and avoid per-step host syncs (.item(), .cpu()).",
    "launch_bound": "Kernels are too small to fill the GPU: capture steps with CUDA graphs "
                    "(torch.compile mode='reduce-overhead'), fuse ops, and raise the batch size.",
    "host_transfer_bound": "Host-device copies saturate PCIe: use pinned memory with "
                           "non_blocking copies overlapped with compute, keep data resident on "
                           "the GPU, and send compact dtypes (uint8) converted on the GPU.",
    "memory_capacity_pressure": "Memory is nearly full; the next spike will run out. Lower batch "
                                "or sequence length, enable activation checkpointing, shard "
                                "optimizer states (FSDP/ZeRO), or quantize weights/KV cache.",
    "memory_growth": "Memory grows steadily: look for tensors kept across steps (losses "
                     "accumulated without .detach()/.item(), growing caches); "
                     "torch.cuda.memory_summary() shows what holds it.",
    "power_capped": "The board runs at its power limit with clocks below max. Expected for dense "
                    "matmuls; check the enforced limit was not lowered (nvidia-smi -q -d POWER) "
                    "and that cooling and power delivery are sound.",
    "thermal_throttled": "The GPU slows down for heat: check fans, airflow and inlet temperature "
                         "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE).",
    "ecc_errors": "Uncorrectable ECC errors: checkpoint, drain the node and run diagnostics "
                  "(dcgmi diag -r 3); retired pages need a GPU reset.",
    "xid": "The driver reported XID errors: read the codes in dmesg (79: fell off the bus, "
           "48/63/64: ECC, 13/31/43: application faults) and drain the node if they repeat.",
    "device_lost": "The GPU stopped answering (fell off the bus): drain the node and reset or "
                   "replace the GPU.",
    "unknown": "Not enough signals to say what limits this device.",
}


@dataclass(frozen=True)
class Diagnosis:
    """One finding about one device. Immutable.

    Diagnoses made by the rules build ``evidence`` and ``explanation`` (rounded numbers, a
    sentence) when first read: the engine diagnoses every device every tick, while only the ticks a
    pane draws, a CLI prints or an alert quotes need the text. Reading, comparing, printing,
    copying or pickling a diagnosis gives the same values either way (no slots, so the two fields
    can be filled in on first read; ``__getstate__`` fills them before a copy)."""

    kind: str
    confidence: float  # 0-1
    evidence: tuple[tuple[str, float | str | None], ...]  # signal -> value that triggered it
    explanation: str  # a sentence with the numbers
    action: str
    severity: str = "info"  # ok | info | warning | critical

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: a lazy field not built yet
        d = self.__dict__
        if name == "evidence":
            raw = d.get("_raw")
            if raw is not None:
                d["evidence"] = tuple([(k, _r3(v) if isinstance(v, float) else v)
                                       for k, v in raw.items()])
                d.pop("_raw", None)
        elif name == "explanation":
            text = d.get("_text")
            if text is not None:
                d["explanation"] = text()
                d.pop("_text", None)
        if name in d:  # (also when another thread just built it)
            return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __getstate__(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _DIAGNOSIS_FIELDS}

    def evidence_value(self, signal: str, default: Any = None) -> Any:
        """``evidence_dict.get(signal, default)`` without building the rest of the evidence."""
        raw = self.__dict__.get("_raw")
        if raw is None or "evidence" in self.__dict__:
            return self.evidence_dict.get(signal, default)
        if signal not in raw:
            return default
        v = raw[signal]
        return _r3(v) if isinstance(v, float) else v

    @property
    def evidence_dict(self) -> dict[str, Any]:
        return dict(self.evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "confidence": round(self.confidence, 3),
                "evidence": self.evidence_dict, "explanation": self.explanation,
                "action": self.action, "severity": self.severity}


_DIAGNOSIS_FIELDS = ("kind", "confidence", "evidence", "explanation", "action", "severity")


@dataclass(frozen=True, slots=True)
class DeviceAnalysis:
    """The diagnoses of one device over one window, most important first."""

    device_key: str
    device_index: int
    start: float
    end: float
    samples: int
    diagnoses: tuple[Diagnosis, ...]
    missing_signals: tuple[str, ...] = ()
    phase: str | None = None  # ground-truth label of the window (most samples), replays only

    @property
    def primary(self) -> str:
        return self.diagnoses[0].kind if self.diagnoses else "unknown"

    @property
    def primary_diagnosis(self) -> Diagnosis | None:
        return self.diagnoses[0] if self.diagnoses else None

    def kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self.diagnoses)

    def get(self, kind: str) -> Diagnosis | None:
        return next((d for d in self.diagnoses if d.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return {"start": round(self.start, 3), "end": round(self.end, 3), "phase": self.phase,
                "device": self.device_index, "device_key": self.device_key,
                "primary": self.primary, "samples": self.samples,
                "missing_signals": list(self.missing_signals),
                "diagnoses": [d.to_dict() for d in self.diagnoses]}


# --------------------------------------------------------------------------------------------
# Window statistics
# --------------------------------------------------------------------------------------------

def _r(x: float | None, digits: int = 3) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    return round(x, max(0, digits - 1 - int(math.floor(math.log10(abs(x))))))


def pcie_link_bytes_s(gen: float | None, width: float | None) -> float:
    """Theoretical per-direction PCIe rate in bytes/s for a generation and lane count."""
    g = int(gen) if gen else PCIE_ASSUMED_GEN
    w = int(width) if width else PCIE_ASSUMED_WIDTH
    g = min(max(g, 1), 6)
    return PCIE_GT_S[g] * 1e9 * PCIE_ENCODING[g] * w / 8


@dataclass(slots=True)
class _Stats:  # private, built once per window: a plain slots class is cheaper to fill
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


# Signals read from each sample once, in one C-level call (operator.attrgetter with many names).
# The first _N_MEANS are averaged over the window (N/A readings skipped).
_MEAN_FIELDS = ("gpu_util_pct", "mem_util_pct", "sm_active_pct", "tensor_active_pct",
                "dram_active_pct", "fp32_active_pct", "fp16_active_pct", "power_w", "sm_clock_mhz",
                "temp_c", "pcie_rx_bytes_s", "pcie_tx_bytes_s", "mem_used_bytes")
_N_MEANS = len(_MEAN_FIELDS)
_row = attrgetter(*_MEAN_FIELDS)


class _Counts:
    """Integer tallies over the samples of a window, updated as samples enter and leave: exact,
    O(1) per sample, so a sliding window never rescans its samples for them."""

    __slots__ = ("reasons", "util_n", "wait_n", "ecc", "xid_n", "phases", "gaps")

    def __init__(self, rows: Iterable[tuple] = (), samples: Iterable[DeviceSnapshot] = ()):
        self.reasons: dict[int, int] = {}  # clock-event mask -> samples with it
        self.util_n = 0  # samples with a duty cycle (NVML util, else SM activity)
        self.wait_n = 0  # ... of which kernels ran under half the time
        self.ecc: dict[int, int] = {}  # uncorrected-ECC count -> samples with it
        self.xid_n = 0  # samples with XID codes
        self.phases: dict[str, int] = {}  # ground-truth label -> samples
        self.gaps = 0  # samples with an N/A among the averaged signals
        for row, d in zip(rows, samples):
            self.add(row, d)

    def add(self, row: tuple, d: DeviceSnapshot) -> None:
        """``row``: ``_row(d)``."""
        if None in row:
            self.gaps += 1
        r = d.clock_event_reasons
        if r is not None:
            c = self.reasons
            c[r] = c.get(r, 0) + 1
        u = row[0]
        if u is None:
            u = row[2]
        if u is not None:
            self.util_n += 1
            if u < SPARSE_DUTY_MAX_PCT:
                self.wait_n += 1
        e = d.ecc_uncorrected
        if e is not None:
            c = self.ecc
            c[e] = c.get(e, 0) + 1
        if d.xid_errors:
            self.xid_n += 1
        p = d.phase
        if p:
            c = self.phases
            c[p] = c.get(p, 0) + 1

    def remove(self, row: tuple, d: DeviceSnapshot) -> None:
        if None in row:
            self.gaps -= 1
        r = d.clock_event_reasons
        if r is not None:
            c = self.reasons
            if c[r] == 1:
                del c[r]
            else:
                c[r] -= 1
        u = row[0]
        if u is None:
            u = row[2]
        if u is not None:
            self.util_n -= 1
            if u < SPARSE_DUTY_MAX_PCT:
                self.wait_n -= 1
        e = d.ecc_uncorrected
        if e is not None:
            c = self.ecc
            if c[e] == 1:
                del c[e]
            else:
                c[e] -= 1
        if d.xid_errors:
            self.xid_n -= 1
        p = d.phase
        if p:
            c = self.phases
            if c[p] == 1:
                del c[p]
            else:
                c[p] -= 1

    def phase(self, samples: Iterable[DeviceSnapshot]) -> str | None:
        """The label most samples carry; a tie goes to the one seen first in the window."""
        c = self.phases
        if not c:
            return None
        if len(c) == 1:
            return next(iter(c))
        top = max(c.values())
        tied = [p for p, k in c.items() if k == top]
        if len(tied) == 1:
            return tied[0]
        return next(d.phase for d in samples if d.phase in tied)


def _col_means(cols: Sequence[tuple], n: int) -> list[float | None]:
    """Mean of the non-None values of each column, summed in window order exactly like
    ``sum(values) / len(values)`` over the samples: bit-identical to rescanning them (running
    sums with subtraction would drift, e.g. leave 1e-5 B/s of PCIe after a 50 GB/s burst leaves
    the window)."""
    out: list[float | None] = []
    for c in cols:
        if c[0] is not None:
            try:
                out.append(sum(c) / n)  # no N/A reading: the common case, all in C
                continue
            except TypeError:
                pass
        elif c.count(None) == n:  # identity matches: cheap
            out.append(None)
            continue
        vs = [v for v in c if v is not None]
        out.append(sum(vs) / len(vs) if vs else None)
    return out


_LINK_BYTES: dict[tuple[Any, Any], float] = {}


def _link(extra: tuple[tuple[str, float], ...]) -> tuple[float, bool]:
    """(per-direction link bytes/s, whether the source reported the link) from a device's extras."""
    gen = width = None
    for k, v in extra:
        if k == "pcie_link_gen":
            gen = v
        elif k == "pcie_link_width":
            width = v
    rate = _LINK_BYTES.get((gen, width))
    if rate is None:
        rate = pcie_link_bytes_s(gen, width)
        if len(_LINK_BYTES) < 64:
            _LINK_BYTES[(gen, width)] = rate
    return rate, gen is not None and width is not None


def _stats_rows(rows: Sequence[tuple], samples: Sequence[DeviceSnapshot],
                counts: _Counts) -> _Stats:
    """Window statistics from the samples (oldest first), their signal rows (``_row``) and their
    tallies."""
    n = len(rows)
    last = samples[-1]
    if counts.gaps:
        means = _col_means(tuple(zip(*rows)), n)
    else:  # no N/A reading in the window: every column summed in C, in window order
        means = list(map(truediv, map(sum, zip(*rows)), repeat(n)))
    (gpu_util, mem_util, sm, tensor, dram, fp32, fp16, power_w, sm_clock, temp_c, pcie_rx,
     pcie_tx, mem_used) = means
    mask = power_n = thermal_n = nr = 0
    for r, k in counts.reasons.items():
        mask |= r
        nr += k
        if r & POWER_BITS:
            power_n += k
        if r & THERMAL_BITS:
            thermal_n += k
    ecc = counts.ecc
    if ecc:
        ecc_delta = max(ecc) - min(ecc)
        ecc_last = last.ecc_uncorrected
        if ecc_last is None:  # the newest count the window has
            ecc_last = next(e for e in map(attrgetter("ecc_uncorrected"), reversed(samples))
                            if e is not None)
    else:
        ecc_delta, ecc_last = 0, None
    xids: list[int] = []
    if counts.xid_n:
        for d in samples:
            for x in d.xid_errors:
                if x not in xids:
                    xids.append(x)
    link_bytes_s, link_known = _link(last.extra)
    procs = last.processes
    # positional, in field order (keywords cost a third of the call)
    return _Stats(
        n, gpu_util, mem_util, sm, tensor, dram, fp32, fp16, power_w, last.power_limit_w,
        sm_clock, last.sm_clock_max_mhz, temp_c, last.slowdown_temp_c, pcie_rx, pcie_tx,
        link_bytes_s, link_known, mem_used, last.mem_total_bytes,
        (power_n / nr) if nr else None,  # power_share
        (thermal_n / nr) if nr else None,  # thermal_share
        mask,  # reasons_seen
        len(procs),
        sum(p.used_gpu_bytes or 0 for p in procs) if procs else 0,  # proc_bytes
        ecc_delta,  # ecc_uncorrected_delta
        ecc_last,  # ecc_uncorrected_last
        tuple(xids),
        last.state == "lost",
        # wait_share: samples in which kernels ran under half the time
        (counts.wait_n / counts.util_n) if counts.util_n else None,
    )


def _gib(b: float | None) -> str:
    return "?" if b is None else f"{b / 2**30:.1f} GiB"


_isfinite, _floor, _log10 = math.isfinite, math.floor, math.log10


def _r3(x: float) -> float | None:
    """``_r(x)`` for a float, with the usual magnitudes decided by comparisons instead of a
    logarithm (evidence rounding runs for every number of every diagnosis, every tick)."""
    if not _isfinite(x):
        return None
    a = -x if x < 0 else x
    if a >= 100.0:
        return round(x, 0)
    if a >= 10.0:
        return round(x, 1)
    if a >= 1.0:
        return round(x, 2)
    if a == 0:
        return 0.0
    return round(x, 2 - _floor(_log10(a)))


_new = object.__new__


def _diag(kind: str, confidence: float, evidence: dict[str, Any],
          explanation: Callable[[], str]) -> Diagnosis:
    """A diagnosis of ``kind``. ``evidence``: signal -> raw value (floats are rounded to 3
    significant digits when the evidence is first read); ``explanation()`` makes the sentence when
    first read, so it must only use values that do not change afterwards."""
    diag = _new(Diagnosis)
    diag.__dict__.update(kind=kind, confidence=round(min(1.0, max(0.0, confidence)), 3),
                         action=ACTIONS[kind], severity=SEVERITY[kind], _raw=evidence,
                         _text=explanation)
    return diag


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if x < lo else hi if x > hi else x


# --------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------

def _alarms(st: _Stats) -> list[Diagnosis]:
    out = []
    if st.lost:
        out.append(_diag("device_lost", 1.0, {"state": "lost"},
                         lambda: "The device stopped answering (NVML: GPU is lost)."))
    if st.xids:
        out.append(_diag("xid", 1.0, {"xid_codes": ",".join(map(str, st.xids))},
                         lambda: f"The driver reported XID error(s) "
                                 f"{', '.join(map(str, st.xids))}."))
    if st.ecc_uncorrected_delta > 0 or (st.ecc_uncorrected_last or 0) > 0:
        rising = st.ecc_uncorrected_delta > 0
        out.append(_diag("ecc_errors", 1.0 if rising else 0.7,
                         {"ecc_uncorrected": st.ecc_uncorrected_last,
                          "ecc_uncorrected_new": st.ecc_uncorrected_delta},
                         lambda: f"{st.ecc_uncorrected_last} uncorrectable ECC error(s)"
                         + (f", {st.ecc_uncorrected_delta} new in this window." if rising else ".")))
    return out


def _clock_rules(st: _Stats) -> list[Diagnosis]:
    out = []
    clock_frac = (st.sm_clock / st.sm_clock_max) if st.sm_clock and st.sm_clock_max else None
    below = clock_frac is not None and clock_frac < CLOCK_BELOW_MAX_FRAC
    if st.power_share is not None and st.power_share >= POWER_CAP_MIN_SHARE and below:
        pct_below = (1 - clock_frac) * 100
        ev = {"power_cap_share": st.power_share, "sm_clock_mhz": st.sm_clock,
              "sm_clock_max_mhz": st.sm_clock_max, "clock_below_max_pct": pct_below,
              "power_w": st.power_w, "power_limit_w": st.power_limit_w}
        out.append(_diag(
            "power_capped", _clamp(0.5 + st.power_share * 0.3 + pct_below / 100), ev,
            lambda: f"Power cap (clock reason 0x4) in {st.power_share:.0%} of samples: SM clock "
            f"{st.sm_clock:.0f} of {st.sm_clock_max:.0f} MHz ({pct_below:.0f}% below max), "
            f"power {st.power_w or 0:.0f} of {st.power_limit_w or 0:.0f} W."))
    hot = st.temp_c is not None and st.slowdown_temp_c is not None and \
        st.temp_c >= st.slowdown_temp_c
    if (st.thermal_share is not None and st.thermal_share >= THERMAL_MIN_SHARE) or hot:
        ev = {"thermal_share": st.thermal_share, "temp_c": st.temp_c,
              "slowdown_temp_c": st.slowdown_temp_c, "sm_clock_mhz": st.sm_clock,
              "sm_clock_max_mhz": st.sm_clock_max}
        share = st.thermal_share or 0.0
        out.append(_diag(
            "thermal_throttled", _clamp(0.6 + 0.4 * share + (0.2 if hot else 0.0)), ev,
            lambda: f"Thermal slowdown (clock reasons 0x8/0x20/0x40) in {share:.0%} of samples at "
            f"{st.temp_c or 0:.0f} C (slowdown at {st.slowdown_temp_c or 0:.0f} C)"
            + (f", SM clock {st.sm_clock:.0f} of {st.sm_clock_max:.0f} MHz." if below else ".")))
    return out


def _memory_rules(st: _Stats) -> list[Diagnosis]:
    if st.mem_used is None or not st.mem_total:
        return []
    frac = st.mem_used / st.mem_total
    if frac < MEM_PRESSURE_FRAC:
        return []
    ev = {"mem_used_frac": frac, "mem_used_bytes": st.mem_used, "mem_total_bytes": st.mem_total}
    return [_diag("memory_capacity_pressure", _clamp(0.7 + (frac - MEM_PRESSURE_FRAC) * 3), ev,
                  lambda: f"{frac:.0%} of device memory in use ({_gib(st.mem_used)} of "
                  f"{_gib(st.mem_total)}); less than {1 - MEM_PRESSURE_FRAC:.0%} headroom.")]


def _activity_rules_gpm(st: _Stats, pcie_frac: float | None, conf_scale: float) -> list[Diagnosis]:
    """Rules for devices with SM activity (GPM/DCGM profiling)."""
    out: list[Diagnosis] = []
    sm = st.sm or 0.0
    util = st.gpu_util
    tensor = st.tensor
    dram = st.dram
    duty = util if util is not None else sm
    active = duty >= ACTIVITY_MIN_PCT or sm >= ACTIVITY_MIN_PCT
    fill = (sm / duty) if duty and duty > 0 else None
    pf = pcie_frac or 0.0
    base_ev = {"gpu_util_pct": util, "sm_active_pct": sm}

    if not active:
        ev = dict(base_ev, processes=st.procs, process_gpu_bytes=st.proc_bytes)
        held = (f"; {st.procs} process(es) hold {_gib(st.proc_bytes)} without running kernels"
                if st.procs else "")
        out.append(_diag("idle", 0.95 * conf_scale, ev,
                         lambda: f"No kernels ran: GPU utilization {util or 0:.1f}%, SM active "
                         f"{sm:.1f}%{held}."))
        return out

    if pf >= PCIE_SATURATED_FRAC and sm < BUSY_SM_MIN_PCT:
        ev = dict(base_ev, pcie_rx_bytes_s=st.pcie_rx, pcie_tx_bytes_s=st.pcie_tx,
                  pcie_link_bytes_s=st.link_bytes_s, pcie_link_frac=pf)
        out.append(_diag("host_transfer_bound", _clamp((0.55 + 0.5 * pf) * conf_scale
                                                       * (1.0 if st.link_known else 0.85)), ev,
                         lambda: f"PCIe runs at {pf:.0%} of the link "
                                 f"({_gbs(max(st.pcie_rx or 0, st.pcie_tx or 0))}"
                         f" of {_gbs(st.link_bytes_s)}) while SMs are {sm:.1f}% active: the GPU "
                         f"waits on host transfers (GPU utilization {util or 0:.0f}% counts copies)."))
    elif (duty >= LAUNCH_MIN_DUTY_PCT and fill is not None and fill < LAUNCH_MAX_FILL
          and sm < BUSY_SM_MIN_PCT):
        if pf >= PCIE_COPY_EXPLAINS_FRAC:
            ev = dict(base_ev, pcie_link_frac=pf, pcie_rx_bytes_s=st.pcie_rx)
            out.append(_diag("host_transfer_bound", 0.5 * conf_scale, ev,
                             lambda: f"Busy {duty:.0f}% of the time with SMs {sm:.1f}% active and "
                                     f"PCIe at "
                             f"{pf:.0%} of the link: copies rather than kernels keep it busy."))
        else:
            ev = dict(base_ev, sm_fill=fill, pcie_link_frac=pf)
            out.append(_diag("launch_bound", _clamp((0.6 + 0.4 * (1 - fill / LAUNCH_MAX_FILL))
                                                    * conf_scale), ev,
                             lambda: f"Kernels run {duty:.0f}% of the time but SMs are only "
                                     f"{sm:.1f}% "
                             f"active (they fill {fill:.0%} of the GPU while running): many tiny "
                             f"kernels, the CPU cannot launch them fast enough."))
    elif duty < SPARSE_DUTY_MAX_PCT and sm < BUSY_SM_MIN_PCT:
        ev = dict(base_ev, tensor_active_pct=tensor, processes=st.procs)
        conf = 0.55 + 0.35 * (1 - duty / SPARSE_DUTY_MAX_PCT) + (0.05 if st.procs else 0.0)
        out.append(_diag("input_starved", _clamp(conf * conf_scale), ev,
                         lambda: f"Kernels run only {duty:.1f}% of the time (SM active {sm:.1f}%)"
                         + (f" while {st.procs} process(es) hold the GPU" if st.procs else "")
                         + ": the GPU waits for input between short bursts of work."))
    elif (sm < BUSY_SM_MIN_PCT and st.wait_share is not None
          and st.wait_share >= BURSTY_WAIT_SHARE and st.n >= 3):
        # Sampled at ~1 Hz, starvation shows as whole samples of waiting between busy ones.
        ev = dict(base_ev, wait_share=st.wait_share, processes=st.procs)
        out.append(_diag("input_starved", _clamp((0.45 + 0.4 * st.wait_share) * conf_scale), ev,
                         lambda: f"The GPU waited (kernels under {SPARSE_DUTY_MAX_PCT:.0f}% of the "
                                 f"time) in "
                         f"{st.wait_share:.0%} of samples between bursts; on average SMs were "
                         f"{sm:.0f}% active: work arrives in bursts with gaps."))

    if dram is not None and dram >= DRAM_BOUND_PCT:
        ev = dict(base_ev, dram_active_pct=dram, tensor_active_pct=tensor)
        out.append(_diag("memory_bandwidth_bound",
                         _clamp((0.6 + (dram - DRAM_BOUND_PCT) / 100) * conf_scale), ev,
                         lambda: f"HBM bandwidth at {dram:.0f}% of peak (SM active {sm:.0f}%, "
                                 f"tensor "
                         f"{tensor or 0:.0f}%): memory traffic, not math, sets the pace."))
    if sm >= BUSY_SM_MIN_PCT and tensor is not None and tensor >= TENSOR_ACTIVE_MIN_PCT:
        ev = dict(base_ev, tensor_active_pct=tensor, dram_active_pct=dram)
        out.append(_diag("healthy_compute", _clamp((0.55 + tensor / 200) * conf_scale), ev,
                         lambda: f"Tensor cores active {tensor:.0f}% with SMs {sm:.0f}% active: "
                                 f"the GPU "
                         f"computes at a good share of its peak."))
    elif (sm >= BUSY_SM_MIN_PCT and (tensor is None or tensor < TENSOR_UNUSED_MAX_PCT)
          and (dram is None or dram < DRAM_BOUND_PCT)):
        fp32 = st.fp32
        # half-precision math on the FP16 pipe (not tensor cores) counts the same way
        simt = max(fp32 or 0.0, st.fp16 or 0.0) if (fp32 is not None or st.fp16 is not None) else None
        if simt is not None and simt >= FP32_ACTIVE_MIN_PCT:
            pipe = "FP32" if (fp32 or 0.0) >= (st.fp16 or 0.0) else "FP16"
            ev = dict(base_ev, tensor_active_pct=tensor, fp32_active_pct=fp32,
                      fp16_active_pct=st.fp16)
            out.append(_diag("compute_no_tensor_cores", _clamp((0.6 + simt / 200) * conf_scale),
                             ev, lambda: f"SMs {sm:.0f}% active, {pipe} pipe {simt:.0f}% but "
                                         f"tensor cores "
                                 f"only {tensor or 0:.0f}%: the math runs on CUDA cores, not "
                                 f"tensor cores."))
        else:
            ev = dict(base_ev, tensor_active_pct=tensor, fp32_active_pct=fp32)
            out.append(_diag("compute_no_tensor_cores", 0.4 * conf_scale, ev,
                             lambda: f"SMs {sm:.0f}% active with tensor cores {tensor or 0:.0f}% "
                                     f"and no "
                             f"clear FP32 load: integer, FP64 or special-function work that "
                             f"tensor cores do not cover."))
    if not out:
        # Busy but none of the limits above: moderate tensor use (mixed workloads).
        ev = dict(base_ev, tensor_active_pct=tensor, dram_active_pct=dram)
        out.append(_diag("healthy_compute", 0.45 * conf_scale, ev,
                         lambda: f"SMs {sm:.0f}% active, tensor cores {tensor or 0:.0f}%, HBM "
                         f"{dram or 0:.0f}% of peak: busy, no single limit stands out."))
    return out


def _gbs(b: float | None) -> str:
    return "?" if b is None else f"{b / 1e9:.1f} GB/s"


def _activity_rules_fallback(st: _Stats, pcie_frac: float | None) -> list[Diagnosis]:
    """Rules with only NVML utilization, memory activity, power and PCIe (no SM activity)."""
    out: list[Diagnosis] = []
    util = st.gpu_util
    if util is None:
        return out
    pf = pcie_frac or 0.0
    power_frac = (st.power_w / st.power_limit_w) if st.power_w and st.power_limit_w else None
    ev = {"gpu_util_pct": util, "mem_util_pct": st.mem_util, "power_frac_of_limit": power_frac}
    if util < ACTIVITY_MIN_PCT:
        held = (f"; {st.procs} process(es) hold {_gib(st.proc_bytes)}" if st.procs else "")
        out.append(_diag("idle", 0.85, dict(ev, processes=st.procs),
                         lambda: f"No kernels ran (GPU utilization {util:.1f}%){held}."))
        return out
    if pf >= PCIE_SATURATED_FRAC:
        out.append(_diag("host_transfer_bound", 0.7 * (1.0 if st.link_known else 0.85),
                         dict(ev, pcie_link_frac=pf, pcie_rx_bytes_s=st.pcie_rx,
                              pcie_tx_bytes_s=st.pcie_tx),
                         lambda: f"PCIe at {pf:.0%} of the link "
                                 f"({_gbs(max(st.pcie_rx or 0, st.pcie_tx or 0))}); "
                         f"GPU utilization {util:.0f}% likely counts the copies."))
        return out
    bursty = st.wait_share is not None and st.wait_share >= BURSTY_WAIT_SHARE and st.n >= 3
    if util >= SPARSE_DUTY_MAX_PCT and bursty:
        out.append(_diag("input_starved", 0.35, dict(ev, wait_share=st.wait_share),
                         lambda: f"Kernels ran under half the time in {st.wait_share:.0%} of "
                                 f"samples "
                         f"between busy ones: work arrives in bursts (no SM activity to confirm)."))
    elif util >= SPARSE_DUTY_MAX_PCT:
        if st.mem_util is not None and st.mem_util >= MEM_UTIL_BOUND_PCT:
            out.append(_diag("memory_bandwidth_bound", 0.5, ev,
                             lambda: f"Memory read/written {st.mem_util:.0f}% of the time with "
                                     f"kernels "
                             f"running {util:.0f}%: likely HBM-bandwidth bound (no GPM to "
                             f"confirm)."))
        elif power_frac is not None and power_frac < POWER_LOW_FRAC:
            out.append(_diag("launch_bound", 0.35, ev,
                             lambda: f"Kernels or copies run {util:.0f}% of the time but the board "
                                     f"draws "
                             f"only {power_frac:.0%} of its power limit: little work per kernel "
                             f"(tiny kernels or copies; SM activity unknown)."))
        else:
            out.append(_diag("healthy_compute", 0.4 if (power_frac or 0) >= POWER_HIGH_FRAC else 0.3,
                             ev, lambda: f"Kernels run {util:.0f}% of the time"
                                 + (f" at {power_frac:.0%} of the power limit" if power_frac else "")
                                 + "; tensor-core use is unknown without GPM."))
    else:
        out.append(_diag("input_starved", 0.4, dict(ev, processes=st.procs),
                         lambda: f"Kernels run only {util:.0f}% of the time: the GPU waits (input, "
                                 f"host "
                         f"or tiny kernels look alike without SM activity)."))
    return out


def _growth_rule(points: Sequence[tuple[float, float]], mem_total: float | None) -> Diagnosis | None:
    """``points``: (timestamp, mem_used_bytes) over the growth lookback, in time order."""
    if len(points) < GROWTH_MIN_RISES + 1 or not mem_total:
        return None
    # Only the stretch since memory was last released counts: a freed model followed by a leak is
    # a leak, whatever the lookback held before.
    release = GROWTH_MIN_FRAC_OF_TOTAL * mem_total
    start = 0
    for i in range(len(points) - 1, 0, -1):
        if points[i - 1][1] - points[i][1] > release:
            start = i
            break
    points = points[start:]
    if len(points) < GROWTH_MIN_RISES + 1:
        return None
    span = points[-1][0] - points[0][0]
    if span < GROWTH_MIN_SPAN_S:
        return None
    rises = falls = 0
    biggest = 0.0
    for (_, a), (_, b) in zip(points, points[1:]):
        if b - a > GROWTH_NOISE_BYTES:
            rises += 1
            if b - a > biggest:
                biggest = b - a
        elif a - b > GROWTH_NOISE_BYTES:
            falls += 1
    if rises < GROWTH_MIN_RISES or falls * 4 > rises:
        return None
    growth = points[-1][1] - points[0][1]
    if growth < GROWTH_MIN_FRAC_OF_TOTAL * mem_total or biggest > GROWTH_MAX_SINGLE_STEP_FRAC * growth:
        return None
    slope = theil_sen_slope(points)
    if slope <= 0:
        return None
    time_to_full = max(0.0, (mem_total - points[-1][1]) / slope)
    if time_to_full > GROWTH_HORIZON_S:
        return None
    ev = {"slope_bytes_s": slope, "time_to_full_s": time_to_full, "rises": rises,
          "span_s": span, "mem_used_bytes": points[-1][1], "mem_total_bytes": mem_total}
    conf = _clamp(0.5 + 0.05 * min(rises, 6) + (0.1 if time_to_full < 3600 else 0.0))
    return _diag("memory_growth", conf, ev,
                 lambda: f"Memory grew {_gib(growth)} over {span:.0f} s ({rises} rises, "
                 f"{slope / 2**20:.1f} MiB/s): full in about {_duration(time_to_full)} at this rate.")


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def theil_sen_slope(points: Sequence[tuple[float, float]]) -> float:
    """Median of pairwise slopes: robust to single jumps and outliers (Theil 1950, Sen 1968)."""
    if len(points) > GROWTH_MAX_POINTS:
        step = len(points) / GROWTH_MAX_POINTS
        idx = sorted({int(i * step) for i in range(GROWTH_MAX_POINTS)} | {len(points) - 1})
        points = [points[i] for i in idx]
    slopes = []
    for i in range(len(points)):
        ti, yi = points[i]
        for j in range(i + 1, len(points)):
            tj, yj = points[j]
            if tj > ti:
                slopes.append((yj - yi) / (tj - ti))
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

def analyze_device_window(samples: Sequence[DeviceSnapshot], *,
                          growth_points: Sequence[tuple[float, float]] | None = None,
                          start: float | None = None, end: float | None = None) -> DeviceAnalysis:
    """Diagnose one device from its samples over a window (oldest first).

    ``growth_points`` are (timestamp, mem_used_bytes) over a longer lookback for the memory-growth
    rule; by default the window's own samples are used.
    """
    if not samples:
        raise ValueError("analyze_device_window needs at least one sample")
    rows = list(map(_row, samples))
    return _analyze(rows, _Counts(rows, samples), samples, growth_points, start, end)


def _analyze(rows: Sequence[tuple], counts: _Counts, samples: Sequence[DeviceSnapshot],
             growth_points: Sequence[tuple[float, float]] | None,
             start: float | None = None, end: float | None = None,
             key: str | None = None) -> DeviceAnalysis:
    """``rows``: ``_row`` of each of ``samples`` (the same window, oldest first); ``counts``
    their tallies."""
    last = samples[-1]
    st = _stats_rows(rows, samples, counts)
    if st.sm is None or st.tensor is None or st.dram is None or st.fp32 is None:
        missing = [name for name, v in (("sm_active_pct", st.sm), ("tensor_active_pct", st.tensor),
                                        ("dram_active_pct", st.dram), ("fp32_active_pct", st.fp32))
                   if v is None]
    else:
        missing = []
    if st.gpu_util is None:
        missing.append("gpu_util_pct")
    if st.pcie_rx is None and st.pcie_tx is None:
        missing.append("pcie")
    elif not st.link_known:
        missing.append("pcie_link")
    if not st.mem_total:
        missing.append("mem_total_bytes")
    pcie_frac = None
    if st.pcie_rx is not None or st.pcie_tx is not None:
        pcie_frac = max(st.pcie_rx or 0.0, st.pcie_tx or 0.0) / st.link_bytes_s

    diags: list[Diagnosis] = []
    if st.lost or st.xids or st.ecc_uncorrected_delta > 0 or (st.ecc_uncorrected_last or 0) > 0:
        diags += _alarms(st)
    if not st.lost:
        diags += _clock_rules(st)
        diags += _memory_rules(st)
        if st.sm is not None:
            # Partial GPM (e.g. SM activity without tensor/DRAM) lowers confidence a little.
            scale = 1.0 if st.tensor is not None and st.dram is not None else 0.8
            diags += _activity_rules_gpm(st, pcie_frac, scale)
        else:
            diags += _activity_rules_fallback(st, pcie_frac)
        if growth_points is None:
            growth_points = [(s.timestamp, float(s.mem_used_bytes)) for s in samples
                             if s.mem_used_bytes is not None]
        g = _growth_rule(growth_points, st.mem_total)
        if g is not None:
            diags.append(g)
    if not diags:
        diags.append(_diag("unknown", 0.2, {"missing": ",".join(missing)},
                           lambda: "Not enough signals: " + (", ".join(missing) or "none") + "."))
    if len(diags) > 1:
        diags.sort(key=_rank, reverse=True)
    return DeviceAnalysis(  # positional, in field order (once per device per tick)
        last.key if key is None else key, last.index,
        samples[0].timestamp if start is None else start,  # start
        last.timestamp if end is None else end,  # end
        len(samples), tuple(diags), tuple(missing), counts.phase(samples))


def _rank(d: Diagnosis) -> tuple[int, float]:
    return (PRIORITY.get(d.kind, 0), d.confidence)


class SlidingWindow:
    """One device's samples over the last ``seconds``, kept across ticks by the engine.

    Each sample's signals are read once when it arrives (``_row``) and tallied in ``_Counts`` as it
    enters and leaves, instead of rescanning every sample of the window on every tick. The window is
    exactly what ``History.samples(key, seconds)`` returns: the newest samples back to the first one
    at or before ``newest - seconds``. While timestamps never go back that is a suffix kept by
    appending and dropping from the left; ``push`` says when it is not (a replay that loops, a clock
    stepped back) and the caller ``reset``s it from history.
    """

    __slots__ = ("seconds", "_samples", "_rows", "_counts", "_ordered")

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._samples: deque[DeviceSnapshot] = deque()
        self._rows: deque[tuple] = deque()
        self._counts = _Counts()
        self._ordered = True

    def push(self, d: DeviceSnapshot, limit: int) -> bool:
        """Append the newest sample; ``limit`` = samples history holds for the device (the window
        never reaches further back). False (nothing changed) when the window must be rebuilt."""
        s = self._samples
        ts = d.timestamp
        if not self._ordered or (s and ts < s[-1].timestamp):
            return False
        row = _row(d)
        s.append(d)
        rows = self._rows
        rows.append(row)
        counts = self._counts
        counts.add(row, d)
        cutoff = ts - self.seconds
        while len(s) > limit or s[0].timestamp <= cutoff:
            counts.remove(rows.popleft(), s.popleft())
        return True

    def reset(self, samples: Sequence[DeviceSnapshot]) -> None:
        self._samples = deque(samples)
        self._rows = deque(map(_row, samples))
        self._counts = _Counts(self._rows, self._samples)
        self._ordered = all(a.timestamp <= b.timestamp for a, b in zip(samples, samples[1:]))

    def __len__(self) -> int:
        return len(self._samples)

    def samples(self) -> list[DeviceSnapshot]:
        return list(self._samples)

    def analyze(self, growth_points: Sequence[tuple[float, float]] | None = None,
                key: str | None = None) -> DeviceAnalysis:
        if not self._samples:
            raise ValueError("the window is empty")
        return _analyze(self._rows, self._counts, self._samples, growth_points, key=key)


def device_series(snapshots: Iterable[Snapshot]) -> dict[str, list[DeviceSnapshot]]:
    """Group a stream of snapshots into per-device sample lists (by device key), in time order."""
    out: dict[str, list[DeviceSnapshot]] = {}
    for snap in snapshots:
        for d in snap.devices:
            if d.timestamp == 0.0 and snap.timestamp:
                # sources that leave the device timestamp unset use the snapshot's
                from dataclasses import replace
                d = replace(d, timestamp=snap.timestamp)
            out.setdefault(d.key, []).append(d)
    return out


def analyze_trace(snapshots: Iterable[Snapshot], *, window_s: float = 5.0,
                  step_s: float | None = None,
                  growth_lookback_s: float = GROWTH_LOOKBACK_S) -> list[DeviceAnalysis]:
    """Diagnose every device over windows ``[start, start + window_s)`` stepped by ``step_s``
    (default: the window, i.e. back-to-back windows). Windows are ordered by start, then device."""
    if window_s <= 0:
        raise ValueError("window_s must be positive")
    step = window_s if step_s is None else step_s
    if step <= 0:
        raise ValueError("step_s must be positive")
    per_device = device_series(snapshots)
    results: list[DeviceAnalysis] = []
    for samples in per_device.values():
        times = [s.timestamp for s in samples]
        rows = list(map(_row, samples))  # each sample's signals read once, not once per window
        counts, c_lo, c_hi = _Counts(), 0, 0
        mem_points = [(s.timestamp, float(s.mem_used_bytes)) for s in samples
                      if s.mem_used_bytes is not None]
        mem_times = [p[0] for p in mem_points]
        if not times:
            continue
        t0, t_last = times[0], times[-1]
        k = 0
        while True:
            start = t0 + k * step
            if start > t_last:
                break
            end = start + window_s
            lo = bisect.bisect_left(times, start - 1e-9)
            hi = bisect.bisect_left(times, end - 1e-9)
            k += 1
            if hi - lo < 1:
                continue
            g_lo = bisect.bisect_left(mem_times, end - growth_lookback_s)
            g_hi = bisect.bisect_left(mem_times, end - 1e-9)
            # counts tally rows[c_lo:c_hi]; windows move forward, so usually only the rows that
            # left and entered since the previous window are tallied
            if c_lo <= lo < c_hi <= hi:
                for i in range(c_lo, lo):
                    counts.remove(rows[i], samples[i])
                for i in range(c_hi, hi):
                    counts.add(rows[i], samples[i])
            else:
                counts = _Counts(rows[lo:hi], samples[lo:hi])
            c_lo, c_hi = lo, hi
            results.append(_analyze(rows[lo:hi], counts, samples[lo:hi], mem_points[g_lo:g_hi],
                                    start=start, end=end))
            if end >= t_last + 1e-9 and step >= window_s:
                break
    results.sort(key=lambda a: (a.start, a.device_index, a.device_key))
    return results


def analyze_snapshots(windows: dict[str, Sequence[DeviceSnapshot]], *,
                      growth: dict[str, Sequence[tuple[float, float]]] | None = None
                      ) -> dict[str, DeviceAnalysis]:
    """Diagnose each device's recent samples (the engine's per-tick call)."""
    out = {}
    for key, samples in windows.items():
        if samples:
            out[key] = analyze_device_window(
                samples, growth_points=(growth or {}).get(key))
    return out
