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

Layout: ``thresholds`` (every limit, with its reason), ``tallies`` and ``window`` (what a window of
samples says, read once), ``rules/`` (one function per kind), ``registry`` (each kind once: role,
severity, action, rule; how ``primary`` is chosen), ``analyze`` (running the rules over a window or
a trace), ``phases`` (change points: the CUSUM detector), ``stream`` (a trace phase by phase or
window by window in bounded memory), ``sliding`` (the engine's incremental window, cut at change
points), ``diagnosis`` (the results).

Adding a rule: write ``def my_kind(st: WindowStats) -> Finding | None`` in ``rules/`` and add one
``Rule("my_kind", priority, severity, action, rules.module.my_kind, when, role)`` line to
``registry._RULES``.
"""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.analyze import analyze_device_window, analyze_rows, analyze_trace, device_series
from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis, Diagnosis, Finding, RuleDiagnosis, round3
from fleet_tui.core.monitor.analysis.phases import PhaseDetector
from fleet_tui.core.monitor.analysis.registry import ACTIONS, KINDS, PRIORITY, ROLES, RULES, SEVERITY, Rule
from fleet_tui.core.monitor.analysis.rules.memory import theil_sen_slope
from fleet_tui.core.monitor.analysis.sliding import SlidingWindow
from fleet_tui.core.monitor.analysis.thresholds import GROWTH_LOOKBACK_S, GROWTH_NOISE_BYTES
from fleet_tui.core.monitor.analysis.window import HostLoad, WindowStats, pcie_link_bytes_s

__all__ = [
    "ACTIONS", "GROWTH_LOOKBACK_S", "GROWTH_NOISE_BYTES", "KINDS", "PRIORITY", "RULES", "SEVERITY",
    "DeviceAnalysis", "Diagnosis", "Finding", "HostLoad", "PhaseDetector", "ROLES", "Rule",
    "RuleDiagnosis", "SlidingWindow",
    "WindowStats", "analyze_device_window", "analyze_rows", "analyze_trace", "device_series",
    "pcie_link_bytes_s", "round3", "theil_sen_slope",
]
