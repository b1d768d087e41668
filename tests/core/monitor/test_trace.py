"""Reading the raw H200 capture and fleet-tui's own recordings."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.serialize import snapshot_from_dict, snapshot_to_dict
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo, Snapshot
from fleet_tui.core.monitor.trace import DEMO_TRACE, RecordingWriter, iter_trace, load_trace, write_recording


def _raw_lines():
    with DEMO_TRACE.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_raw_capture_maps_units_and_static_facts():
    raw = _raw_lines()
    static, samples = raw[0], raw[1:]
    snaps = load_trace("demo")
    assert len(snaps) == len(samples)
    # a compute_bound sample: power in W, limits from the static line, GPM as *_pct
    i = next(k for k, s in enumerate(samples) if s["phase"] == "compute_bound" and s["gpu_util"] > 90)
    d = snaps[i].devices[0]
    s = samples[i]
    assert d.name == static["name"] and d.uuid == static["uuid"]
    assert d.power_w == pytest.approx(s["power_mw"] / 1000)
    assert d.power_limit_w == pytest.approx(static["enforced_power_limit_mw"] / 1000)
    assert d.sm_clock_max_mhz == static["max_sm_clock_mhz"]
    assert d.mem_total_bytes == static["memory_total_bytes"]
    assert d.sm_active_pct == pytest.approx(s["gpm_sm_util"])
    assert d.tensor_active_pct == pytest.approx(s["gpm_any_tensor_util"])
    assert d.dram_active_pct == pytest.approx(s["gpm_dram_bw_util"])
    assert d.pcie_rx_bytes_s == pytest.approx(s["gpm_pcie_rx_mib_s"] * 1024 * 1024)
    assert dict(d.extra)["nvml_pcie_rx_bytes_s"] == pytest.approx(s["pcie_rx_kb_s"] * 1024)
    assert dict(d.extra)["pcie_link_gen"] == static["pcie_gen_cur"]
    assert d.phase == "compute_bound"
    assert snaps[i].timestamp == pytest.approx(s["t"])
    assert snaps[i].source_kind == "replay"
    assert d.processes and d.processes[0].pid == s["procs"][0]["pid"]


def test_raw_without_gpm_marks_signals_unsupported(tmp_path):
    raw = _raw_lines()[:5]
    stripped = [{k: v for k, v in r.items() if not k.startswith("gpm_")} for r in raw]
    path = tmp_path / "nogpm.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in stripped) + "\n")
    d = load_trace(path)[0].devices[0]
    assert d.sm_active_pct is None and "sm_active_pct" in d.unsupported
    assert d.pcie_rx_bytes_s == pytest.approx(raw[1]["pcie_rx_kb_s"] * 1024)


def _snap(t: float) -> Snapshot:
    dev = DeviceSnapshot(index=1, name="Sim", uuid="GPU-x", timestamp=t, gpu_util_pct=50.0,
                         mem_used_bytes=10, mem_total_bytes=100, unsupported=frozenset({"a"}),
                         processes=(ProcessInfo(pid=7, device_index=1, used_gpu_bytes=5,
                                                user="u", command="python"),),
                         extra=(("k", 1.5),), xid_errors=(79,))
    return Snapshot(timestamp=t, source="sim:1", source_kind="simulated", devices=(dev,),
                    host=HostSnapshot(cpu_pct=3.0, cpu_per_core_pct=(1.0, 5.0),
                                      load_avg=(0.1, 0.2, 0.3)))


def test_serialize_roundtrip_is_identity():
    s = _snap(12.5)
    d = snapshot_to_dict(s)
    json.dumps(d, allow_nan=False)
    assert snapshot_from_dict(json.loads(json.dumps(d))) == s


def test_serialize_ignores_unknown_and_fills_missing():
    d = snapshot_to_dict(_snap(1.0))
    d["new_field"] = 1
    d["devices"][0]["future_metric"] = 2
    del d["devices"][0]["temp_c"]
    back = snapshot_from_dict(d)
    assert back.devices[0].temp_c is None and back.devices[0].name == "Sim"


def test_recording_roundtrip_and_truncated_tail(tmp_path):
    path = tmp_path / "rec.jsonl"
    with RecordingWriter(path) as w:
        for t in range(3):
            w.write(_snap(float(t)))
    with path.open("a") as fh:
        fh.write('{"timestamp": 3.0, "devi')  # a crash mid-line
    back = list(iter_trace(path))
    assert [s.timestamp for s in back] == [0.0, 1.0, 2.0]
    assert back[0] == _snap(0.0)
    path2 = write_recording(tmp_path / "atomic.jsonl", back)
    assert load_trace(path2) == back


def test_bad_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_trace(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "static"}\nnot json\n{"kind": "sample", "t": 0}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:2"):
        load_trace(bad)
