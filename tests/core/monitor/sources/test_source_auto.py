"""auto: nvml, then hpu, then neuron; otherwise a no-device state that says why (never simulated)."""

from __future__ import annotations

import sys

import pynvml as real

from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources import open_source
from fleet_tui.core.monitor.sources.auto import AutoSource
from tests.paths import REPO

# `tests.fakes` must import under plain `pytest` too (python -m pytest puts the root on sys.path)
sys.path.insert(0, str(REPO))
from tests.fakes.fake_pynvml import FakeNvml


class _Stub(Source):
    def __init__(self, label: str, tried: list[str], fail: str | None = None) -> None:
        self.label, self.tried, self.fail = label, tried, fail
        self.name = label

    async def open(self) -> None:
        self.tried.append(self.label)
        if self.fail:
            raise SourceUnavailable(self.fail)

    async def sample(self):  # pragma: no cover - not sampled in these tests
        raise AssertionError


async def test_order_is_nvml_then_hpu_then_neuron_and_stops_at_the_first_that_works():
    tried: list[str] = []
    src = AutoSource(candidates=[
        ("nvml", lambda: _Stub("nvml", tried, fail="NVML library not found")),
        ("hpu", lambda: _Stub("hpu", tried)),
        ("neuron", lambda: _Stub("neuron", tried)),
    ])
    await src.open()
    assert tried == ["nvml", "hpu"] and src.chosen == "hpu" and src.name == "hpu"
    assert src.reasons == ["nvml: NVML library not found"]


async def test_nothing_found_gives_a_no_device_state_naming_every_reason(monkeypatch, tmp_path):
    fake = FakeNvml.h200(devices=1, init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    monkeypatch.setenv("PATH", str(tmp_path))  # no hl-smi, no neuron-monitor
    src = open_source("auto")
    async with src:
        assert await src.prime() is False  # nothing to wait for
        snap = await src.sample()
    assert src.chosen == "none"
    assert snap.source_kind == "none" and snap.devices == ()
    msg = snap.message
    assert msg.startswith("no accelerator found: ")
    assert "nvml: NVML library not found: is the NVIDIA driver installed?" in msg
    assert "hpu: hl-smi not found" in msg and "neuron: neuron-monitor not found" in msg
    assert msg.index("nvml:") < msg.index("hpu:") < msg.index("neuron:")
    assert "simulated" not in msg


async def test_auto_picks_nvml_when_a_gpu_answers(monkeypatch):
    fake = FakeNvml.h200(devices=2)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    async with open_source("auto", xid_events=False) as src:
        primed = await src.prime()  # monitor --once: the GPM interval's start goes to NVML
        fake.advance()
        snap = await src.sample()
    assert src.chosen == "nvml" and snap.source == "nvml" and len(snap.devices) == 2
    assert snap.devices[0].name == "NVIDIA H200"
    assert primed and snap.devices[0].sm_active_pct is not None
