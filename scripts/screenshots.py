"""Render each pane of the app to ``screenshots/*.svg`` (shown in the README).

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--size 120x40]

Uses Textual's headless test driver (``App.run_test``) and ``export_screenshot``; fixed theme
(fleet-dark), no animations. The monitor replays the bundled H200 trace (``replay:demo``, sped up
to reach its busy phases) and every frame says REPLAY, so nobody takes it for live data.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def _wait(app, workers: list) -> None:
    """Wait for ``workers``. Textual's ``wait_for_complete([])`` waits for *every* worker, the
    never-ending monitor loop included, so an empty selection (those workers already done) must not
    reach it: that hung this script whenever the fleet-view worker finished before it was awaited."""
    if workers:
        await app.workers.wait_for_complete(workers)


async def _settle(app, pilot) -> None:
    for _ in range(4):
        await _wait(app, [w for w in app.workers if w.group != "monitor"])
        await pilot.pause()


def _args(**kw):
    """The app's config from flag-like names (``interval`` as the CLI spells it)."""
    from fleet_tui.ui.launch import AppConfig

    base = dict(source=None, instance=None, theme="dark", interval=None)
    base.update(kw)
    return AppConfig(source=base["source"], instance=base["instance"], theme=base["theme"],
                     interval_s=base["interval"])


def _write(app, out: Path, name: str, title: str) -> None:
    svg = app.export_screenshot(title=title)
    tmp = out / f".{name}.svg.tmp"
    tmp.write_text(svg, encoding="utf-8")
    os.replace(tmp, out / f"{name}.svg")
    print(out / f"{name}.svg")


async def shoot(out: Path, size: tuple[int, int]) -> None:
    from fleet_tui.ui.launch import build_app

    # Catalog, builder, recommendations and help: no monitor source needed.
    app = build_app(_args(), source=None, include_user_catalog=False)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await _settle(app, pilot)
        app.screen.query_one("#f-accelerator").value = "H100"
        await _settle(app, pilot)
        app.set_focus(None)
        _write(app, out, "catalog", "fleet-tui: catalog (H100 offers by $/GPU-hour)")
        await pilot.press("2")
        await _settle(app, pilot)
        screen = app.screen
        screen.query_one("#b-kind").value = "lora"
        screen.query_one("#b-model").value = "llama-3.1-70b"
        screen.query_one("#b-accel").value = "L40S"
        screen.query_one("#b-batch").value = "4"
        await _settle(app, pilot)
        app.set_focus(None)
        _write(app, out, "builder", "fleet-tui: workload builder (LoRA of Llama-3.1-70B on L40S)")
        await pilot.press("4")
        await _settle(app, pilot)
        await _settle(app, pilot)
        _write(app, out, "recommend", "fleet-tui: recommendations")
        await pilot.press("question_mark")
        await pilot.pause()
        _write(app, out, "help", "fleet-tui: keys")

    # Monitor: the bundled H200 recording, replayed 20x so the busy phases show up.
    # priced as a one-H200 cloud instance so the cost meter has something to show
    app = build_app(_args(source="replay:demo@20", interval=0.25,
                          instance="gpu-h200-sxm_1gpu-16vcpu-200gb"), include_user_catalog=False)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        for _ in range(200):  # until the trace reaches a throttled, busy phase
            latest = app.monitor.latest if app.monitor else None
            if latest is not None and latest.diagnoses and any(
                    d.phase not in (None, "idle") for d in latest.snapshot.devices):
                if latest.snapshot.devices[0].phase == "compute_bound":
                    break
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        app.monitor.redraw_now()
        await pilot.pause()
        _write(app, out, "monitor", "fleet-tui: monitor — REPLAY of a recorded H200 trace")

    # Fleet: a simulated 12-node × 8-GPU fleet (test data; real fleets come from prometheus:URL).
    from tests.ui.fleet_fake import SimFleetSource

    source = SimFleetSource(nodes=12, devices_per_node=8)
    app = build_app(_args(source="sim:1", interval=0.25, instance="p5.48xlarge"), source=source,
                    source_spec=source.name,
                    start_mode="fleet", include_user_catalog=False)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        for _ in range(200):
            if app.screen.view is not None and app.monitor.latest.tick.seq >= 8:
                break
            await pilot.pause(0.05)
        await _wait(app, [w for w in app.workers if w.group == "fleet-view"])
        await pilot.pause()
        _write(app, out, "fleet", "fleet-tui: fleet pane — SIMULATED 12 × 8 fleet (test data)")
        # Queue what-if: a small job list replayed under the five policies (made here, like
        # the README's own example)
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)  # the status line shows the path as typed: jobs.csv
            try:
                Path("jobs.csv").write_text("job,user,submit_s,run_s,gpus\n" + "".join(
                    f"{i},{('alice', 'bob', 'carol')[i % 3]},{i * 60},{600 + (i * 997) % 3000},"
                    f"{(4, 8, 16)[i % 3]}\n" for i in range(1, 41)), encoding="utf-8")
                await pilot.press("8")
                await _settle(app, pilot)
                app.screen.query_one("#q-file").value = "jobs.csv"
                app.screen.action_simulate()
                await _wait(app, [w for w in app.workers if w.group == "queue"])
                app.set_focus(None)
                await pilot.pause(0.3)
            finally:
                os.chdir(here)
        _write(app, out, "queue", "fleet-tui: queue what-if — 40 jobs under five policies")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--size", default="120x40")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_CONFIG_HOME", str(out / ".no-user-config"))
    asyncio.run(shoot(out, (width, height)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
