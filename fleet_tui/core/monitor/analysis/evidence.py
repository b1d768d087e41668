"""Evidence for people: every value a rule reports, in its unit and against its scale.

Rules keep their evidence raw (``Finding.facts``: bytes/s, fractions 0-1, percent); JSON keeps those
numbers, and ``evidence_values`` gives each its unit (``UNITS``) for machines (the exporter).
``evidence_lines`` writes them for a person, one line a value or a group of related
values: "PCIe host→device 59.2 GB/s of 63.0 GB/s (PCIe Gen5 x16, 94 %)", "63 % of peak HBM
bandwidth", "40 % of samples waiting on input". One formatter per evidence key, declared once in
``FORMATS``; a key folded into another's line formats to None. A test runs every rule and checks
that each key has a formatter and each line carries a unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fleet_tui.core.monitor.analysis.thresholds import PCIE_ENCODING, PCIE_GT_S

Format = Callable[[Any, Mapping[str, Any]], "str | None"]


def gb_s(b: float) -> str:
    """Bytes/s as GB/s (decimal, as link and HBM rates are quoted)."""
    return f"{b / 1e9:.1f} GB/s" if b >= 1e8 else f"{b / 1e6:.0f} MB/s"


def gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def seconds(s: float) -> str:
    if s < 120:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def countdown(s: float) -> str:
    """A time to impact for people, as steady as its estimate: "under 1 s", whole seconds to
    10 s, then 5 s steps to two minutes (a projection from seconds of readings is no better than
    that, and a countdown whose words change every tick redraws every view that shows it:
    bench_monitor_cpu --profile 8, 5.62 widgets a tick with tenths, 5.00 so)."""
    if s < 1:
        return "under 1 s"
    if s < 10:
        return f"{s:.0f} s"
    if s < 120:
        return f"{5 * round(s / 5):.0f} s"
    return seconds(s)


def pcie_link_name(link_bytes_s: float) -> str:
    """The generation and width whose per-direction rate is ``link_bytes_s`` ("PCIe Gen5 x16")."""
    for gen, gt in PCIE_GT_S.items():
        for width in (16, 8, 4, 2, 1):
            if abs(gt * 1e9 * PCIE_ENCODING[gen] * width / 8 - link_bytes_s) < 1.0:
                return f"PCIe Gen{gen} x{width}"
    return "PCIe link"


def _pct(label: str) -> Format:
    return lambda v, f: f"{label} {v:.1f} %" if v < 10 else f"{label} {v:.0f} %"


def _share(label: str) -> Format:
    return lambda v, f: f"{v:.0%} {label}"


def _pcie(direction: str) -> Format:
    def fmt(v: float, f: Mapping[str, Any]) -> str:
        link = f.get("pcie_link_bytes_s")
        if not link:
            return f"PCIe {direction} {gb_s(v)}"
        return f"PCIe {direction} {gb_s(v)} of {gb_s(link)} ({pcie_link_name(link)}, {v / link:.0%})"
    return fmt


def _power(v: float, f: Mapping[str, Any]) -> str:
    limit = f.get("power_limit_w")
    return f"power {v:.0f} of {limit:.0f} W" if limit else f"power {v:.0f} W"


def _clock(v: float, f: Mapping[str, Any]) -> str:
    top = f.get("sm_clock_max_mhz")
    return f"SM clock {v:.0f} of {top:.0f} MHz" if top else f"SM clock {v:.0f} MHz"


def _mem_used(v: float, f: Mapping[str, Any]) -> str:
    total = f.get("mem_total_bytes")
    return f"memory {gib(v)} of {gib(total)} ({v / total:.0%})" if total else f"memory {gib(v)}"


def _temp(v: float, f: Mapping[str, Any]) -> str:
    slow = f.get("slowdown_temp_c")
    return f"{v:.0f} °C (slowdown at {slow:.0f} °C)" if slow else f"{v:.0f} °C"


def _intensity(v: float, f: Mapping[str, Any]) -> str:
    ridge = f.get("ridge_flop_per_byte")
    side = "below" if v < (ridge or 0) else "above"
    return (f"arithmetic intensity {v:.0f} FLOP/B, {side} the ridge point of {ridge:.0f} FLOP/B"
            if ridge else f"arithmetic intensity {v:.0f} FLOP/B")


def _vs_ridge(v: float, f: Mapping[str, Any]) -> str | None:
    if f.get("ridge_flop_per_byte"):
        return None  # said in FLOP/B by intensity_flop_per_byte
    return f"arithmetic intensity {v:.2f}× the ridge point"


def _cap(v: str, f: Mapping[str, Any]) -> str:
    return "clocks held down by the power limit" if v == "power_capped" else \
        "clocks held down by heat"


def _none(v: Any, f: Mapping[str, Any]) -> None:
    return None


FORMATS: dict[str, Format] = {
    "gpu_util_pct": _pct("kernels running"),
    "sm_active_pct": _pct("SMs active"),
    "tensor_active_pct": _pct("tensor pipes busy"),
    "dram_active_pct": lambda v, f: f"{v:.0f} % of peak HBM bandwidth",
    "fp32_active_pct": _pct("FP32 pipe busy"),
    "fp16_active_pct": _pct("FP16 pipe busy"),
    "mem_util_pct": _pct("memory busy (share of time)"),
    "power_frac_of_limit": _share("of the power limit drawn"),
    "compute_share_of_peak": _share("of rated peak FLOP/s achieved"),
    "dram_share_of_peak": _none,  # dram_active_pct says it
    "intensity_vs_ridge": _vs_ridge,
    "intensity_flop_per_byte": _intensity,
    "ridge_flop_per_byte": _none,  # in intensity_flop_per_byte's line
    "pcie_rx_bytes_s": _pcie("host→device"),
    "pcie_tx_bytes_s": _pcie("device→host"),
    "pcie_link_bytes_s": _none,  # in the rx/tx lines
    "pcie_link_frac": lambda v, f: None if ("pcie_rx_bytes_s" in f and f.get("pcie_link_bytes_s"))
    else f"PCIe at {v:.0%} of the link's rate",
    "nvlink_link_frac": _share("of NVLink peak bandwidth in use"),
    "sm_fill": _share("of the SMs filled while kernels run"),
    "wait_share": lambda v, f: f"{v:.0%} of samples waiting on input (kernels under half the time)",
    "processes": lambda v, f: f"{v} process(es) on the GPU",
    "process_gpu_bytes": lambda v, f: f"{gib(v)} held by processes" if v else None,
    "users": lambda v, f: f"{v} different users",
    "host_cpu_pct": lambda v, f: None if v is None else f"host CPUs {v:.0f} % busy",
    "host_saturated_cores": lambda v, f: f"{v:.1f} of {f.get('host_cores', '?')} host cores "
    f"saturated (≥ 90 %)",
    "host_cores": _none,
    "power_w": _power,
    "power_limit_w": _none,
    "sm_clock_mhz": _clock,
    "sm_clock_max_mhz": _none,
    "clock_below_max_pct": lambda v, f: f"clock {v:.0f} % below its maximum",
    "power_cap_share": lambda v, f: f"power cap (reason 0x4) in {v:.0%} of samples",
    "thermal_share": lambda v, f: f"thermal slowdown in {v:.0%} of samples",
    "temp_c": _temp,
    "slowdown_temp_c": _none,
    "mem_used_bytes": _mem_used,
    "mem_total_bytes": _none,
    "mem_used_frac": lambda v, f: None if f.get("mem_used_bytes") else f"{v:.0%} of memory used",
    "mem_free_bytes": lambda v, f: f"{gib(v)} of memory free",
    "slope_bytes_s": lambda v, f: f"memory rising at +{gb_s(v)}",
    "time_to_full_s": lambda v, f: f"full in {countdown(v)} at that rate",
    "rises": lambda v, f: f"{v} separate rises",
    "span_s": lambda v, f: f"over {seconds(v)}",
    "filling": _none,
    "engine": lambda v, f: f"serving engine: {v}",
    "capped_by": _cap,
    "state": lambda v, f: f"device state: {v}",
    "xid_codes": lambda v, f: f"XID code(s) {v}",
    "ecc_uncorrected": lambda v, f: f"{v} uncorrectable ECC error(s)",
    "ecc_uncorrected_new": lambda v, f: f"{v} new uncorrectable ECC error(s) in this window"
    if v else None,
    "mig": lambda v, f: "a MIG instance" if v else None,
    "missing": lambda v, f: f"signals missing: {v}" if v else "no signal missing",
}


# The unit of each numeric evidence value, for machines: (Prometheus base-unit suffix, factor
# from the rule's raw value to that unit; "" for a count). Percent stays percent (what NVML and
# GPM report); shares 0-1 are ratios. Words (the engine's name, a cap's cause, XID codes) have none: the kind
# and the explanation carry them.
UNITS: dict[str, tuple[str, float]] = {
    **{k: ("percent", 1.0) for k in (
        "gpu_util_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct",
        "fp32_active_pct", "fp16_active_pct", "mem_util_pct", "host_cpu_pct",
        "clock_below_max_pct")},
    **{k: ("ratio", 1.0) for k in (
        "power_frac_of_limit", "compute_share_of_peak", "dram_share_of_peak",
        "intensity_vs_ridge", "pcie_link_frac", "nvlink_link_frac", "sm_fill", "wait_share",
        "power_cap_share", "thermal_share", "mem_used_frac")},
    **{k: ("bytes_per_second", 1.0) for k in (
        "pcie_rx_bytes_s", "pcie_tx_bytes_s", "pcie_link_bytes_s", "slope_bytes_s")},
    **{k: ("bytes", 1.0) for k in (
        "process_gpu_bytes", "mem_used_bytes", "mem_total_bytes", "mem_free_bytes")},
    **{k: ("flop_per_byte", 1.0) for k in ("intensity_flop_per_byte", "ridge_flop_per_byte")},
    **{k: ("", 1.0) for k in (  # counts: dimensionless
        "processes", "users", "host_saturated_cores", "host_cores", "rises", "ecc_uncorrected",
        "ecc_uncorrected_new")},
    **{k: ("seconds", 1.0) for k in ("time_to_full_s", "span_s")},
    "power_w": ("watts", 1.0), "power_limit_w": ("watts", 1.0),
    "sm_clock_mhz": ("hertz", 1e6), "sm_clock_max_mhz": ("hertz", 1e6),
    "temp_c": ("celsius", 1.0), "slowdown_temp_c": ("celsius", 1.0),
}


def evidence_values(facts: Mapping[str, Any]) -> tuple[tuple[str, str, float], ...]:
    """(key, unit, value in that unit) of each numeric evidence value (``UNITS``); words, flags
    and missing values are left out."""
    out = []
    for key, value in facts.items():
        unit = UNITS.get(key)
        if unit is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value - value != 0:  # NaN/inf: no reading
            continue
        out.append((key, unit[0], float(value) * unit[1]))
    return tuple(out)


def evidence_lines(facts: Mapping[str, Any]) -> tuple[str, ...]:
    """The raw evidence as lines for people (see the module doc); values that are None are left
    out, and a key without a formatter is shown as ``key = value`` (the test forbids that)."""
    out = []
    for key, value in facts.items():
        if value is None:
            continue
        fmt = FORMATS.get(key)
        line = f"{key} = {value}" if fmt is None else fmt(value, facts)
        if line:
            out.append(line)
    return tuple(out)
