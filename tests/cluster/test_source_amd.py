"""AMD source on real published amd-smi / amdsmi output (tests/fixtures/amd/README.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet_tui.core.monitor.analysis import analyze_device_window
from fleet_tui.core.monitor.snapshot import CLOCK_EVENT_SW_POWER_CAP
from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.sources.amd import (
    UNSUPPORTED,
    AmdSmiLibReader,
    AmdSource,
    gpu_entries,
    metric_to_device,
    parse_json,
    processes_by_gpu,
    static_info,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "amd"
MIB = 1024 * 1024


def _load(name):
    return json.loads((FIX / name).read_text())


def test_rx6600_metric_and_static():
    static = static_info(gpu_entries(_load("rx6600_static_excerpt.json")))
    d = metric_to_device(gpu_entries(_load("rx6600_metric.json"))[0], 0, 1.0, static[0])
    assert d.vendor == "amd" and d.index == 0
    assert d.name == "Navi 23 [Radeon RX 6600/6600 XT"
    assert (d.gpu_util_pct, d.mem_util_pct) == (1, 0)
    assert (d.mem_used_bytes, d.mem_total_bytes) == (202 * MIB, 8176 * MIB)
    assert (d.power_w, d.power_limit_w) == (6, 100)
    assert (d.temp_c, d.slowdown_temp_c) == (37, 110)  # hotspot and its slowdown limit
    assert (d.sm_clock_mhz, d.sm_clock_max_mhz, d.mem_clock_mhz, d.mem_clock_max_mhz) == (800, 2750, 541, 875)
    assert d.clock_event_reasons == 0  # UNTHROTTLED
    assert (d.ecc_corrected, d.ecc_uncorrected) == (0, 0)
    assert d.sm_active_pct is None and "sm_active_pct" in d.unsupported
    assert UNSUPPORTED <= d.unsupported
    # the engine's single-device analysis runs on it and reaches a diagnosis
    assert analyze_device_window([d]).primary != "unknown"


def test_gpu_data_wrapper_and_changelog_power_block():
    wrapped = {"gpu_data": _load("rx6600_metric.json")}
    assert metric_to_device(gpu_entries(wrapped)[0], 0, 0.0).gpu_util_pct == 1
    d = metric_to_device(gpu_entries(_load("amdsmi_changelog_metric_power.json"))[0], 0, 0.0)
    assert d.power_w == 10 and d.clock_event_reasons == 0 and d.gpu_util_pct is None
    assert d.name == "AMD GPU 0"
    with pytest.raises(ValueError, match="amd-smi metric --json: unreadable"):
        parse_json("Traceback: amdsmi not initialised", "amd-smi metric --json")


def test_throttled_near_the_cap_reads_as_power_capped():
    # derived from the RX 6600 fixture: the same card reported THROTTLED at 98 W of its 100 W cap
    e = _load("rx6600_metric.json")[0]
    e["power"] = dict(e["power"], socket_power={"value": 98, "unit": "W"}, throttle_status="THROTTLED")
    d = metric_to_device(e, 0, 0.0, static_info(gpu_entries(_load("rx6600_static_excerpt.json")))[0])
    assert d.clock_event_reasons == CLOCK_EVENT_SW_POWER_CAP
    assert dict(d.extra)["amd_throttled"] == 1.0


def test_process_list_shape():
    # the shape `amd-smi process --json` prints (ROCm 6.x docs); values chosen for the test
    doc = [{"gpu": 1, "process_list": [
        {"process_info": {"name": "python3", "pid": 4242,
                          "memory_usage": {"vram_mem": {"value": 2048, "unit": "B"}}}},
        "No running processes detected"]}]
    procs = processes_by_gpu(doc)[1]
    assert [(p.pid, p.device_index, p.used_gpu_bytes, p.command) for p in procs] == [(4242, 1, 2048, "python3")]


class _NotSupported(Exception):
    pass


class FakeAmdSmi:
    """The amdsmi module's calls; gpu metrics are the real RX 6600 library output."""

    def __init__(self):
        self.calls = {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return ["h0"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": "Navi 23 [Radeon RX 6600/6600 XT"}

    def amdsmi_get_power_cap_info(self, h):
        return {"power_cap": 100_000_000}  # microwatts

    def amdsmi_get_gpu_metrics_info(self, h):
        self._count("metrics")
        return _load("rx6600_amdsmi_gpu_metrics_info.json")

    def amdsmi_get_gpu_vram_usage(self, h):
        return {"vram_total": 8176, "vram_used": 202}

    def amdsmi_get_gpu_process_list(self, h):
        self._count("processes")
        raise _NotSupported("AMDSMI_STATUS_NOT_SUPPORTED")


def test_library_backend_reads_metrics_and_learns_unsupported_calls():
    lib = FakeAmdSmi()
    reader = AmdSmiLibReader(lib)
    reader.open()
    d = reader.read(1.0)[0]
    assert d.gpu_util_pct == 0 and d.power_w == 4  # current_socket_power N/A -> average
    assert (d.temp_c, d.sm_clock_mhz, d.mem_clock_mhz) == (37, 700, 96)
    assert d.power_limit_w == 100 and d.mem_total_bytes == 8176 * MIB
    assert d.clock_event_reasons == 0
    assert reader.errors and "processes" in reader.errors[0]
    reader.read(2.0)
    assert lib.calls == {"metrics": 2, "processes": 1}


@pytest.fixture
def fake_amd_smi(tmp_path, monkeypatch):
    """An `amd-smi` on PATH that prints the fixtures, as the real one would."""
    script = tmp_path / "amd-smi"
    script.write_text(f"""#!/bin/sh
case "$1" in
  metric) cat {FIX / 'rx6600_metric.json'} ;;
  static) cat {FIX / 'rx6600_static_excerpt.json'} ;;
  process) echo '[{{"gpu": 0, "process_list": []}}]' ;;
  *) echo "unknown $1" >&2; exit 2 ;;
esac
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return script


async def test_source_through_the_cli(fake_amd_smi):
    src = AmdSource(backend="amd-smi", host=False)
    await src.open()
    snap = await src.sample()
    await src.close()
    assert snap.source == "amd" and not snap.errors
    (d,) = snap.devices
    assert d.name.startswith("Navi 23") and d.power_limit_w == 100 and d.gpu_util_pct == 1


async def test_source_unavailable_without_amd_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SourceUnavailable, match="amd-smi not found"):
        await AmdSource(backend="amd-smi").open()
