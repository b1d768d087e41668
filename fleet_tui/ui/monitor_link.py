"""Glue between the core's MonitorEngine and the panes.

The engine (``fleet_tui.core.monitor.engine``) samples, keeps history, analyses and raises alerts;
this link only runs it on the app's event loop, keeps the latest immutable tick, turns new alerts
into notifications, keeps the status line honest, and asks the visible pane to redraw at most
``MAX_REDRAWS_PER_S`` times a second (faster ticks coalesce to the latest one). A hidden pane is
not called at all; when it is shown again it redraws from the latest tick and the core's history.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.app import ScreenStackError

from fleet_tui.core.monitor.history import metric_value
from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.records import record
from fleet_tui.ui.widgets.severity import toast_level

if TYPE_CHECKING:  # for the checker only: the engine loads after the first frame (start-up time)
    from fleet_tui.core.monitor.alerts import Alert
    from fleet_tui.core.monitor.cost import CostState
    from fleet_tui.core.monitor.engine import Finding, MonitorEngine, Tick
    from fleet_tui.core.monitor.history import History
    from fleet_tui.core.monitor.recorder import Recorder
    from fleet_tui.core.monitor.source import Source
    from fleet_tui.ui.host import AppHost

# At most two redraws a second: faster ticks (0.25 s) coalesce to the latest one. At four a
# second, drawing was ~2/3 of the app's CPU at 0.25 s (bench/bench_monitor_cpu.py); the engine
# still samples, analyses and records every tick.
MAX_REDRAWS_PER_S = 2.0
INTERVAL_STEPS_S = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class HistoryReader(Protocol):
    def __call__(self, key: str, metric: str, last: int | None = None) -> Sequence[float] | None:
        """The device's ``metric`` history, oldest first (``last``: only the newest points; None:
        not kept)."""
        ...


def _no_history(key: str, metric: str, last: int | None = None) -> Sequence[float] | None:
    return None


@record
class MonitorView:
    """What the monitor and fleet panes draw: one tick of the engine, read-only."""

    tick: Tick  # the engine's tick (fleet roll-ups read its analyses)
    # (key, metric, last=None): the metric's history, oldest first; ``last``: only the newest points
    history: HistoryReader = _no_history

    @property
    def snapshot(self) -> Snapshot:
        return self.tick.snapshot

    @property
    def cost(self) -> CostState | None:
        """The machine's cost so far, as numbers (None: not priced)."""
        return self.tick.cost

    @property
    def diagnoses(self) -> tuple[Finding, ...]:
        """The tick's findings, built when read (the monitor pane, once per draw): at 4,096 GPUs
        they were built twice on every tick, on the event loop, for panes that never read them."""
        return self.tick.diagnoses

    def util_history(self, key: str) -> Sequence[float] | None:
        return self.history(key, "gpu_util_pct")


def _newest(store: History, key: str, metric: str, last: int) -> list[float]:
    """The newest ``last`` values of ``metric`` (N/A skipped, as ``History.series``), oldest first.
    A card's graph shows ~72; the whole series is 2,400 samples after 10 min at 0.25 s and took
    ~0.9 ms a graph a draw to build."""
    out: list[float] = []
    for sample in reversed(store.samples(key)):
        value = metric_value(sample, metric)
        if value is not None:
            out.append(value)
            if len(out) >= last:
                break
    out.reverse()
    return out


@runtime_checkable
class DrawsMonitor(Protocol):
    """A pane that draws the monitor's ticks (Monitor, Fleet): the link calls the visible one."""

    def redraw(self, view: MonitorView) -> None: ...


class MonitorLink:
    def __init__(self, app: AppHost, source: Source, interval_s: float) -> None:
        self.app = app
        self.source = source
        self.interval_s = interval_s
        self.paused = False
        self.focus_key: str | None = None
        self.latest: MonitorView | None = None
        self.engine: MonitorEngine | None = None
        self._last_draw = 0.0
        self._draw_pending = False
        # This session's samples go to a temporary SQLite file (the core's Recorder) so the
        # Recommendations pane can right-size from what was observed; removed on exit.
        self.session_dir: str | None = None
        self.recorder: Recorder | None = None
        self._retention_shape: tuple[int, float] | None = None

    # ----- lifecycle -----
    def start(self) -> None:
        self.app.run_worker(self._run(), group="monitor", name="monitor engine", exit_on_error=False)

    @property
    def session_db(self) -> Path | None:
        """The history database this session writes (``--record`` or the temporary one)."""
        if self.app.record_db is not None and self.recorder is not None:
            return self.app.record_db
        return Path(self.session_dir) / "session.db" if self.session_dir else None

    async def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.close()
        self.remove_session()

    def remove_session(self) -> None:
        """Delete the temporary session history now (also called from the SIGHUP/SIGTERM
        handler, before the app tries to restore a terminal that may be gone)."""
        from fleet_tui.core.monitor.session import remove_session_dir

        session_dir, self.session_dir = self.session_dir, None
        remove_session_dir(session_dir)

    async def _open_recorder(self) -> Recorder | None:
        """The recorder for this session: the ``--record`` database when given (kept), else a
        temporary SQLite file (removed on exit) so the Recommendations pane can right-size from
        what was observed. None for a fleet: its history lives in Prometheus."""
        from fleet_tui.core.monitor.recorder import Recorder

        if self.source.kind == "fleet":
            return None
        if self.app.record_db is not None:
            # an unwritable --record path is reported by the engine's failure path below
            return await asyncio.to_thread(Recorder, self.app.record_db)
        from fleet_tui.core.monitor.session import SessionRecorder, clean_stale_sessions, create_session_dir

        try:
            await asyncio.to_thread(clean_stale_sessions)  # folders of crashed runs
            self.session_dir = str(create_session_dir())
            return await asyncio.to_thread(SessionRecorder, Path(self.session_dir) / "session.db")
        except Exception:  # no right-sizing then; monitoring goes on
            self.remove_session()
            return None

    def _fit_session_retention(self, devices: int) -> None:
        """Keep the temporary history under its size cap for this device count and interval."""
        shape = (devices, self.interval_s)
        if self.recorder is None or self.session_dir is None or shape == self._retention_shape:
            return
        from fleet_tui.core.monitor.session import session_retention

        self._retention_shape = shape
        self.recorder.set_retention(*session_retention(devices, self.interval_s))

    async def _run(self) -> None:
        from fleet_tui.core.monitor.engine import MonitorEngine
        from fleet_tui.core.monitor.windowing import policy_for

        try:
            # The engine prices this machine from the catalog; wait for the app's load (a thread)
            # rather than let the engine load it again on the event loop.
            await self.app.catalog_settled.wait()
            self.recorder = await self._open_recorder()
            # a fleet gets the fleet windowing (as `fleet`, `export`), this box the 5 s window
            engine = self.engine = MonitorEngine(
                self.source, interval_s=self.interval_s, instance=self.app.priced_instance(),
                catalog=self.app.catalog, recorder=self.recorder, policy=policy_for(self.source.kind))
            engine.subscribe(self._on_tick)
            await engine.run()
        except Exception as exc:  # a source that fails must not take the app down
            self._report_failure(exc)

    def _report_failure(self, exc: Exception) -> None:
        from fleet_tui.core.errors import UserError

        text = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        self.app.source_status = replace(self.app.source_status, kind="none", message=text)
        self.app.notify(text, title="Monitor stopped", severity="error", timeout=15)

    # ----- ticks -----
    def _on_tick(self, tick: Tick) -> None:
        self._publish(self._view_of(tick))

    def _view_of(self, tick: Tick) -> MonitorView:
        store = self.engine.history if self.engine is not None else None

        def history(key: str, metric: str, last: int | None = None) -> Sequence[float] | None:
            if store is None:
                return None
            try:
                return store.series(key, metric) if last is None else _newest(store, key, metric,
                                                                              last)
            except KeyError:
                return None

        if tick.new_alerts:
            self._notify_alerts(tick.new_alerts)
        return MonitorView(tick=tick, history=history)

    def _notify_alerts(self, alerts: Sequence[Alert]) -> None:
        """One tick's new alerts as notifications, grouped (``core.monitor.alert_notices``)."""
        from fleet_tui.core.monitor.alert_notices import alert_notices

        for notice in alert_notices(alerts):
            self.app.notify(notice.message, title=notice.title,
                            severity=toast_level(notice.severity), timeout=8)

    def _publish(self, view: MonitorView) -> None:
        self.latest = view
        snap = view.snapshot
        self._fit_session_retention(len(snap.devices))
        status = self.app.source_status
        new = replace(status, kind=snap.source_kind, devices=len(snap.devices),
                      message=snap.message, paused=self.paused, interval_s=self.interval_s,
                      ended=self.ended)
        if new != status:
            self.app.source_status = new
            if new.ended != status.ended:
                self.app.refresh_bindings()  # the monitor's restart key comes and goes
        self._schedule_draw()

    def _schedule_draw(self) -> None:
        if self._draw_pending:
            return  # a draw is already queued; it will use the latest view
        wait = self._last_draw + 1.0 / MAX_REDRAWS_PER_S - time.monotonic()
        self._draw_pending = True
        if wait > 0:
            self.app.set_timer(wait, self._draw)
        else:
            self.app.call_later(self._draw)

    def _draw(self) -> None:
        self._draw_pending = False
        self._last_draw = time.monotonic()
        view = self.latest
        try:
            screen = self.app.screen
        except ScreenStackError:  # the app is shutting down
            return
        if not screen.is_attached or not screen.display:
            return  # exiting, or the screen is being taken down: its widgets may be gone
        if view is not None and isinstance(screen, DrawsMonitor):  # only the visible pane draws
            screen.redraw(view)

    def redraw_now(self) -> None:
        if self.latest is not None:
            self._draw_pending = False
            self._draw()

    @property
    def ended(self) -> bool:
        """A replay that played to its end (a live source never ends)."""
        return bool(getattr(self.source, "ended", False))

    async def restart(self) -> None:
        """Play an ended replay again: a fresh source from the same spec, a fresh engine and
        session history (the old samples would repeat the same timestamps)."""
        from fleet_tui.core.monitor.sources import open_source

        spec = self.app.source_spec
        if spec is None:  # a source handed in as an object (a script's) has no spec to open again
            return
        await self.stop()
        self.source = open_source(spec)  # a replay: nothing to probe
        self.app.source = self.source
        self.latest = None
        self._retention_shape = None
        self.app.source_status = replace(self.app.source_status, ended=False)
        self.app.refresh_bindings()
        self.start()

    # ----- controls -----
    def toggle_pause(self) -> None:
        self.paused = not self.paused
        engine = self.engine
        if engine is not None:
            (engine.pause if self.paused else engine.resume)()
        self.app.source_status = replace(self.app.source_status, paused=self.paused)
        self.app.notify("Monitor paused" if self.paused else "Monitor resumed", timeout=2)

    def step_interval(self, direction: int) -> None:
        steps = INTERVAL_STEPS_S
        current = min(range(len(steps)), key=lambda i: abs(steps[i] - self.interval_s))
        new = steps[min(max(current + direction, 0), len(steps) - 1)]
        if new == self.interval_s:
            return
        self.interval_s = new
        if self.engine is not None:
            self.engine.set_interval(new)
        self.app.source_status = replace(self.app.source_status, interval_s=new)

    def set_focus(self, key: str | None) -> None:
        self.focus_key = key
        if self.engine is not None:
            self.engine.set_focus(key)

