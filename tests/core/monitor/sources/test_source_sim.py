"""SimSource: deterministic, labelled simulated, and covering the behaviours it promises."""

from __future__ import annotations

from fleet_tui.core.monitor.sources import open_source
from fleet_tui.core.monitor.sources.sim import BEHAVIOURS, SimSource


async def _run(src: SimSource, n: int):
    async with src:
        return [await src.sample() for _ in range(n)]


async def test_same_seed_same_sequence_other_seed_differs():
    a = await _run(SimSource(n=3, seed=7, start_time=0.0), 25)
    b = await _run(SimSource(n=3, seed=7, start_time=0.0), 25)
    c = await _run(SimSource(n=3, seed=8, start_time=0.0), 25)
    assert a == b
    assert a != c


async def test_time_comes_from_the_tick_counter_not_the_wall_clock():
    snaps = await _run(SimSource(n=1, start_time=100.0, interval_s=0.25), 5)
    assert [s.timestamp for s in snaps] == [100.0, 100.25, 100.5, 100.75, 101.0]


async def test_everything_is_labelled_simulated():
    src = open_source("sim:4")
    snaps = await _run(src, 2)
    assert src.name == "sim:4" and len(snaps[0].devices) == 4
    for s in snaps:
        assert s.source_kind == "simulated" and s.source == "sim:4"
        assert all("(simulated)" in d.name for d in s.devices)
        assert s.host is not None and len(s.host.cpu_per_core_pct) > 0


async def test_devices_cycle_through_every_behaviour_with_matching_signals():
    src = SimSource(n=1, phase_ticks=4, start_time=0.0)
    snaps = await _run(src, 4 * len(BEHAVIOURS))
    seen = {s.devices[0].phase: s.devices[0] for s in snaps}
    assert set(seen) == set(BEHAVIOURS)
    assert seen["idle"].processes == () and seen["idle"].gpu_util_pct == 0
    assert seen["power_capped"].clock_event_reasons & 0x4
    assert seen["power_capped"].power_w >= 0.95 * seen["power_capped"].power_limit_w
    no_tensor = seen["compute_no_tensor_cores"]
    assert no_tensor.tensor_active_pct == 0 and no_tensor.fp32_active_pct > 50
    assert seen["memory_bandwidth_bound"].dram_active_pct > 80
    assert seen["host_transfer_bound"].pcie_rx_bytes_s > 1e10 and seen["host_transfer_bound"].sm_active_pct < 1
    assert seen["launch_bound"].gpu_util_pct > 90 and seen["launch_bound"].sm_active_pct < 10
    assert seen["thermal_throttled"].temp_c > seen["thermal_throttled"].slowdown_temp_c
    growth = [s.devices[0].mem_used_bytes for s in snaps if s.devices[0].phase == "memory_growth"]
    assert growth == sorted(growth) and growth[-1] > growth[0]
    assert seen["healthy_compute"].processes and seen["healthy_compute"].processes[0].user == "sim"


async def test_simulated_time_follows_a_changed_interval_without_a_jump():
    src = SimSource(n=1, interval_s=1.0, start_time=100.0)
    first = [s.timestamp for s in await _run(src, 3)]
    src.set_interval(0.25)
    after = [s.timestamp for s in await _run(src, 3)]
    assert first == [100.0, 101.0, 102.0]
    assert after == [103.0, 103.25, 103.5]
