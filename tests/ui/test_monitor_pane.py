"""Monitor pane over the deterministic simulator and the bundled H200 replay."""

from __future__ import annotations

from fleet_tui.ui.widgets.chrome import StatusLine
from fleet_tui.ui.widgets.device_card import DeviceCard
from fleet_tui.ui.widgets.process_table import ProcessTable
from tests.ui.conftest import wait_for


async def test_cards_per_device_and_simulated_label(make_app):
    app = make_app(source="sim:3", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.current_mode == "monitor"
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 3, "three device cards")
        status = str(app.screen.query_one(StatusLine).render())
        assert "SIMULATED" in status and "LIVE" not in status
        procs = app.screen.query_one("#procs", ProcessTable)
        await wait_for(pilot, lambda: procs.row_count == sum(
            len(d.processes) for d in app.monitor.latest.snapshot.devices), "process rows")
        assert procs.row_count > 0  # the simulator's busy devices hold processes


async def test_cards_graph_the_newest_points_of_the_history(make_app):
    # a card asks for as many points as its graph has cells, not the whole session's history
    app = make_app(source="sim:2", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None and len(
            app.monitor.latest.history(app.monitor.latest.snapshot.devices[0].key,
                                       "gpu_util_pct") or ()) >= 6, "six samples")
        view = app.monitor.latest
        for dev in view.snapshot.devices:
            for metric in ("gpu_util_pct", "mem_used_bytes", "power_w"):
                whole = list(view.history(dev.key, metric))
                for last in (1, 3, len(whole), len(whole) + 5):
                    assert view.history(dev.key, metric, last=last) == whole[-last:]
        assert view.history("no-such-device", "gpu_util_pct", last=3) in (None, [])


async def test_pause_interval_and_focus(make_app):
    app = make_app(source="sim:2", interval=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 2, "cards")
        await pilot.press("p")
        assert app.source_status.paused is True
        await pilot.press("p")
        assert app.source_status.paused is False
        await pilot.press("minus")
        assert app.source_status.interval_s == 2.0
        await pilot.press("plus")
        await pilot.press("plus")
        assert app.source_status.interval_s == 0.5
        await pilot.press("f")
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 1, "one focused card")
        assert app.screen.query_one(DeviceCard).has_class("-detailed")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 2, "all cards back")


async def test_simulated_time_runs_at_the_apps_interval(make_app):
    """--source sim:N --interval 0.25: readings 0.25 s apart in simulated time, as in `monitor`
    (the app's simulator once ran at its default 1 s a reading whatever the interval, so its
    clock ran four times faster than the wall's and every 5 s window held 5 readings, not 20)."""
    app = make_app(source="sim:1", interval=0.25)
    stamps = []
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.monitor.engine is not None, "engine")
        app.monitor.engine.subscribe(lambda tick: stamps.append(tick.snapshot.timestamp))
        await wait_for(pilot, lambda: len(stamps) >= 3, "three readings")
    assert [round(b - a, 6) for a, b in zip(stamps, stamps[1:])][:2] == [0.25, 0.25]


async def test_hidden_pane_does_not_draw_and_catches_up(make_app):
    app = make_app(source="sim:2", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None, "first tick")
        monitor_screen = app.screen
        calls = []
        original = monitor_screen.redraw
        monitor_screen.redraw = lambda view: (calls.append(view), original(view))
        await pilot.press("1")
        # a draw may land while the switch is still under way; from when it is done, none may
        await wait_for(pilot, lambda: app.screen is not monitor_screen, "the catalog pane shown")
        calls.clear()
        first = app.monitor.latest
        await wait_for(pilot, lambda: app.monitor.latest is not first, "ticks while hidden")
        await wait_for(pilot, lambda: app.monitor.latest.tick.seq >= first.tick.seq + 2,
                       "more ticks while hidden")
        assert calls == []  # hidden: no drawing at all
        at_switch = app.monitor.latest
        await pilot.press("3")
        await wait_for(pilot, lambda: calls, "a draw on return")
        # drawn on return, from a tick no older than the newest one at the time of switching
        assert calls[0].snapshot.timestamp >= at_switch.snapshot.timestamp


async def test_replay_is_labelled_as_replay(make_app):
    app = make_app(source="replay:demo", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.source_status.kind == "replay", "replay status")
        status = str(app.screen.query_one(StatusLine).render())
        assert "REPLAY" in status and "LIVE" not in status
        await wait_for(pilot, lambda: "REPLAY" in str(app.screen.query_one("#mon-message").render()),
                       "replay banner")
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 1, "the H200 card")
        assert "H200" in app.screen.query_one(DeviceCard)._last_markup


async def test_no_draw_once_the_app_is_exiting(make_app):
    """A draw queued by the last tick can fire while the app takes its screens down (run_test's
    exit in CI: ``query_one('#cards')`` found no cards); once exiting, nothing is drawn."""
    app = make_app(source="sim:1", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 1, "a card")
        screen, drawn = app.screen, []
        screen.redraw = lambda view: drawn.append(view)
        app.monitor._draw()
        assert len(drawn) == 1
        app.exit()
        app.monitor._draw()
        assert len(drawn) == 1


async def test_rightsizing_from_this_sessions_history(make_app):
    import os

    from textual.widgets import Static

    app = make_app(source="sim:2", interval=0.25)
    async with app.run_test(size=(130, 40)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None
                       and app.monitor.latest.tick.seq >= 4, "a few recorded ticks")
        session_dir = app.monitor.session_dir
        assert session_dir and os.path.isdir(session_dir)
        await pilot.press("4")
        await pilot.press("s")
        text = lambda: str(app.screen.query_one("#rec-side-text", Static).render())  # noqa: E731
        await wait_for(pilot, lambda: "Right-sizing from observed usage" in text(), "the report")
        assert "#0" in text() and "#1" in text()  # one usage line per simulated device
    assert not os.path.exists(session_dir)  # the session's temporary history is removed on exit


async def test_new_alerts_become_notifications(make_app):
    from fleet_tui.core.monitor.alerts import Alert

    app = make_app(source="sim:1", interval=0.25)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None, "first tick")
        alert = Alert(rule="gpu_hot", severity="critical", message="GPU 0 at 91 °C for 30 s",
                      device_key="/0", device_index=0, at=1.0, since=0.0, value=91.0, threshold=85.0)
        app.monitor._notify_alerts([alert])
        await pilot.pause()
        notes = list(app._notifications)
        assert any(n.message == alert.message and n.severity == "error" and "gpu_hot" in n.title
                   for n in notes)

        # a rule fired on a whole fleet at once: one notification, not 512 (which stalled the UI)
        before = len(list(app._notifications))
        fleet = [Alert(rule="memory-high", severity="warning", message=f"GPU {g}: memory above 85%",
                       device_key=f"node-{n:02d}/GPU-{n}-{g}", device_index=g, at=1.0, since=0.0)
                 for n in range(64) for g in range(8)]
        app.monitor._notify_alerts(fleet)
        await pilot.pause()
        notes = list(app._notifications)[before:]
        assert [(n.title, n.severity) for n in notes] == [("memory-high on 512 devices", "warning")]
        assert notes[0].message.startswith("512 devices on 64 nodes (node-00, node-01, node-02")


async def test_cards_scrolled_into_view_are_brought_up_to_date(make_app):
    from fleet_tui.ui.widgets.device_card import device_markup

    app = make_app(source="sim:8", interval=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 8, "eight cards")
        await wait_for(pilot, lambda: app.monitor.latest.tick.seq >= 6, "several ticks")
        await pilot.press("p")  # freeze the data so "up to date" is well defined
        await pilot.pause(0.3)
        latest = app.monitor.latest.snapshot.devices
        analyses = app.monitor.latest.tick.analyses
        last_card = list(app.screen.query(DeviceCard))[-1]
        app.screen.query_one("#cards").scroll_end(animate=False)
        await wait_for(pilot, lambda: last_card._last_markup == device_markup(
            latest[-1], analysis=analyses.get(latest[-1].key)),
                       "the last card redrawn from the latest tick")


def test_diagnoses_panel_keeps_what_it_shows_until_its_refresh():
    """The panel's top findings stay put between refreshes while they are still found, nothing
    more severe is left out and there is no room for more; confidence moving every tick does not
    reshuffle them (on 64 devices it did on 6 of 40 draws)."""
    from types import SimpleNamespace as F

    from fleet_tui.ui.monitor import DIAGNOSES_REFRESH_S, MonitorScreen

    def finding(key, kind="input_starved", severity="warning"):
        return F(device_key=key, kind=kind, severity=severity, primary=True)  # its device's first

    pane = F(_diag_shown=(("a", "input_starved"), ("b", "input_starved")), _diag_drawn_at=100.0)

    def shown(findings, now=101.0, limit=2):
        return [(d.device_key, d.kind) for d in
                MonitorScreen._kept_findings(pane, findings, limit, now)]

    a, b, c = finding("a"), finding("b"), finding("c")
    assert shown([c, a, b]) == [("a", "input_starved"), ("b", "input_starved")]  # c ranks first
    assert shown([c, a, b], now=100.0 + DIAGNOSES_REFRESH_S) == [
        ("c", "input_starved"), ("a", "input_starved")]  # the refresh takes the new order
    assert shown([c, a]) == [("c", "input_starved"), ("a", "input_starved")]  # b is gone
    critical = finding("d", "thermal_throttled", "critical")
    assert shown([critical, a, b]) == [("d", "thermal_throttled"), ("a", "input_starved")]
    assert shown([b, a, c], limit=3) == [  # room for a third: the top three
        ("b", "input_starved"), ("a", "input_starved"), ("c", "input_starved")]
    pane._diag_shown = ()  # nothing shown yet (or a device was focused): the top ones
    assert shown([c, a, b]) == [("c", "input_starved"), ("a", "input_starved")]


async def test_at_200_columns_the_panels_share_the_width(make_app):
    """The diagnoses panel takes what whole cards leave, and half the screen beside an opened
    card (it stayed 42 columns wide beside an empty one)."""
    app = make_app(source="sim:8", interval=0.25)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 8, "eight cards")
        side = app.screen.query_one("#mon-side")
        cards = app.screen.query_one("#cards")
        await wait_for(pilot, lambda: side.size.width >= 56, "the side panel's share")
        assert cards.size.width + side.size.width >= 196
        assert cards.styles.grid_size_columns == 3
        await pilot.press("enter")  # open the first device
        await wait_for(pilot, lambda: side.size.width >= 100, "half the width beside one card")
        card = next(iter(app.screen.query(DeviceCard)))
        await wait_for(pilot, lambda: "· primary" in card._last_markup, "the card's answer")
        assert card.size.width >= 90
