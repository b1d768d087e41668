"""Waiting on something outside the GPU: its peers over NVLink, the host's CPUs, other tenants.

``communication_bound`` and ``cpu_bound_host`` read ``Activity.waiting`` ("nvlink", "host_cpu",
see ``window.classify_activity``), so they exclude the other waiting kinds by construction.
"""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.common import clamp
from fleet_tui.core.monitor.analysis.thresholds import HOST_SATURATED_PCT, NVLINK_BUSY_FRAC
from fleet_tui.core.monitor.analysis.window import WindowStats


def communication_bound(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.waiting != "nvlink" or st.nvlink_frac is None:
        return None
    frac, sm, duty = st.nvlink_frac, a.sm, a.duty
    return Finding(clamp((0.6 + 0.4 * (frac - NVLINK_BUSY_FRAC) / (1 - NVLINK_BUSY_FRAC))
                         * a.scale),
                   {"nvlink_link_frac": frac, "sm_active_pct": sm if a.gpm else None,
                    "gpu_util_pct": st.gpu_util},
                   lambda: f"NVLink carries {frac:.0%} of its peak while kernels run {duty:.0f}% "
                   f"of the time" + (f" with SMs {sm:.0f}% active" if a.gpm else "")
                   + ": the GPU waits on collectives (all-reduce / all-gather) with its peers.")


def cpu_bound_host(st: WindowStats) -> Finding | None:
    a = st.activity
    h = st.host
    if a is None or a.waiting != "host_cpu" or h is None:
        return None
    cpu, busy, cores, duty = h.cpu_pct, h.busy_cores, h.cores, a.duty
    all_busy = (cpu or 0.0) >= HOST_SATURATED_PCT
    conf = 0.9 if all_busy else 0.65 + 0.05 * min(busy, 5)
    return Finding(clamp(conf * a.scale),
                   {"host_cpu_pct": cpu, "host_saturated_cores": busy, "host_cores": cores,
                    "gpu_util_pct": st.gpu_util, "wait_share": st.wait_share},
                   lambda: f"Kernels run only {duty:.0f}% of the time while the host's CPUs are "
                   + (f"{cpu:.0f}% busy" if all_busy else
                      f"saturated on {busy:.0f} of {cores} core(s)")
                   + ": the data loader or the Python process feeding the GPU is CPU-bound.")


def shared_gpu(st: WindowStats) -> Finding | None:
    a = st.activity
    if a is None or a.state != "active" or st.tenants < 2:
        return None
    tenants, procs = st.tenants, st.procs
    return Finding(0.55, {"processes": procs, "users": tenants},
                   lambda: f"{procs} processes of {tenants} different users run on this GPU: "
                   f"their kernels and memory compete.")


def mig_instance(st: WindowStats) -> Finding | None:
    if not st.mig:
        return None
    return Finding(0.9, {"mig": True},
                   lambda: "This is a MIG instance: it has a fixed share of the GPU's SMs and "
                   "memory, and the other instances belong to other tenants; GPM counters are "
                   "not available per instance, so diagnoses here are less certain.")
