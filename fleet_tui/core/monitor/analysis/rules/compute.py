"""A working GPU: limited by HBM bandwidth, computing on tensor cores, or on CUDA cores without
them. Each kind has a rule for devices with SM activity (GPM/DCGM) and, where NVML can tell, one
without."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.roofline import Roofline, device_peaks
from fleet_tui.core.monitor.analysis.rules.activity import gpm_evidence, nvml_evidence
from fleet_tui.core.monitor.analysis.rules.common import clamp
from fleet_tui.core.monitor.analysis.thresholds import DRAM_BOUND_PCT, FP32_ACTIVE_MIN_PCT, POWER_HIGH_FRAC
from fleet_tui.core.monitor.analysis.window import WindowStats


def memory_bandwidth_bound(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None:
        return None
    dram = st.dram
    if a.gpm and a.dram_bound and dram is not None:  # (dram_bound is told from the DRAM reading)
        # below the ridge point: the DRAM roof is nearer than the compute roof
        sm, tensor, roof = a.sm, st.tensor, a.roof
        ev = dict(gpm_evidence(st, a), dram_active_pct=dram, tensor_active_pct=tensor)
        ev.update(roofline_evidence(st))
        conf = 0.6 + (dram - DRAM_BOUND_PCT) / 100
        if roof is not None and roof.dram_share > 0:
            # the further below the ridge, the surer: up to +0.25 at zero math
            conf += 0.25 * (1 - roof.compute_share / roof.dram_share)
        return Finding(clamp(conf * a.scale), ev,
                       lambda: f"HBM bandwidth at {dram:.0f}% of peak while the math pipes run "
                       f"at {_share(roof)} of their rated peak (SM active {sm:.0f}%, tensor "
                       f"{tensor or 0:.0f}%): {_below(roof, st)}, so memory traffic, not math, "
                       f"sets the pace.")
    if not a.gpm and a.compute == "memory":
        util = st.gpu_util
        return Finding(0.5, nvml_evidence(st, a),
                       lambda: f"Memory read/written {st.mem_util:.0f}% of the time with kernels "
                       f"running {util:.0f}%: likely HBM-bandwidth bound (no GPM to confirm).")
    return None


def roofline_evidence(st: WindowStats) -> dict:
    """The window on the roofline: achieved intensity against the device's ridge point."""
    roof = st.activity.roof if st.activity is not None else None
    if roof is None:
        return {}
    ev: dict = {"compute_share_of_peak": roof.compute_share, "dram_share_of_peak": roof.dram_share,
                "intensity_vs_ridge": roof.intensity_vs_ridge}
    peaks = device_peaks(st.name) if st.name else None
    ridge = peaks.ridge(roof.pipe == "tensor") if peaks is not None else None
    if ridge is not None and roof.intensity_vs_ridge is not None:
        ev["intensity_flop_per_byte"] = roof.intensity_vs_ridge * ridge
        ev["ridge_flop_per_byte"] = ridge
    return ev


def _share(roof: Roofline | None) -> str:
    return "?" if roof is None else f"{roof.compute_share:.0%}"


def _below(roof: Roofline | None, st: WindowStats) -> str:
    """'achieved intensity 74 FLOP/B, below the H200's ridge of 206 FLOP/B' (or the ratio)."""
    if roof is None or roof.intensity_vs_ridge is None:
        return "below the ridge point"
    peaks = device_peaks(st.name) if st.name else None
    ridge = peaks.ridge(roof.pipe == "tensor") if peaks is not None else None
    if ridge is None or peaks is None:
        return f"achieved intensity {roof.intensity_vs_ridge:.2f}x the ridge point"
    return (f"achieved intensity {roof.intensity_vs_ridge * ridge:.0f} FLOP/B, below the "
            f"{peaks.name}'s ridge of {ridge:.0f} FLOP/B")


def healthy_compute(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.state != "active":
        return None
    sm, tensor, dram = a.sm, st.tensor, st.dram
    if not a.gpm:
        if a.compute != "busy":
            return None
        util, power_frac = st.gpu_util, a.power_frac
        return Finding(0.4 if (power_frac or 0) >= POWER_HIGH_FRAC else 0.3, nvml_evidence(st, a),
                       lambda: f"Kernels run {util:.0f}% of the time"
                       + (f" at {power_frac:.0%} of the power limit" if power_frac else "")
                       + "; tensor-core use is unknown without GPM.")
    if a.compute == "tensor" and tensor is not None:  # (told from the tensor-core reading)
        # above the ridge point (or DRAM far from its roof): the math pipes set the pace
        ev = dict(gpm_evidence(st, a), tensor_active_pct=tensor, dram_active_pct=dram)
        ev.update(roofline_evidence(st))
        return Finding(clamp((0.55 + tensor / 200) * a.scale), ev,
                       lambda: f"Tensor cores active {tensor:.0f}% with SMs {sm:.0f}% active and "
                       f"HBM at {dram or 0:.0f}% of peak: compute-bound, the GPU computes at a "
                       f"good share of its peak.")
    if a.compute is None and a.waiting is None and not a.dram_bound:
        # Busy but none of the limits: moderate tensor use (mixed workloads).
        return Finding(0.45 * a.scale,
                       dict(gpm_evidence(st, a), tensor_active_pct=tensor, dram_active_pct=dram),
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
                       dict(gpm_evidence(st, a), tensor_active_pct=tensor, fp32_active_pct=fp32,
                            fp16_active_pct=fp16),
                       lambda: f"SMs {sm:.0f}% active, {pipe} pipe {simt:.0f}% but tensor cores "
                       f"only {tensor or 0:.0f}%: the math runs on CUDA cores, not tensor cores.")
    return Finding(0.4 * a.scale,
                   dict(gpm_evidence(st, a), tensor_active_pct=tensor, fp32_active_pct=fp32),
                   lambda: f"SMs {sm:.0f}% active with tensor cores {tensor or 0:.0f}% and no "
                   f"clear FP32 load: integer, FP64 or special-function work that tensor cores "
                   f"do not cover.")
