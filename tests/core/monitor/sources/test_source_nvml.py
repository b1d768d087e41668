"""NvmlSource against a fake pynvml serving recorded H200 values and injected NVML errors."""

from __future__ import annotations

import asyncio
import sys
import time

import pynvml as real
import pytest

from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.sources.nvml import NvmlSource
from tests.paths import REPO

# `tests.fakes` must import under plain `pytest` too (python -m pytest puts the root on sys.path)
sys.path.insert(0, str(REPO))
from tests.fakes.fake_pynvml import FakeNvml, smi_facts

MIB = 1024 * 1024


class StepClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _source(fake: FakeNvml, **kw) -> NvmlSource:
    kw.setdefault("xid_events", False)
    return NvmlSource(nvml=fake.module, **kw)


async def _ticks(src: NvmlSource, fake: FakeNvml, n: int, step: int = 1, clock: StepClock | None = None):
    out = []
    for _ in range(n):
        out.append(await src.sample())
        fake.advance(step)
        if clock is not None:
            clock.t += 1.0
    return out


async def test_snapshot_values_match_the_recorded_h200_row():
    fake = FakeNvml.h200(devices=1)
    async with _source(fake) as src:
        await src.sample()
        fake.advance(60)  # into the compute_bound phase: 700 W cap, reason 0x4
        snap = await src.sample()
    row = fake.row(0)
    static = fake.gpus[0].static
    d = snap.devices[0]
    assert snap.source == "nvml" and snap.source_kind == "live"
    assert d.state == "ok" and d.name == static["name"] and d.uuid == static["uuid"]
    assert d.gpu_util_pct == row["gpu_util"] and d.mem_util_pct == row["mem_util"]
    assert d.mem_used_bytes == row["mem_used_bytes"]  # v2 used + reserved == NVML v1 used
    assert d.mem_total_bytes == static["memory_total_bytes"]
    assert d.temp_c == row["temp_c"] and d.slowdown_temp_c == static["slowdown_temp_c"]
    assert d.power_w == pytest.approx(row["power_mw"] / 1000)
    assert d.power_limit_w == pytest.approx(static["enforced_power_limit_mw"] / 1000)
    assert d.sm_clock_mhz == row["sm_clock_mhz"] and d.sm_clock_max_mhz == static["max_sm_clock_mhz"]
    assert d.mem_clock_mhz == row["mem_clock_mhz"] and d.mem_clock_max_mhz == static["max_mem_clock_mhz"]
    assert d.clock_event_reasons == row["clock_event_reasons"] and d.pstate == row["pstate"]
    facts = smi_facts()
    assert (d.ecc_corrected, d.ecc_uncorrected) == (facts["ecc_corrected"], facts["ecc_uncorrected"])
    assert [(p.pid, p.used_gpu_bytes) for p in d.processes] == [(p["pid"], p["used_bytes"]) for p in row["procs"]]
    # GPM over the interval between the two samples
    assert d.gpm_supported is True
    assert d.sm_active_pct == pytest.approx(row["gpm_sm_util"])
    assert d.sm_occupancy_pct == pytest.approx(row["gpm_sm_occupancy"])
    assert d.tensor_active_pct == pytest.approx(row["gpm_any_tensor_util"])
    assert d.dram_active_pct == pytest.approx(row["gpm_dram_bw_util"])
    assert d.fp32_active_pct == pytest.approx(row["gpm_fp32_util"])
    assert d.fp16_active_pct == pytest.approx(row["gpm_fp16_util"])
    assert d.pcie_rx_bytes_s == pytest.approx(row["gpm_pcie_rx_mib_s"] * MIB)
    assert d.nvlink_tx_bytes_s == pytest.approx(row["gpm_nvlink_tx_mib_s"] * MIB)
    extra = dict(d.extra)
    assert extra["hmma_tensor_active_pct"] == pytest.approx(row["gpm_hmma_tensor_util"])
    assert extra["mem_reserved_bytes"] == fake.gpus[0].reserved_bytes
    # the graphics engine's GPM metric is never asked for: alone it cost 1.39 ms of CPU a call on
    # an H200 (every other metric ~1 us), and no diagnosis reads it
    assert "gpm_graphics_util_pct" not in extra
    # GPM supplied PCIe, so the 21 ms blocking call was never made
    assert fake.count("nvmlDeviceGetPcieThroughput") == 0
    assert snap.host is not None and snap.host.mem_total_bytes


async def test_gpm_needs_two_samples_and_uses_each_interval():
    fake = FakeNvml.h200(devices=1)
    async with _source(fake) as src:
        first, second, third = await _ticks(src, fake, 3)
    assert first.devices[0].sm_active_pct is None  # one sample: no interval yet
    assert second.devices[0].sm_active_pct == pytest.approx(fake.gpus[0].rows[1]["gpm_sm_util"])
    assert third.devices[0].dram_active_pct == pytest.approx(fake.gpus[0].rows[2]["gpm_dram_bw_util"])
    assert fake.count("nvmlGpmSampleGet") == 3 and fake.count("nvmlGpmMetricsGet") == 2


async def test_prime_takes_the_first_gpm_sample_so_the_first_reading_has_an_interval():
    fake = FakeNvml.h200(devices=2)
    fake.gpus[1].static = {**fake.gpus[1].static, "gpm_supported": False}  # pre-Hopper beside it
    async with _source(fake) as src:
        assert await src.prime() is True
        fake.advance()
        first = await src.sample()
        assert await src.prime() is False  # every GPM device already holds its interval's start
    assert first.devices[0].sm_active_pct == pytest.approx(fake.gpus[0].rows[1]["gpm_sm_util"])
    assert first.devices[1].sm_active_pct is None
    assert fake.count("nvmlGpmSampleGet", 0) == 2 and fake.count("nvmlGpmSampleGet", 1) == 0


async def test_prime_on_a_board_without_gpm_asks_for_no_wait():
    fake = FakeNvml.h200(devices=1)
    fake.gpus[0].static = {**fake.gpus[0].static, "gpm_supported": False}
    async with _source(fake) as src:
        assert await src.prime() is False
    assert fake.count("nvmlGpmSampleGet") == 0


async def test_not_supported_is_learned_once_per_device_and_function():
    fake = FakeNvml.h200(devices=2)
    fake.fail("nvmlDeviceGetPowerUsage", real.NVML_ERROR_NOT_SUPPORTED, device=1)
    fake.fail("nvmlDeviceGetPerformanceState", real.NVML_ERROR_FUNCTION_NOT_FOUND, device=0)
    async with _source(fake) as src:
        snaps = await _ticks(src, fake, 5)
    assert fake.count("nvmlDeviceGetPowerUsage", 1) == 1
    assert fake.count("nvmlDeviceGetPowerUsage", 0) == 5
    assert fake.count("nvmlDeviceGetPerformanceState", 0) == 1
    last = snaps[-1]
    assert last.devices[1].power_w is None and "power_w" in last.devices[1].unsupported
    assert last.devices[0].power_w is not None and "power_w" not in last.devices[0].unsupported
    assert last.devices[0].pstate is None and "pstate" in last.devices[0].unsupported
    assert last.errors == ()  # learned N/A is not an error


async def test_transient_errors_are_reported_and_retried():
    fake = FakeNvml.h200(devices=1)
    fake.fail("nvmlDeviceGetTemperature", real.NVML_ERROR_UNKNOWN)
    async with _source(fake) as src:
        snaps = await _ticks(src, fake, 3)
        fake.clear_failure("nvmlDeviceGetTemperature")
        healed = await src.sample()
    assert fake.count("nvmlDeviceGetTemperature") == 4
    assert all(s.devices[0].temp_c is None and s.errors for s in snaps)
    assert "temperature" in snaps[0].errors[0]
    assert healed.devices[0].temp_c is not None and healed.errors == ()


async def test_lost_gpu_is_marked_while_the_other_keeps_updating():
    fake = FakeNvml.h200(devices=2)
    async with _source(fake) as src:
        await src.sample()
        fake.advance(30)
        fake.lose(0)
        a = await src.sample()
        calls_after_loss = fake.count("nvmlDeviceGetUtilizationRates", 0)
        fake.advance(30)
        b = await src.sample()
    assert a.devices[0].state == "lost" and "lost" in a.devices[0].error.lower()
    assert a.devices[0].uuid == fake.gpus[0].uuid  # still identifiable
    assert b.devices[0].state == "lost"
    assert fake.count("nvmlDeviceGetUtilizationRates", 0) == calls_after_loss  # not polled any more
    assert a.devices[1].state == b.devices[1].state == "ok"
    assert b.devices[1].power_w == pytest.approx(fake.row(1)["power_mw"] / 1000)
    assert a.devices[1].power_w != b.devices[1].power_w or a.devices[1].temp_c != b.devices[1].temp_c


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (real.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found: is the NVIDIA driver installed?"),
        (real.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
    ],
)
async def test_no_library_or_driver_raises_source_unavailable(monkeypatch, code, words):
    fake = FakeNvml.h200(devices=1, init_error=code)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)  # the default import path
    with pytest.raises(SourceUnavailable, match=words):
        await NvmlSource(xid_events=False).open()


async def test_pcie_throughput_is_sampled_rarely_and_one_device_per_tick():
    fake = FakeNvml.h200(devices=2)
    for g in fake.gpus:  # a pre-Hopper board: no GPM, so PCIe must come from the 21 ms call
        g.static = {**g.static, "gpm_supported": False}
    clock = StepClock()
    async with _source(fake, pcie_interval_s=5.0, clock=clock) as src:
        snaps = await _ticks(src, fake, 11, clock=clock)
    # each read is TX + RX; device 0 read at t=0,5,10 and device 1 at t=1,6 (one device per tick)
    assert fake.count("nvmlDeviceGetPcieThroughput", 0) == 6
    assert fake.count("nvmlDeviceGetPcieThroughput", 1) == 4
    assert snaps[0].devices[1].pcie_rx_bytes_s is None
    assert all(s.devices[0].pcie_rx_bytes_s is not None for s in snaps)
    assert snaps[3].devices[0].pcie_tx_bytes_s == snaps[1].devices[0].pcie_tx_bytes_s  # reused
    assert snaps[0].devices[0].pcie_tx_bytes_s == fake.gpus[0].rows[0]["pcie_tx_kb_s"] * 1024
    assert snaps[-1].devices[0].sm_active_pct is None and "sm_active_pct" in snaps[-1].devices[0].unsupported


async def test_mig_enabled_gpu_marks_utilization_and_reads_memory_per_instance():
    fake = FakeNvml.h200(devices=1)
    fake.gpus[0].mig = True
    fake.gpus[0].mig_devices = [(1, 5 * 1024**3, 40 * 1024**3), (2, 1 * 1024**3, 20 * 1024**3)]
    async with _source(fake) as src:
        snaps = await _ticks(src, fake, 3)
    d = snaps[-1].devices[0]
    assert d.mig_enabled and d.gpu_util_pct is None
    assert {"gpu_util_pct", "mem_util_pct", "sm_active_pct"} <= d.unsupported
    assert fake.count("nvmlDeviceGetUtilizationRates") == 0
    assert d.gpm_supported is False
    extra = dict(d.extra)
    assert extra["mig0.mem_used_bytes"] == 5 * 1024**3 and extra["mig1.mem_total_bytes"] == 20 * 1024**3
    assert extra["mig1.gpu_instance_id"] == 2
    assert d.mem_used_bytes is not None  # the whole board's memory still reads


async def test_xid_events_reach_the_snapshot():
    fake = FakeNvml.h200(devices=2)
    src = NvmlSource(nvml=fake.module, xid_events=True)
    async with src:
        fake.emit_xid(1, 79)
        deadline = time.monotonic() + 5
        snap = await src.sample()
        while not snap.devices[1].xid_errors and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            snap = await src.sample()
    assert snap.devices[1].xid_errors == (79,)
    assert snap.devices[0].xid_errors == ()


async def test_close_shuts_nvml_down_and_frees_gpm_samples():
    fake = FakeNvml.h200(devices=2)
    src = NvmlSource(nvml=fake.module, xid_events=True)
    await src.open()
    await src.sample()
    await src.close()
    await src.close()  # twice is fine
    assert fake.initialised == 0
    assert fake.count("nvmlGpmSampleFree") == 4
    assert src._xids.thread is None


async def test_no_gpu_is_unavailable():
    fake = FakeNvml([], init_error=None)
    with pytest.raises(SourceUnavailable, match="no NVIDIA GPU"):
        await _source(fake).open()
    assert fake.initialised == 0


async def test_processes_merge_compute_and_graphics_and_name_their_owner():
    import getpass
    import os

    fake = FakeNvml.h200(devices=1)
    me = os.getpid()
    fake.gpus[0].rows = [dict(r, procs=[{"pid": me, "used_bytes": 3 * MIB}]) for r in fake.gpus[0].rows]
    graphics = [type("P", (), {"pid": me, "usedGpuMemory": 5 * MIB})(),
                type("P", (), {"pid": 999999, "usedGpuMemory": None})()]
    fake.module.nvmlDeviceGetGraphicsRunningProcesses = lambda h: graphics
    async with _source(fake) as src:
        snap = await src.sample()
    procs = {p.pid: p for p in snap.devices[0].processes}
    assert set(procs) == {me, 999999}
    assert procs[me].used_gpu_bytes == 5 * MIB  # the larger of the two listings
    assert procs[me].user == getpass.getuser() and "python" in procs[me].command.lower()
    assert procs[999999].user is None and procs[999999].used_gpu_bytes is None  # not visible here


async def test_clock_event_reasons_fall_back_to_the_throttle_name_on_older_drivers():
    fake = FakeNvml.h200(devices=1)
    fake.fail("nvmlDeviceGetCurrentClocksEventReasons", real.NVML_ERROR_FUNCTION_NOT_FOUND)
    async with _source(fake) as src:
        snaps = await _ticks(src, fake, 3, step=30)
    assert fake.count("nvmlDeviceGetCurrentClocksEventReasons") == 1
    assert fake.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 3
    assert [s.devices[0].clock_event_reasons for s in snaps] == [
        fake.gpus[0].rows[k]["clock_event_reasons"] for k in (0, 30, 60)
    ]
    assert "clock_event_reasons" not in snaps[-1].devices[0].unsupported


def test_every_gpm_metric_fills_a_snapshot_field_or_an_extra_pair():
    # a GPM target that is neither would be read and then silently dropped
    import dataclasses
    from typing import get_args

    from fleet_tui.core.monitor.snapshot import DeviceSnapshot
    from fleet_tui.core.monitor.sources.nvml.device import GpmField, GpmFields
    from fleet_tui.core.monitor.sources.nvml.gpm import GPM_METRICS

    fields = set(get_args(GpmField))
    assert fields == set(GpmFields.__optional_keys__)
    assert fields <= {f.name for f in dataclasses.fields(DeviceSnapshot)}
    for name, target, _scale in GPM_METRICS:
        assert target in fields or target.startswith("extra:"), name
