"""HpuSource: hl-smi CSV parsing on captured-format outputs, and the real subprocess path."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.sources.hpu import HpuSource, parse_hlsmi_csv, parse_value
from tests.paths import REPO, TESTS

FIX = TESTS / "fixtures" / "hpu"
MIB = 1024 * 1024


def _fake_hl_smi(tmp_path: Path, fixture: str, status: int = 0) -> str:
    script = tmp_path / "hl-smi"
    script.write_text(f"#!/bin/sh\ncat '{FIX / fixture}'\nexit {status}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_units_and_na():
    assert parse_value("memory.total", "131072 MiB") == 131072 * MIB
    assert parse_value("power.draw", "226 W") == 226.0
    assert parse_value("temperature.aip", "36 C") == 36.0
    assert parse_value("utilization.aip", "97 %") == 97.0
    assert parse_value("power.draw", "N/A") is None
    assert parse_value("name", "HL-325L") == "HL-325L"
    with pytest.raises(ValueError):
        parse_value("power.draw", "226 furlongs")


def test_eight_gaudi3_cards():
    rows, problems = parse_hlsmi_csv((FIX / "gaudi3_8x.csv").read_text())
    assert problems == [] and [r["index"] for r in rows] == list(range(8))
    r1 = rows[1]
    assert r1["memory.used"] == 98304 * MIB and r1["power.draw"] == 612 and r1["utilization.aip"] == 97
    assert r1["uuid"] == "01P4-HL3090A0-18-U4V193-22-07-01"


def test_na_cells_become_none():
    rows, problems = parse_hlsmi_csv((FIX / "gaudi2_na.csv").read_text())
    assert problems == []
    assert rows[0]["power.draw"] is None and rows[0]["power.max"] is None and rows[0]["temperature.aip"] == 31
    assert rows[1]["temperature.aip"] is None and rows[1]["power.draw"] == 412


def test_garbage_lines_are_reported_and_good_lines_kept():
    rows, problems = parse_hlsmi_csv((FIX / "garbage.csv").read_text())
    assert [r["index"] for r in rows] == [0, 4]
    assert len(problems) == 5
    assert any("expected 11" in p and "got 6" in p for p in problems)
    assert any("furlongs" in p for p in problems)
    assert all(p.startswith("hl-smi line ") for p in problems)


async def test_source_runs_hl_smi_and_maps_devices(tmp_path):
    src = HpuSource(hl_smi=_fake_hl_smi(tmp_path, "gaudi3_8x.csv"))
    async with src:
        snap = await src.sample()
    assert src.argv()[1:] == ["-Q", "index,uuid,name,driver_version,memory.total,memory.used,memory.free,"
                              "power.draw,power.max,temperature.aip,utilization.aip", "-f", "csv,noheader"]
    assert snap.source == "hpu" and snap.source_kind == "live" and len(snap.devices) == 8
    d = snap.devices[2]
    assert d.vendor == "intel" and d.name == "Intel Gaudi 3 (HL-325L)"
    assert d.gpu_util_pct == 95 and d.power_w == 598 and d.power_limit_w == 850
    assert d.mem_total_bytes == 131072 * MIB and d.mem_used_bytes == 98304 * MIB and d.temp_c == 57


async def test_garbage_output_reaches_snapshot_errors(tmp_path):
    async with HpuSource(hl_smi=_fake_hl_smi(tmp_path, "garbage.csv")) as src:
        snap = await src.sample()
    assert len(snap.devices) == 2 and len(snap.errors) == 5


async def test_missing_or_failing_hl_smi(tmp_path):
    with pytest.raises(SourceUnavailable, match="not found on PATH"):
        await HpuSource(hl_smi=str(tmp_path / "no-such-hl-smi")).open()
    with pytest.raises(SourceUnavailable, match="no Gaudi device.*status 2"):
        await HpuSource(hl_smi=_fake_hl_smi(tmp_path, "gaudi2_na.csv", status=2)).open()


async def test_hl_smi_that_hangs_times_out_and_keeps_the_device_list(tmp_path):
    src = HpuSource(hl_smi=_fake_hl_smi(tmp_path, "gaudi2_na.csv"), timeout_s=0.3)
    await src.open()
    slow = tmp_path / "hl-smi"
    slow.write_text("#!/bin/sh\nexec sleep 5\n")
    snap = await src.sample()
    await src.close()
    assert "did not answer within 0.3 s" in snap.errors[0]
    assert [d.state for d in snap.devices] == ["unavailable", "unavailable"]


# -- pyhlml backend -----------------------------------------------------------------------------

sys.path.insert(0, str(REPO))
from tests.fakes.fake_pyhlml import FakeHlml  # noqa: E402


async def test_pyhlml_backend_maps_devices_and_throttle_bits():
    fake = FakeHlml()
    async with HpuSource(hlml=fake.module, hl_smi="/nonexistent/hl-smi") as src:
        snap = await src.sample()
    assert len(snap.devices) == 8 and snap.errors == ()
    d1 = snap.devices[1]
    assert d1.name == "Intel Gaudi 3 (HL-325L)" and d1.uuid == "01P4-HL3090A0-18-U4V193-22-07-01"
    assert d1.gpu_util_pct == 97 and d1.power_w == 612 and d1.power_limit_w == 850
    assert d1.mem_used_bytes == 98304 * MIB and d1.mem_total_bytes == 131072 * MIB
    assert d1.clock_event_reasons == 0x4 and d1.throttle_reasons == ("power_cap",)  # HLML power bit
    assert d1.slowdown_temp_c == 95 and d1.sm_clock_max_mhz == 1600
    assert snap.devices[3].ecc_corrected == 2


async def test_pyhlml_not_supported_is_learned_and_lost_aip_marked():
    fake = FakeHlml()
    fake.fail("hlmlDeviceGetPowerUsage", 3, device=2)  # HLML_ERROR_NOT_SUPPORTED
    async with HpuSource(hlml=fake.module) as src:
        for _ in range(3):
            snap = await src.sample()
        fake.fail("hlmlDeviceGetMemoryInfo", 15, device=5)  # HLML_ERROR_AIP_IS_LOST
        lost = await src.sample()
        again = await src.sample()
    assert fake.calls[("hlmlDeviceGetPowerUsage", 2)] == 1
    assert snap.devices[2].power_w is None and "power_w" in snap.devices[2].unsupported
    assert lost.devices[5].state == "lost" and again.devices[5].state == "lost"
    assert fake.calls[("hlmlDeviceGetMemoryInfo", 5)] == 4  # not polled after it was lost
    assert again.devices[4].state == "ok"


async def test_pyhlml_failing_to_init_falls_back_to_hl_smi(tmp_path):
    fake = FakeHlml(init_error=1)  # HLML_ERROR_UNINITIALIZED: libhlml.so missing
    async with HpuSource(hlml=fake.module, hl_smi=_fake_hl_smi(tmp_path, "gaudi2_na.csv")) as src:
        snap = await src.sample()
    assert len(snap.devices) == 2 and snap.devices[0].name == "Intel Gaudi 2 (HL-225)"
    with pytest.raises(SourceUnavailable, match="pyhlml could not initialise HLML"):
        await HpuSource(hlml=fake.module, backend="pyhlml").open()
