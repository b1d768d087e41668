"""A working GPU: limited by HBM bandwidth, computing on tensor cores, or on CUDA cores without
them. Each kind has a rule for devices with SM activity (GPM/DCGM) and, where NVML can tell, one
without."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.activity import gpm_evidence, nvml_evidence
from fleet_tui.core.monitor.analysis.rules.common import clamp
from fleet_tui.core.monitor.analysis.thresholds import DRAM_BOUND_PCT, FP32_ACTIVE_MIN_PCT, POWER_HIGH_FRAC
from fleet_tui.core.monitor.analysis.window import WindowStats


def memory_bandwidth_bound(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None:
        return None
    if a.gpm and a.dram_bound:
        dram, sm, tensor = st.dram, a.sm, st.tensor
        return Finding(clamp((0.6 + (dram - DRAM_BOUND_PCT) / 100) * a.scale),
                       dict(gpm_evidence(st), dram_active_pct=dram, tensor_active_pct=tensor),
                       lambda: f"HBM bandwidth at {dram:.0f}% of peak (SM active {sm:.0f}%, "
                       f"tensor {tensor or 0:.0f}%): memory traffic, not math, sets the pace.")
    if not a.gpm and a.compute == "memory":
        util = st.gpu_util
        return Finding(0.5, nvml_evidence(st),
                       lambda: f"Memory read/written {st.mem_util:.0f}% of the time with kernels "
                       f"running {util:.0f}%: likely HBM-bandwidth bound (no GPM to confirm).")
    return None


def healthy_compute(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.state != "active":
        return None
    sm, tensor, dram = a.sm, st.tensor, st.dram
    if not a.gpm:
        if a.compute != "busy":
            return None
        util, power_frac = st.gpu_util, a.power_frac
        return Finding(0.4 if (power_frac or 0) >= POWER_HIGH_FRAC else 0.3, nvml_evidence(st),
                       lambda: f"Kernels run {util:.0f}% of the time"
                       + (f" at {power_frac:.0%} of the power limit" if power_frac else "")
                       + "; tensor-core use is unknown without GPM.")
    if a.compute == "tensor":
        return Finding(clamp((0.55 + tensor / 200) * a.scale),
                       dict(gpm_evidence(st), tensor_active_pct=tensor, dram_active_pct=dram),
                       lambda: f"Tensor cores active {tensor:.0f}% with SMs {sm:.0f}% active: "
                       f"the GPU computes at a good share of its peak.")
    if a.compute is None and a.waiting is None and not a.dram_bound:
        # Busy but none of the limits: moderate tensor use (mixed workloads).
        return Finding(0.45 * a.scale,
                       dict(gpm_evidence(st), tensor_active_pct=tensor, dram_active_pct=dram),
                       lambda: f"SMs {sm:.0f}% active, tensor cores {tensor or 0:.0f}%, HBM "
                       f"{dram or 0:.0f}% of peak: busy, no single limit stands out.")
    return None


def compute_no_tensor_cores(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.compute != "simt":
        return None
    sm, tensor, fp32, fp16 = a.sm, st.tensor, st.fp32, st.fp16
    # half-precision math on the FP16 pipe (not tensor cores) counts the same way
    simt = max(fp32 or 0.0, fp16 or 0.0) if (fp32 is not None or fp16 is not None) else None
    if simt is not None and simt >= FP32_ACTIVE_MIN_PCT:
        pipe = "FP32" if (fp32 or 0.0) >= (fp16 or 0.0) else "FP16"
        return Finding(clamp((0.6 + simt / 200) * a.scale),
                       dict(gpm_evidence(st), tensor_active_pct=tensor, fp32_active_pct=fp32,
                            fp16_active_pct=fp16),
                       lambda: f"SMs {sm:.0f}% active, {pipe} pipe {simt:.0f}% but tensor cores "
                       f"only {tensor or 0:.0f}%: the math runs on CUDA cores, not tensor cores.")
    return Finding(0.4 * a.scale,
                   dict(gpm_evidence(st), tensor_active_pct=tensor, fp32_active_pct=fp32),
                   lambda: f"SMs {sm:.0f}% active with tensor cores {tensor or 0:.0f}% and no "
                   f"clear FP32 load: integer, FP64 or special-function work that tensor cores "
                   f"do not cover.")
