"""Idle or waiting: no kernels, or a GPU that waits on host copies, kernel launches or its input.

The waiting kinds read ``Activity.waiting`` (one answer per window, see
``window.classify_activity``); each has a rule for devices with SM activity (GPM/DCGM) and one
for NVML-only devices.
"""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.common import clamp, gbs, gib
from fleet_tui.core.monitor.analysis.thresholds import LAUNCH_MAX_FILL, SPARSE_DUTY_MAX_PCT
from fleet_tui.core.monitor.analysis.window import Activity, WindowStats


def gpm_evidence(st: WindowStats, a: Activity) -> dict:
    """The evidence every SM-activity rule starts from (``a``: the window's ``st.activity``)."""
    return {"gpu_util_pct": st.gpu_util, "sm_active_pct": a.sm}


def nvml_evidence(st: WindowStats, a: Activity) -> dict:
    """The evidence every NVML-only rule starts from (``a``: the window's ``st.activity``)."""
    return {"gpu_util_pct": st.gpu_util, "mem_util_pct": st.mem_util,
            "power_frac_of_limit": a.power_frac}


def idle(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.state != "idle":
        return None
    util, sm = st.gpu_util, a.sm
    if a.gpm:
        held = (f"; {st.procs} process(es) hold {gib(st.proc_bytes)} without running kernels"
                if st.procs else "")
        return Finding(0.95 * a.scale,
                       dict(gpm_evidence(st, a), processes=st.procs, process_gpu_bytes=st.proc_bytes),
                       lambda: f"No kernels ran: GPU utilization {util or 0:.1f}%, SM active "
                       f"{sm:.1f}%{held}.")
    held = (f"; {st.procs} process(es) hold {gib(st.proc_bytes)}" if st.procs else "")
    return Finding(0.85, dict(nvml_evidence(st, a), processes=st.procs),
                   lambda: f"No kernels ran (GPU utilization {util:.1f}%){held}.")


def host_transfer_bound(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.waiting not in ("pcie", "copies"):
        return None
    util, sm, pf = st.gpu_util, a.sm, a.pf
    link = 1.0 if st.link_known else 0.85
    if not a.gpm:
        return Finding(0.7 * link,
                       dict(nvml_evidence(st, a), pcie_link_frac=pf, pcie_rx_bytes_s=st.pcie_rx,
                            pcie_tx_bytes_s=st.pcie_tx),
                       lambda: f"PCIe at {pf:.0%} of the link "
                       f"({gbs(max(st.pcie_rx or 0, st.pcie_tx or 0))}); "
                       f"GPU utilization {util:.0f}% likely counts the copies.")
    if a.waiting == "copies":
        return Finding(0.5 * a.scale,
                       dict(gpm_evidence(st, a), pcie_link_frac=pf, pcie_rx_bytes_s=st.pcie_rx),
                       lambda: f"Busy {a.duty:.0f}% of the time with SMs {sm:.1f}% active and "
                       f"PCIe at {pf:.0%} of the link: copies rather than kernels keep it busy.")
    ev = dict(gpm_evidence(st, a), pcie_rx_bytes_s=st.pcie_rx, pcie_tx_bytes_s=st.pcie_tx,
              pcie_link_bytes_s=st.link_bytes_s, pcie_link_frac=pf)
    return Finding(clamp((0.55 + 0.5 * pf) * a.scale * link), ev,
                   lambda: f"PCIe runs at {pf:.0%} of the link "
                   f"({gbs(max(st.pcie_rx or 0, st.pcie_tx or 0))} of {gbs(st.link_bytes_s)}) "
                   f"while SMs are {sm:.1f}% active: the GPU waits on host transfers (GPU "
                   f"utilization {util or 0:.0f}% counts copies).")


def launch_bound(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.waiting != "launch":
        return None
    if not a.gpm:
        util, power_frac = st.gpu_util, a.power_frac
        return Finding(0.35, nvml_evidence(st, a),
                       lambda: f"Kernels or copies run {util:.0f}% of the time but the board "
                       f"draws only {power_frac:.0%} of its power limit: little work per kernel "
                       f"(tiny kernels or copies; SM activity unknown).")
    duty, sm, fill = a.duty, a.sm, a.fill
    if fill is None:  # (launch-bound is told from the fill, so it is known here)
        return None
    return Finding(clamp((0.6 + 0.4 * (1 - fill / LAUNCH_MAX_FILL)) * a.scale),
                   dict(gpm_evidence(st, a), sm_fill=fill, pcie_link_frac=a.pf),
                   lambda: f"Kernels run {duty:.0f}% of the time but SMs are only {sm:.1f}% "
                   f"active (they fill {fill:.0%} of the GPU while running): many tiny kernels, "
                   f"the CPU cannot launch them fast enough.")


def input_starved(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.waiting not in ("sparse", "bursty"):
        return None
    util, duty, sm, share = st.gpu_util, a.duty, a.sm, st.wait_share
    if not a.gpm:
        if a.waiting == "bursty":
            return Finding(0.35, dict(nvml_evidence(st, a), wait_share=share),
                           lambda: f"Kernels ran under half the time in {share:.0%} of samples "
                           f"between busy ones: work arrives in bursts (no SM activity to "
                           f"confirm).")
        return Finding(0.4, dict(nvml_evidence(st, a), processes=st.procs),
                       lambda: f"Kernels run only {util:.0f}% of the time: the GPU waits (input, "
                       f"host or tiny kernels look alike without SM activity).")
    if a.waiting == "bursty" and share is not None:  # (bursty is told from the waits' share)
        return Finding(clamp((0.45 + 0.4 * share) * a.scale),
                       dict(gpm_evidence(st, a), wait_share=share, processes=st.procs),
                       lambda: f"The GPU waited (kernels under {SPARSE_DUTY_MAX_PCT:.0f}% of the "
                       f"time) in {share:.0%} of samples between bursts; on average SMs were "
                       f"{sm:.0f}% active: work arrives in bursts with gaps.")
    conf = 0.55 + 0.35 * (1 - duty / SPARSE_DUTY_MAX_PCT) + (0.05 if st.procs else 0.0)
    return Finding(clamp(conf * a.scale),
                   dict(gpm_evidence(st, a), tensor_active_pct=st.tensor, processes=st.procs),
                   lambda: f"Kernels run only {duty:.1f}% of the time (SM active {sm:.1f}%)"
                   + (f" while {st.procs} process(es) hold the GPU" if st.procs else "")
                   + ": the GPU waits for input between short bursts of work.")
