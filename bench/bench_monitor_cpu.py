"""CPU of the monitor pane next to a bare Textual app, measured in the same run.

Run: .venv/bin/python bench/bench_monitor_cpu.py [--window 15] [--warmup 4] [--size 120x40]

Each program runs in its own tmux pane (a real terminal, so painting and writing the output count);
after a warm-up the process's user+system CPU time is read from /proc over the window and given as
% of one core. The floor is a bare Textual app that updates a clock every second (the cheapest a
Textual app that shows something live can be). Runs alternate floor and monitor so machine noise
hits both; the ratio to the floor is the number to compare across machines.

Goal: monitor pane at 1 s <= 3x the floor, at 0.25 s <= 8x.

``--cases`` takes SOURCE@INTERVAL items: ``8@1`` or ``sim:8@1`` (simulated GPUs), ``nvml@1`` (the
GPUs of this machine) and ``nvitop@1`` (nvitop, ``python -m nvitop --interval 1``, on the same GPUs:
the reference the issue compares with), each measured beside its own floor round.

``--profile 8,64`` instead replays recorded ticks of the pane headless (no terminal, in this
process) and reports, per steady tick: CPU of the pane's redraw and of Textual's compositor, the
widgets and regions refreshed, whether anything was laid out, and (``--cprofile FILE``) a cProfile
of those ticks. Replaying the same recorded ticks makes before/after comparisons on a loaded
machine steadier than the tmux runs. ``--gc 8@1`` reports the garbage collector's runs and CPU
over ``--window`` seconds of a headless run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_app import Tmux, cpu_percent_then_quit, exit_on_sigterm  # noqa: E402

FLOOR_APP = """
from datetime import datetime
from textual.app import App
from textual.widgets import Static

class Clock(App):
    def compose(self):
        yield Static(id="clock")
    def on_mount(self):
        self.tick()
        self.set_interval(1.0, self.tick)
    def tick(self):
        self.query_one("#clock", Static).update(datetime.now().strftime("%H:%M:%S"))

Clock().run()
"""

CASES = [(1, 1.0), (8, 1.0), (64, 1.0), (1, 0.25), (8, 0.25), (64, 0.25)]


def case_source(text: str) -> str:
    """``8`` or ``sim:8`` -> ``sim:8``; ``nvml`` (a real GPU); ``nvitop`` (the reference tool,
    ``python -m nvitop``, on the same GPUs)."""
    text = text.strip()
    if text.isdigit():
        return f"sim:{text}"
    if text in ("nvml", "nvitop") or (text.startswith("sim:") and text[4:].isdigit()):
        return text
    raise SystemExit(f"--cases: {text!r} is not N, sim:N, nvml or nvitop")


def case_argv(source: str, interval: float) -> tuple[list[str], str | tuple[str, ...]]:
    """The command of a case and the text its screen shows once it is up."""
    if source == "nvitop":  # its header, nvidia-smi's: "NVITOP 1.x ... Driver Version: ..."
        return [sys.executable, "-m", "nvitop", "--interval", f"{interval:g}"], ("NVITOP", "Driver")
    ready = "SIMULATED" if source.startswith("sim:") else "LIVE"
    return [sys.executable, "-m", "fleet_tui", "--source", source,
            "--interval", f"{interval:g}"], ready


def measure(argv: list[str], ready: str | tuple[str, ...], warmup_s: float, window_s: float,
            size: tuple[int, int]) -> float:
    """% of a core over ``window_s`` once the screen shows ``ready`` (or any of several)."""
    marks = (ready,) if isinstance(ready, str) else ready
    tmux = Tmux()
    try:
        tmux.start(argv)
        tmux("resize-window", "-t", tmux.name, "-x", str(size[0]), "-y", str(size[1]))
        deadline = time.monotonic() + 30
        while not any(m in tmux.screen() for m in marks):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv} never showed {ready!r}:\n{tmux.screen()}")
            time.sleep(0.05)
        return cpu_percent_then_quit(tmux, warmup_s, window_s)
    finally:
        tmux.close()


async def profile_ticks(devices: int, size: tuple[int, int], ticks: int = 40,
                        cprofile: str | None = None) -> dict[str, float]:
    """Per steady tick of the monitor pane: redraw and compositor CPU (ms), widgets and regions
    refreshed, layouts. Records ``ticks`` ticks of ``sim:devices``, then replays them."""
    import collections
    import cProfile

    from textual._compositor import Compositor
    from textual.screen import Screen
    from textual.widget import Widget

    from fleet_tui.ui.launch import AppConfig, build_app

    app = build_app(AppConfig(source=f"sim:{devices}", interval_s=0.25))
    app.animation_level = "none"
    counts: collections.Counter = collections.Counter()
    times: collections.Counter = collections.Counter()
    widget_refresh, screen_layout = Widget.refresh, Screen._refresh_layout
    paint = Compositor.render_update

    def counting_refresh(widget, *regions, **kwargs):
        counts["widgets"] += 1
        counts["regions"] += len(regions) or 1
        counts["layouts"] += bool(kwargs.get("layout"))
        return widget_refresh(widget, *regions, **kwargs)

    def counting_layout(screen, *args, **kwargs):
        counts["screen layouts"] += 1
        t0 = time.process_time()
        try:
            return screen_layout(screen, *args, **kwargs)
        finally:
            times["layout"] += time.process_time() - t0

    def timed_paint(compositor, *args, **kwargs):
        t0 = time.process_time()
        try:
            return paint(compositor, *args, **kwargs)
        finally:
            times["paint"] += time.process_time() - t0

    async with app.run_test(size=size) as pilot:
        views = []
        while len(views) < ticks + 4:  # the first few ticks fill the history and the layout
            latest = app.monitor.latest
            if latest is not None and (not views or views[-1] is not latest):
                views.append(latest)
            await pilot.pause(0.05)
        app.monitor.toggle_pause()
        screen = app.screen
        for view in views[:4]:
            screen.redraw(view)
            await pilot.pause()
        Widget.refresh, Screen._refresh_layout = counting_refresh, counting_layout
        Compositor.render_update = timed_paint
        profiler = cProfile.Profile() if cprofile else None
        redraw_s = 0.0
        try:
            if profiler:
                profiler.enable()
            for view in views[4:]:
                t0 = time.process_time()
                screen.redraw(view)
                redraw_s += time.process_time() - t0
                await pilot.pause()  # the widgets post their updates and the frame is painted
        finally:
            Widget.refresh, Screen._refresh_layout = widget_refresh, screen_layout
            Compositor.render_update = paint
            if profiler:
                profiler.disable()
                profiler.dump_stats(cprofile)
    n = len(views) - 4
    return {"redraw ms": redraw_s / n * 1e3, "paint ms": times["paint"] / n * 1e3,
            "layout ms": times["layout"] / n * 1e3, **{k: v / n for k, v in counts.items()}}


async def gc_cost(devices: int, size: tuple[int, int], interval_s: float,
                  window_s: float) -> dict[str, float]:
    """Python's garbage collector while the pane runs headless in real time: collections a
    second and ms a second per generation, after a warm-up (the app freezes its startup objects
    at the first tick; a full collection that walks them took ~50 ms)."""
    import collections
    import gc

    from fleet_tui.ui.launch import AppConfig, build_app

    spent: collections.Counter = collections.Counter()
    runs: collections.Counter = collections.Counter()
    started: list[float] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.process_time())
        elif started:
            spent[info["generation"]] += time.process_time() - started.pop()
            runs[info["generation"]] += 1

    app = build_app(AppConfig(source=f"sim:{devices}", interval_s=interval_s))
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.pause(5.0)
        gc.callbacks.append(callback)
        try:
            await pilot.pause(window_s)
        finally:
            gc.callbacks.remove(callback)
    return {f"gen{g} {k}": v / window_s * (1e3 if k == "ms/s" else 1)
            for g in range(3) for k, v in (("runs/s", runs[g]), ("ms/s", spent[g]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=15.0, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--size", default="120x40", help="terminal size, e.g. 80x24")
    parser.add_argument("--cases", default="", help="e.g. 8@1,64@0.25,nvml@1,nvitop@1 (default: the six sim cases)")
    parser.add_argument("--profile", default="", help="e.g. 8,64: per-tick profile, headless")
    parser.add_argument("--cprofile", default=None, help="with --profile: write a cProfile here")
    parser.add_argument("--gc", default="", help="e.g. 8@1,8@0.25: garbage collector cost, headless")
    parser.add_argument("--baseline", default=None,
                        help="another checkout (e.g. `git archive REV | tar -x -C DIR`) whose "
                             "monitor is measured in the same rounds, for before/after ratios")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    if args.profile:
        import asyncio

        load = os.getloadavg()[0]
        for devices in (int(d) for d in args.profile.split(",")):
            stats = asyncio.run(profile_ticks(devices, size, cprofile=args.cprofile))
            print(f"sim:{devices:<3} {size[0]}x{size[1]} per tick: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in stats.items())
                  + f"  (loaded, load avg {load:.1f})")
        return
    if args.gc:
        import asyncio

        for devices, interval in (c.split("@") for c in args.gc.split(",")):
            stats = asyncio.run(gc_cost(int(devices), size, float(interval), args.window))
            print(f"sim:{devices:<3} every {interval} s, GC: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in stats.items())
                  + f"  (loaded, load avg {os.getloadavg()[0]:.1f})")
        return
    cases = [(f"sim:{d}", i) for d, i in CASES]
    if args.cases:
        cases = [(case_source(s), float(i)) for s, i in (c.split("@") for c in args.cases.split(","))]
    floor_argv = [sys.executable, "-c", FLOOR_APP]
    floors: list[float] = []
    rows = []
    for source, interval in cases:
        floors.append(measure(floor_argv, ":", args.warmup, args.window, size))
        argv, ready = case_argv(source, interval)
        try:
            cpu = measure(argv, ready, args.warmup, args.window, size)
        except RuntimeError as exc:  # one case that cannot start does not lose the others
            print(f"  {source:<7} every {interval:<4g} s: did not start: {exc}", flush=True)
            continue
        before = None
        if args.baseline and source != "nvitop":  # the other checkout's app (its PYTHONPATH first)
            path = os.pathsep.join(p for p in (args.baseline, os.environ.get("PYTHONPATH", ""))
                                   if p)
            before = measure(["env", f"PYTHONPATH={path}", *argv], ready,
                             args.warmup, args.window, size)
        rows.append((source, interval, cpu, before))
        print(f"  {source:<7} every {interval:<4g} s: {cpu:5.2f} % of a core "
              + (f"(baseline {before:.2f} %) " if before is not None else "")
              + f"(floor this round {floors[-1]:.2f} %)", flush=True)
    floor = statistics.median(floors)
    print(f"\nbare Textual clock app (floor), median of {len(floors)}: {floor:.2f} % of a core"
          f" (load avg {os.getloadavg()[0]:.1f} at the end)")
    print(f"{'source':<8} {'interval':>8} {'CPU %':>7} {'x floor':>8} {'goal':>6}"
          + (f" {'baseline x floor':>17}" if args.baseline else ""))
    for source, interval, cpu, before in rows:
        goal = 3 if interval >= 1 else 8
        ratio = cpu / floor if floor > 0 else float("inf")
        print(f"{source:<8} {interval:>7g}s {cpu:>7.2f} {ratio:>7.1f}x {'<=' + str(goal) + 'x':>6}"
              + (f" {before / floor if floor > 0 else float('inf'):>16.1f}x"
                 if before is not None else "")
              + f"{'' if ratio <= goal else '  (over)'}")
    print(f"terminal {size[0]}x{size[1]}, {args.window:g} s windows after {args.warmup:g} s warm-up")


if __name__ == "__main__":
    exit_on_sigterm()
    main()
