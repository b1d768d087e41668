"""Bottleneck diagnosis proven on the real labelled H200 trace, plus synthetic edge cases."""

from __future__ import annotations

import dataclasses

import pytest

from fleet_tui.core.monitor.analysis import (
    KINDS,
    analyze_device_window,
    analyze_trace,
    pcie_link_bytes_s,
    theil_sen_slope,
)
from fleet_tui.core.monitor.snapshot import CLOCK_EVENT_SW_POWER_CAP, DeviceSnapshot
from fleet_tui.core.monitor.trace import load_trace

EXPECTED = {
    "idle": "idle",
    "compute_bound": "healthy_compute",
    "hbm_bandwidth_bound": "memory_bandwidth_bound",
    "input_starved": "input_starved",
    "launch_bound": "launch_bound",
    "host_to_device_pcie": "host_transfer_bound",
    "memory_capacity_full": "memory_capacity_pressure",
    "idle_cooldown": "idle",
}
WINDOW_S = 5.0
STEP_S = 0.2  # every sample starts a window
# NVML averages utilization over up to 1 s and phase switches take a moment: skip 1 s each side.
SETTLE_S = 1.0


@pytest.fixture(scope="module")
def trace():
    return load_trace("demo")


@pytest.fixture(scope="module")
def windows(trace):
    return analyze_trace(trace, window_s=WINDOW_S, step_s=STEP_S)


def _phase_spans(trace):
    spans: dict[str, list[float]] = {}
    for s in trace:
        d = s.devices[0]
        span = spans.setdefault(d.phase, [d.timestamp, d.timestamp])
        span[1] = d.timestamp
    return spans


def _steady(windows, spans, phase):
    lo, hi = spans[phase]
    return [w for w in windows
            if w.start >= lo + SETTLE_S - 1e-6 and w.end <= hi - SETTLE_S + 1e-6]


@pytest.mark.parametrize("phase", sorted(EXPECTED))
def test_every_steady_window_of_each_labelled_phase(trace, windows, phase):
    spans = _phase_spans(trace)
    steady = _steady(windows, spans, phase)
    assert steady, f"no steady-state window inside {phase} {spans[phase]}"
    wrong = [(w.start, w.primary, w.kinds()) for w in steady if w.primary != EXPECTED[phase]]
    assert not wrong, f"{phase}: expected {EXPECTED[phase]}, got {wrong[:5]}"
    for w in steady:
        d = w.primary_diagnosis
        assert 0.5 <= d.confidence <= 1.0
        assert d.evidence and d.explanation and d.action
        assert w.phase == phase


def test_power_cap_reported_exactly_where_reason_0x4_held(trace, windows):
    spans = _phase_spans(trace)
    by_time = {round(s.devices[0].timestamp, 3): s.devices[0] for s in trace}
    for phase in EXPECTED:
        for w in _steady(windows, spans, phase):
            samples = [d for t, d in by_time.items() if w.start - 1e-6 <= t < w.end - 1e-6]
            capped = sum(1 for d in samples if (d.clock_event_reasons or 0) & CLOCK_EVENT_SW_POWER_CAP)
            pc = w.get("power_capped")
            if capped == 0:
                assert pc is None, (phase, w.start)
            if capped / len(samples) > 0.9:
                assert pc is not None, (phase, w.start)
                ev = pc.evidence_dict
                assert ev["sm_clock_mhz"] < ev["sm_clock_max_mhz"]
                assert ev["clock_below_max_pct"] > 5
    compute = _steady(windows, spans, "compute_bound")
    assert all(w.get("power_capped") for w in compute)


def test_sizing_phases_are_sane(trace, windows):
    spans = _phase_spans(trace)
    sizing = [p for p in spans if p.startswith("sizing:")]
    assert sizing
    checked = 0
    for phase in sizing:
        for w in windows:
            if w.phase != phase:
                continue
            kinds = w.kinds()
            assert set(kinds) <= set(KINDS)
            checked += 1
            # the ground truth: tensor cores and SMs were busy in these windows
            samples = [s.devices[0] for s in trace
                       if w.start - 1e-6 <= s.devices[0].timestamp < w.end - 1e-6]
            tensor = sum(d.tensor_active_pct for d in samples) / len(samples)
            sm = sum(d.sm_active_pct for d in samples) / len(samples)
            if tensor >= 1.0:
                assert "idle" not in kinds, (phase, w.start)
            if sm < 10:
                assert "healthy_compute" not in kinds
            assert "memory_capacity_pressure" not in kinds
    assert checked > 20


def _strip_gpm(snap):
    d = dataclasses.replace(snap.devices[0], sm_active_pct=None, sm_occupancy_pct=None,
                            tensor_active_pct=None, dram_active_pct=None, fp32_active_pct=None,
                            fp16_active_pct=None, gpm_supported=False)
    return dataclasses.replace(snap, devices=(d,))


def test_without_gpm_falls_back_names_missing_signals_and_lowers_confidence(trace):
    spans = _phase_spans(trace)
    full = analyze_trace(trace, window_s=WINDOW_S, step_s=1.0)
    bare = analyze_trace([_strip_gpm(s) for s in trace], window_s=WINDOW_S, step_s=1.0)
    fallback_expected = {"idle": "idle", "host_to_device_pcie": "host_transfer_bound",
                         "memory_capacity_full": "memory_capacity_pressure",
                         "hbm_bandwidth_bound": "memory_bandwidth_bound",
                         "idle_cooldown": "idle", "input_starved": "input_starved"}
    for phase, kind in fallback_expected.items():
        steady_full = {w.start: w for w in _steady(full, spans, phase)}
        for w in _steady(bare, spans, phase):
            assert w.primary == kind, (phase, w.start, w.kinds())
            assert "sm_active_pct" in w.missing_signals
            assert w.primary_diagnosis.confidence <= steady_full[w.start].primary_diagnosis.confidence
    # busy compute without GPM is never called idle or starved, and its confidence is low
    for w in _steady(bare, spans, "compute_bound"):
        assert w.primary == "healthy_compute" and w.primary_diagnosis.confidence < 0.5


def _dev(t, **kw):
    base = dict(index=0, name="GPU", uuid="GPU-1", timestamp=t, gpu_util_pct=99.0,
                sm_active_pct=95.0, tensor_active_pct=2.0, dram_active_pct=10.0,
                fp32_active_pct=60.0, mem_used_bytes=10 * 2**30, mem_total_bytes=80 * 2**30,
                power_w=300.0, power_limit_w=700.0, sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0,
                clock_event_reasons=0)
    base.update(kw)
    return DeviceSnapshot(**base)


def test_plain_fp32_compute_suggests_tensor_cores():
    a = analyze_device_window([_dev(t) for t in range(5)])
    assert a.primary == "compute_no_tensor_cores"
    assert "TF32" in a.primary_diagnosis.action or "bf16" in a.primary_diagnosis.action


def test_thermal_throttle_and_alarms():
    hot = [_dev(t, clock_event_reasons=0x20, temp_c=90.0, slowdown_temp_c=89.0, sm_clock_mhz=1400.0,
                tensor_active_pct=80.0) for t in range(5)]
    a = analyze_device_window(hot)
    assert a.primary == "thermal_throttled"
    assert "healthy_compute" in a.kinds()
    bad = [_dev(t, ecc_uncorrected=t, xid_errors=(79,) if t == 4 else ()) for t in range(5)]
    b = analyze_device_window(bad)
    assert b.kinds()[:2] == ("xid", "ecc_errors")
    lost = analyze_device_window([_dev(0, state="lost")])
    assert lost.primary == "device_lost"


def test_memory_growth_projects_time_to_full_and_ignores_single_steps():
    total = 80 * 2**30
    leak = [_dev(t, mem_used_bytes=int(10 * 2**30 + t * 50 * 2**20), tensor_active_pct=80.0)
            for t in range(0, 60, 2)]
    a = analyze_device_window(leak[-3:], growth_points=[(d.timestamp, d.mem_used_bytes) for d in leak])
    g = a.get("memory_growth")
    assert g is not None
    expected_s = (total - leak[-1].mem_used_bytes) / (50 * 2**20)
    assert g.evidence_dict["time_to_full_s"] == pytest.approx(expected_s, rel=0.02)
    step = [(float(t), float(10 * 2**30 if t < 30 else 20 * 2**30)) for t in range(60)]
    assert analyze_device_window(leak[-3:], growth_points=step).get("memory_growth") is None


def test_theil_sen_is_robust_to_outliers():
    pts = [(float(t), 2.0 * t) for t in range(30)]
    pts[10] = (10.0, 1e9)
    assert theil_sen_slope(pts) == pytest.approx(2.0)


def test_pcie_link_rates():
    assert pcie_link_bytes_s(5, 16) == pytest.approx(63.0e9, rel=0.01)
    assert pcie_link_bytes_s(4, 16) == pytest.approx(31.5e9, rel=0.01)
    assert pcie_link_bytes_s(3, 8) == pytest.approx(7.88e9, rel=0.01)


def test_window_json_contract(windows):
    d = windows[0].to_dict()
    assert {"start", "end", "phase", "device", "primary", "diagnoses"} <= set(d)
    assert {"kind", "confidence", "evidence", "action"} <= set(d["diagnoses"][0])


def test_leak_after_a_release_is_growth_and_outranks_starvation():
    gib = 2**30
    pts = [(float(t), 20.0 * gib) for t in range(30)]
    pts += [(30.0 + t, 2.0 * gib + t * 0.5 * gib) for t in range(12)]
    window = [_dev(p[0], mem_used_bytes=int(p[1]), gpu_util_pct=3.0, sm_active_pct=2.0,
                   tensor_active_pct=0.0, fp32_active_pct=0.0) for p in pts[-5:]]
    a = analyze_device_window(window, growth_points=pts)
    assert a.primary == "memory_growth"
    assert "input_starved" in a.kinds()
    ev = a.get("memory_growth").evidence_dict
    assert ev["slope_bytes_s"] == pytest.approx(0.5 * gib, rel=0.01)


def test_registry_declares_each_kind_once_and_diagnoses_carry_its_record(windows):
    from fleet_tui.core.monitor.analysis import ACTIONS, PRIORITY, RULES, SEVERITY

    assert tuple(RULES) == KINDS and len(set(KINDS)) == len(KINDS)
    priorities = [r.priority for r in RULES.values()]
    assert priorities == sorted(priorities, reverse=True)  # listed most important first
    for kind, rec in RULES.items():
        assert rec.kind == kind and rec.action and rec.severity in {"ok", "info", "warning",
                                                                     "critical"}
        assert rec.when in {"alarm", "any", "idle", "active"}
        assert (rec.rule is None) == (kind == "unknown")
        assert (ACTIONS[kind], SEVERITY[kind], PRIORITY[kind]) == (rec.action, rec.severity,
                                                                   rec.priority)
    for w in windows:
        for d in w.diagnoses:
            rec = RULES[d.kind]
            assert d.action == rec.action
            # a risk that will hit within a minute (out of memory) is critical whatever its kind
            assert d.severity == rec.severity or (d.severity == "critical" and d.role == "risk")


def test_a_rule_is_a_plain_function_of_the_window_statistics():
    from fleet_tui.core.monitor.analysis import RULES
    from fleet_tui.core.monitor.analysis.tallies import Counts, read_row
    from fleet_tui.core.monitor.analysis.window import window_stats

    samples = [_dev(t) for t in range(5)]
    rows = [read_row(d) for d in samples]
    st = window_stats(rows, samples, Counts(rows, samples), [])
    found = {k: r.rule(st) for k, r in RULES.items() if r.rule is not None}
    assert {k for k, f in found.items() if f is not None} == {"compute_no_tensor_cores",
                                                              "memory_headroom"}
    f = found["compute_no_tensor_cores"]
    assert 0 < f.confidence <= 1 and f.facts["fp32_active_pct"] == 60.0
    assert "FP32 pipe 60%" in f.describe()
