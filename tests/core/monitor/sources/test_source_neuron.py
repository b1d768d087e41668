"""NeuronSource: a real subprocess printing neuron-monitor documents, mapped per Neuron device."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.sources.neuron import NeuronSource, map_document
from tests.paths import TESTS

FIX = TESTS / "fixtures" / "neuron"
DOCS = FIX / "inf2_24xlarge.jsonl"
GIB = 1024**3


def _docs() -> list[dict]:
    return [json.loads(line) for line in DOCS.read_text().splitlines() if line.strip()]


def _command(*extra: str) -> list[str]:
    return [sys.executable, str(FIX / "fake_neuron_monitor.py"), str(DOCS), *extra]


def test_document_maps_to_devices():
    doc = _docs()[0]
    devices, host, problems = map_document(doc, timestamp=1.0)
    assert problems == [] and len(devices) == 6
    d0, d1, d2, d3 = devices[:4]
    u = doc["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]
    assert d0.gpu_util_pct == pytest.approx((u["0"]["neuroncore_utilization"] + u["1"]["neuroncore_utilization"]) / 2)
    assert dict(d0.extra)["nc1_util_pct"] == u["1"]["neuroncore_utilization"]
    assert d2.gpu_util_pct == pytest.approx(35.0 / 2) and d3.gpu_util_pct == 0
    used = doc["neuron_runtime_data"][0]["report"]["memory_used"]["neuron_runtime_used_bytes"]
    core = used["usage_breakdown"]["neuroncore_memory_usage"]["0"]
    assert d0.mem_used_bytes == 2 * sum(core.values()) and d0.mem_total_bytes == 32 * GIB
    assert d3.mem_used_bytes == 0
    assert [p.pid for p in d0.processes] == [2101] and [p.pid for p in d2.processes] == [2202]
    assert d0.processes[0].used_gpu_bytes == d0.mem_used_bytes
    assert d1.ecc_corrected == 4 and d1.ecc_uncorrected == 0 and d0.ecc_corrected == 0
    assert d0.vendor == "aws" and d0.name == "AWS Inferentia2"
    assert host is not None and host.mem_total_bytes == 405874409472 and len(host.cpu_per_core_pct) == 4


def test_runtime_errors_are_reported():
    doc = _docs()[0]
    doc["neuron_runtime_data"][1]["error"] = "runtime is not responding"
    _, _, problems = map_document(doc, timestamp=1.0)
    assert problems == ["runtime 2202: runtime is not responding"]


async def test_stream_through_a_real_subprocess_keeps_the_latest_document():
    docs = _docs()
    src = NeuronSource(command=_command("--period", "0.02"), first_report_timeout_s=5)
    async with src:
        want = docs[-1]["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]
        snap = await src.sample()
        for _ in range(250):  # until the fake has printed its last document
            if snap.devices and dict(snap.devices[0].extra)["nc0_util_pct"] == want["neuroncore_utilization"]:
                break
            await asyncio.sleep(0.02)
            snap = await src.sample()
        proc = src._proc
    assert snap.source == "neuron" and snap.devices[0].gpu_util_pct == pytest.approx((40.0 + 42.0) / 2)
    assert snap.errors == ()
    assert proc.poll() is not None  # close() stopped the long-lived process


async def test_monitor_that_exits_is_reported():
    src = NeuronSource(command=_command("--period", "0.01", "--exit"), first_report_timeout_s=5)
    async with src:
        snap = await src.sample()
        for _ in range(250):
            if snap.errors:
                break
            await asyncio.sleep(0.02)
            snap = await src.sample()
    assert "neuron-monitor stopped (exit status 3)" in snap.errors[0]
    assert snap.devices  # the last report is still shown


async def test_missing_neuron_monitor():
    with pytest.raises(SourceUnavailable, match="not found on PATH"):
        await NeuronSource(command=["/nonexistent/neuron-monitor"]).open()


async def test_default_run_passes_a_one_second_config_and_removes_it(tmp_path, monkeypatch):
    seen = tmp_path / "config_seen.json"
    exe = tmp_path / "neuron-monitor"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        "cfg = json.load(open(sys.argv[sys.argv.index('-c') + 1]))\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(cfg))\n"
        f"print(open({str(DOCS)!r}).readline().strip(), flush=True)\n"
        "time.sleep(30)\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    src = NeuronSource()
    async with src:
        config_path = src._own_config
        snap = await src.sample()
    assert len(snap.devices) == 6
    assert json.loads(seen.read_text())["period"] == "1s"
    assert config_path and not Path(config_path).exists()


@pytest.mark.parametrize("edit", [
    lambda d: d["neuron_hardware_info"].update(neuron_device_count=10**12),  # would build 10^12 devices
    lambda d: d["neuron_hardware_info"].update(neuroncore_per_device_count=10**9),
    lambda d: d.update(neuron_runtime_data="not a list"),
    lambda d: d["neuron_hardware_info"].update(neuron_device_count="many"),
])
async def test_a_report_out_of_shape_or_size_is_an_error_not_a_crash(tmp_path, edit):
    doc = _docs()[0]
    edit(doc)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(doc) + "\n")
    src = NeuronSource(command=[sys.executable, str(FIX / "fake_neuron_monitor.py"), str(bad), "--period", "0.02"],
                       first_report_timeout_s=5)
    async with src:
        snap = await src.sample()
    assert snap.devices == () and any("not in the shape it documents" in e for e in snap.errors)
