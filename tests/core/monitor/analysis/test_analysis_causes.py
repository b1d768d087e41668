"""The causes of slow work, each with evidence and an action. Synthetic windows: unit
tests of the rules, not accuracy claims."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis import RULES, HostLoad, analyze_device_window
from fleet_tui.core.monitor.analysis.stream import analyze_stream
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo, Snapshot

GIB = 2**30


def _dev(t: float, **kw) -> DeviceSnapshot:
    base = dict(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", timestamp=t,
                gpu_util_pct=99.0, sm_active_pct=95.0, tensor_active_pct=60.0,
                dram_active_pct=30.0, fp32_active_pct=5.0, mem_used_bytes=60 * GIB,
                mem_total_bytes=80 * GIB, power_w=500.0, power_limit_w=700.0,
                sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, clock_event_reasons=0)
    base.update(kw)
    return DeviceSnapshot(**base)


STARVED = dict(gpu_util_pct=30.0, sm_active_pct=20.0, tensor_active_pct=10.0)


def test_communication_bound_from_nvlink_counters():
    w = [_dev(t, nvlink_rx_bytes_s=300e9, nvlink_tx_bytes_s=290e9, **STARVED) for t in range(5)]
    a = analyze_device_window(w)
    assert a.primary == "communication_bound"
    d = a.primary_diagnosis
    assert d.evidence_dict["nvlink_link_frac"] > 0.6 and "NCCL" in d.action
    assert "input_starved" not in a.kinds()  # one answer to "why does it wait"
    busy = [_dev(t, nvlink_rx_bytes_s=300e9) for t in range(5)]  # overlapped with compute
    assert "communication_bound" not in analyze_device_window(busy).kinds()


def test_cpu_bound_host_when_the_gpu_waits_and_the_cores_are_saturated():
    w = [_dev(t, **STARVED) for t in range(5)]
    assert analyze_device_window(w).primary == "input_starved"
    busy_host = HostLoad(cpu_pct=35.0, busy_cores=4.0, cores=16)
    a = analyze_device_window(w, host=busy_host)
    assert a.primary == "cpu_bound_host"
    assert a.primary_diagnosis.evidence_dict["host_saturated_cores"] == 4.0
    assert "num_workers" in a.primary_diagnosis.action
    # the streamed analysis reads the host from the snapshots (psutil per core)
    snaps = [Snapshot(timestamp=float(t), source="t", source_kind="replay",
                      devices=(_dev(float(t), **STARVED),),
                      host=HostSnapshot(cpu_pct=40.0, cpu_per_core_pct=(100.0, 99.0) + (5.0,) * 6))
             for t in range(10)]
    assert [x.primary for x in analyze_stream(snaps)] == ["cpu_bound_host"]


def test_memory_headroom_is_a_note_beside_the_bottleneck():
    w = [_dev(t, mem_used_bytes=10 * GIB) for t in range(5)]
    a = analyze_device_window(w)
    assert a.primary == "healthy_compute"
    h = a.get("memory_headroom")
    assert h is not None and h.role == "note" and "batch" in h.action
    assert analyze_device_window([_dev(t) for t in range(5)]).get("memory_headroom") is None


def test_shared_gpu_and_mig_are_reported_with_an_action():
    procs = (ProcessInfo(pid=1, device_index=0, user="alice"),
             ProcessInfo(pid=2, device_index=0, user="bob"))
    a = analyze_device_window([_dev(t, processes=procs) for t in range(5)])
    s = a.get("shared_gpu")
    assert s is not None and s.evidence_dict["users"] == 2 and "MIG" in s.action
    m = analyze_device_window([_dev(t, mig_enabled=True) for t in range(5)]).get("mig_instance")
    assert m is not None and m.role == "note"
    for kind in ("communication_bound", "cpu_bound_host", "memory_headroom", "shared_gpu",
                 "mig_instance"):
        assert RULES[kind].action and RULES[kind].rule is not None
