"""The fleet pane's side of bench_fleet.py: the real app (headless Textual) on a fleet source.

A ticker task on the app's event loop wakes every 2 ms and keeps the longest gap between its
wake-ups; each refresh ends when the fleet pane draws its view (``FleetScreen.view_ready``), so
"longest block per refresh" is the longest the UI could not answer a key during that refresh:
the source's read (a thread), the reading into history (the loop), the analysis (a thread, or the
loop with ``analysis_on_loop`` — the way before, for a side-by-side), the fleet view (a thread
worker) and drawing it (the loop: summary, grid, 512 node rows updated in place).

Two figures per block: wall time (what a user waits; on a loaded machine it also counts the time
the OS ran other processes and the time the loop waited for the GIL held by the app's own worker
threads) and the loop thread's own CPU time over the same gap (``time.thread_time()``: the work
done on the loop, whatever the load).

CPU per refresh here is ``time.process_time()`` of the whole app process over the measured
refreshes: source, engine, view and Textual's own work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AppRun:
    blocks_ms: list[float]  # longest event-loop block per refresh (wall)
    loop_cpu_ms: list[float]  # the loop thread's longest own CPU time between two wake-ups
    cpu_ms_per_refresh: float
    devices: int
    full_collections: int = 0  # full garbage collections the pane ran after its first view


def app_loop_blocks(make_source: Callable[[], object], refreshes: int, interval_s: float, *,
                    analysis_on_loop: bool = False, size: tuple[int, int] = (160, 50),
                    timeout_s: float = 300.0) -> AppRun:
    """Run the app on the fleet pane over ``make_source()`` for ``refreshes`` drawn views (after
    two to warm up) and measure its event loop."""
    from fleet_tui.core.monitor import windowing
    from fleet_tui.ui.launch import AppConfig, build_app

    policy_for = windowing.policy_for
    if analysis_on_loop:  # the previous way: the engine's analysis on the event loop
        def on_loop_policy(kind: str, window_s: float | None = None):
            policy = policy_for(kind, window_s)
            return (windowing.FleetWindowPolicy(seconds=policy.seconds, off_loop=False)
                    if isinstance(policy, windowing.FleetWindowPolicy) else policy)

        windowing.policy_for = on_loop_policy  # ui/monitor_link looks it up when it starts

    async def run() -> AppRun:
        source = make_source()
        app = build_app(AppConfig(source="sim:1", interval_s=interval_s), source=source,
                        source_spec=source.spec, start_mode="fleet")
        app.animation_level = "none"
        blocks: list[float] = []
        loop_cpu: list[float] = []
        gap = [0.0, 0.0]  # this refresh's longest (wall, loop-thread CPU) gap
        done = asyncio.Event()

        async def ticker() -> None:
            last, last_cpu = time.perf_counter(), time.thread_time()
            while not done.is_set():
                await asyncio.sleep(0.002)
                now, now_cpu = time.perf_counter(), time.thread_time()
                gap[0] = max(gap[0], now - last - 0.002)
                gap[1] = max(gap[1], now_cpu - last_cpu)
                last, last_cpu = now, now_cpu

        async with app.run_test(size=size):
            screen = app.screen
            task = asyncio.create_task(ticker())
            cpu0 = time.process_time()
            for i in range(refreshes + 2):
                screen.view_ready.clear()
                await asyncio.wait_for(screen.view_ready.wait(), timeout_s)
                if i == 1:  # warmed up: the catalog loaded, the first views built
                    cpu0 = time.process_time()
                elif i >= 2:
                    blocks.append(gap[0] * 1e3)
                    loop_cpu.append(gap[1] * 1e3)
                gap[:] = [0.0, 0.0]
            cpu = (time.process_time() - cpu0) / refreshes * 1e3
            devices = screen.view.device_count
            frozen = getattr(screen, "_frozen", None)  # ui.runtime.FrozenSurvivors
            full = frozen.full_collections - 1 if frozen is not None else 0
            done.set()
            await task
        return AppRun(blocks, loop_cpu, cpu, devices, full)

    try:
        return asyncio.run(run())
    finally:
        windowing.policy_for = policy_for
