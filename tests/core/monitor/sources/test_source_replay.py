"""ReplaySource: follows the file's timestamps at real time x speed, carries phases, ends or loops."""

from __future__ import annotations

import dataclasses
import json

from fleet_tui.core.monitor.sources import open_source
from fleet_tui.core.monitor.sources.replay import ReplaySource
from fleet_tui.core.monitor.trace import load_trace, write_recording


class FakeClock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


async def test_demo_replay_follows_trace_time_times_speed():
    clock = FakeClock()
    src = open_source("replay:demo@10", clock=clock)
    async with src:
        first = await src.sample()
        clock.t += 1.0  # 1 s of wall clock = 10 s of trace at speed 10
        later = await src.sample()
        clock.t += 2.5
        third = await src.sample()
    assert src.name == "replay:demo"
    assert first.source_kind == later.source_kind == "replay"
    assert first.timestamp == 0.0 and first.devices[0].phase == "idle"
    assert later.timestamp == 10.0 and later.devices[0].phase == "compute_bound"
    assert third.timestamp == 35.0 and third.devices[0].phase == "input_starved"
    assert third.devices[0].gpm_supported is not False and third.devices[0].sm_active_pct is not None


async def test_end_of_file_stays_on_the_last_snapshot_with_a_message(tmp_path):
    clock = FakeClock()
    snaps = load_trace("demo")[:5]
    path = write_recording(tmp_path / "rec.jsonl", snaps)
    src = ReplaySource(path, speed=1000, clock=clock)
    async with src:
        await src.sample()
        clock.t += 10
        end1 = await src.sample()
        clock.t += 10
        end2 = await src.sample()
    assert end1.timestamp == end2.timestamp == snaps[-1].timestamp
    assert "end of recording" in end2.message
    assert end2.devices[0].phase == snaps[-1].devices[0].phase


async def test_loop_restarts_and_time_keeps_moving_forward(tmp_path):
    clock = FakeClock()
    snaps = [dataclasses.replace(s, timestamp=i * 0.25) for i, s in enumerate(load_trace("demo")[:5])]
    path = write_recording(tmp_path / "rec.jsonl", snaps)
    src = ReplaySource(path, speed=1.0, loop=True, clock=clock)
    seen = []
    async with src:
        for _ in range(14):
            seen.append(await src.sample())
            clock.t += 0.25
    stamps = [s.timestamp for s in seen]
    assert src.loops >= 2
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(s.message is None or "end of recording" not in s.message for s in seen)


async def test_recordings_of_live_sources_are_presented_as_replays(tmp_path):
    raw = load_trace("demo")[0]
    live = dataclasses.replace(raw, source="nvml", source_kind="live")
    path = write_recording(tmp_path / "live.jsonl", [live])
    async with ReplaySource(path) as src:
        snap = await src.sample()
    assert snap.source_kind == "replay" and snap.source == "replay:live.jsonl"
    assert "nvml" in snap.message
    assert json.loads(path.read_text().splitlines()[-1])  # file untouched and valid
