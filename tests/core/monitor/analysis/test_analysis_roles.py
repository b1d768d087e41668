"""Bottlenecks vs risks, and growth that continues. Synthetic windows built
from DeviceSnapshots: unit tests of the rules, not accuracy claims."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis import RULES, analyze_device_window
from fleet_tui.core.monitor.snapshot import DeviceSnapshot

GIB = 2**30


def _dev(t: float, **kw) -> DeviceSnapshot:
    base = dict(index=0, name="GPU", uuid="GPU-1", timestamp=t, gpu_util_pct=99.0,
                sm_active_pct=95.0, tensor_active_pct=2.0, dram_active_pct=10.0,
                fp32_active_pct=80.0, mem_used_bytes=10 * GIB, mem_total_bytes=141 * GIB,
                power_w=300.0, power_limit_w=700.0, sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0,
                clock_event_reasons=0)
    base.update(kw)
    return DeviceSnapshot(**base)


def test_every_kind_has_a_role_and_the_json_says_which_is_which():
    assert {r.role for r in RULES.values()} <= {"bottleneck", "risk", "note"}
    for kind in ("memory_growth", "memory_capacity_pressure", "ecc_errors", "xid",
                 "thermal_throttled"):
        assert RULES[kind].role == "risk"
    a = analyze_device_window([_dev(t, mem_used_bytes=int(130 * GIB)) for t in range(5)])
    d = a.to_dict()
    assert d["primary"] == "compute_no_tensor_cores"
    assert d["risks"] == ["memory_capacity_pressure"]
    roles = {x["kind"]: x["role"] for x in d["diagnoses"]}
    assert roles == {"compute_no_tensor_cores": "bottleneck", "memory_capacity_pressure": "risk"}


def test_staircase_of_one_off_allocations_is_not_growth_and_never_outranks_compute():
    # steps of 300 MiB at phase changes (t = 0, 5, 10), then 30 s flat at the same level
    def mem(t):
        return 10 * GIB + 300 * 2**20 * min(3, int(t // 5) + 1)
    pts = [(float(t), float(mem(t))) for t in range(0, 45)]
    window = [_dev(t, mem_used_bytes=int(mem(t))) for t in range(40, 45)]
    a = analyze_device_window(window, growth_points=pts)
    assert "memory_growth" not in a.kinds()
    assert a.primary == "compute_no_tensor_cores"


def test_a_device_filling_up_on_an_idle_gpu_is_flagged_and_urgent():
    # 80 -> 133 of 141 GiB at ~10 GiB/s, sampled at 1 Hz, no kernels
    pts = [(float(t), float((80 + 10 * t) * GIB)) for t in range(6)]
    pts.append((6.0, 133.0 * GIB))
    idle = dict(gpu_util_pct=0.0, sm_active_pct=0.0, tensor_active_pct=0.0, fp32_active_pct=0.0,
                dram_active_pct=0.0)
    window = [_dev(t, mem_used_bytes=int(m), **idle) for t, m in pts[-5:]]
    a = analyze_device_window(window, growth_points=pts)
    g = a.get("memory_growth")
    assert g is not None and g.role == "risk"
    assert g.evidence_dict["time_to_full_s"] < 60
    assert a.primary == "memory_growth"  # full within minutes: outranks idle
    assert "idle" in a.kinds()


def test_a_slow_leak_is_a_risk_beside_the_bottleneck_not_primary():
    # 40 MiB every 2 s: full in about 2 h, not imminent
    pts = [(float(t), float(10 * GIB + t * 20 * 2**20)) for t in range(0, 120, 2)]
    window = [_dev(t, mem_used_bytes=int(m), tensor_active_pct=80.0) for t, m in pts[-5:]]
    a = analyze_device_window(window, growth_points=pts)
    assert a.primary == "healthy_compute"
    assert a.risks == ("memory_growth",)


def test_primary_is_chosen_by_evidence_not_a_priority_table():
    # a weak bottleneck does not win over a strong one because of its place in the registry
    hot = [_dev(t, clock_event_reasons=0x20, temp_c=80.0, slowdown_temp_c=89.0,
                sm_clock_mhz=1400.0, tensor_active_pct=80.0) for t in range(5)]
    a = analyze_device_window(hot)
    assert a.primary == "healthy_compute" and "thermal_throttled" in a.risks
    at_limit = [_dev(t, clock_event_reasons=0x20, temp_c=90.0, slowdown_temp_c=89.0,
                     sm_clock_mhz=1400.0, tensor_active_pct=80.0) for t in range(5)]
    assert analyze_device_window(at_limit).primary == "thermal_throttled"  # urgent


def test_nan_readings_are_missing_values_never_a_diagnosis():
    nan = float("nan")
    window = [_dev(t, mem_used_bytes=None, gpu_util_pct=None, sm_active_pct=None,
                   tensor_active_pct=None, fp32_active_pct=None, dram_active_pct=None,
                   power_w=None) for t in range(5)]
    a = analyze_device_window(window)
    assert a.primary == "unknown"
    assert nan != nan  # (the trace reader turns NaN into None: tests/core/monitor/test_trace_robust.py)


def test_time_shares_from_phases_give_the_idle_share():
    from fleet_tui.core.monitor.analysis.stream import analyze_stream
    from fleet_tui.core.monitor.rightsize import idle_note
    from fleet_tui.core.monitor.trace import iter_trace

    phases = list(analyze_stream(iter_trace("demo")))
    idle_s = sum(p.end - p.start for p in phases if p.primary == "idle")
    total = phases[-1].end - phases[0].start
    assert idle_note(phases) == {0: f"idle {100 * idle_s / total:.0f} % of the time"}


def test_phases_split_a_blend_that_a_fixed_window_would_average():
    """Half FP32 matmul, half input stall (synthetic, 5 Hz): a 5 s window across the switch
    averages them; the phases keep them apart."""
    from fleet_tui.core.monitor.analysis.stream import analyze_stream
    from fleet_tui.core.monitor.snapshot import Snapshot

    def snap(i):
        t = i / 5
        d = _dev(t) if t < 10 else _dev(t, gpu_util_pct=100.0 if i % 5 == 0 else 0.0,
                                         sm_active_pct=20.0 if i % 5 == 0 else 0.0,
                                         fp32_active_pct=10.0 if i % 5 == 0 else 0.0)
        return Snapshot(timestamp=t, source="t", source_kind="replay", devices=(d,))

    snaps = [snap(i) for i in range(100)]
    phases = list(analyze_stream(snaps))
    assert [p.primary for p in phases] == ["compute_no_tensor_cores", "input_starved"]
    assert abs(phases[1].start - 10.0) <= 0.4
    blend = analyze_device_window([s.devices[0] for s in snaps[38:63]])
    assert blend.start < 10.0 < blend.end  # the fixed window straddles the switch


def test_nan_from_a_live_source_is_missing_not_a_diagnosis():
    nan, inf = float("nan"), float("inf")
    window = [_dev(t, mem_used_bytes=nan, gpu_util_pct=nan, sm_active_pct=inf,
                   tensor_active_pct=nan, fp32_active_pct=nan, dram_active_pct=nan,
                   power_w=nan) for t in range(5)]
    a = analyze_device_window(window, growth_points=[(float(t), nan) for t in range(10)])
    assert a.primary == "unknown"
    assert a.get("memory_capacity_pressure") is None and a.get("memory_growth") is None


def test_a_leak_that_starts_after_a_one_off_allocation_is_still_growth():
    # a 20 GiB model load at t=0, 60 s flat, then 100 MiB every second for 30 s
    pts = [(0.0, 10.0 * GIB)] + [(float(t), 30.0 * GIB) for t in range(1, 60)]
    pts += [(60.0 + t, 30.0 * GIB + (t + 1) * 100 * 2**20) for t in range(30)]
    window = [_dev(t, mem_used_bytes=int(m), tensor_active_pct=80.0) for t, m in pts[-5:]]
    g = analyze_device_window(window, growth_points=pts).get("memory_growth")
    assert g is not None
    assert abs(g.evidence_dict["slope_bytes_s"] - 100 * 2**20) < 2**20
    assert g.evidence_dict["span_s"] <= 31


def test_phases_tile_each_device_even_when_the_change_is_found_late():
    """1 Hz sim devices: the CUSUM may place a change several seconds back; phases stay back to
    back per device, in time order, and cover every sample."""
    from fleet_tui.core.monitor.analysis.stream import analyze_stream
    from fleet_tui.core.monitor.sources.sim import SimSource

    src = SimSource(n=3, interval_s=1.0, start_time=0.0, phase_ticks=40)
    snaps = [src.snapshot_at(i) for i in range(200)]
    by_dev: dict[int, list] = {}
    for p in analyze_stream(snaps):
        by_dev.setdefault(p.device_index, []).append(p)
    for phases in by_dev.values():
        assert phases[0].start == 0.0 and phases[-1].end == 199.0
        for a, b in zip(phases, phases[1:]):
            assert b.start == a.end
        assert sum(p.samples for p in phases) == 200
