"""The shell: panes by key and mouse, help lists every key, themes, status line, clean quit."""

from __future__ import annotations

from fleet_tui.ui.help import HelpScreen
from fleet_tui.ui.widgets.chrome import StatusLine
from tests.ui.conftest import settle


async def test_number_keys_switch_panes(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.current_mode == "catalog"
        for key, mode in (("2", "builder"), ("3", "monitor"), ("4", "recommend"), ("1", "catalog")):
            app.set_focus(None)
            await pilot.press(key)
            await pilot.pause()
            assert app.current_mode == mode
        await pilot.press("5")  # no fleet source: the pane stays put, and the user is told why
        await pilot.pause()
        assert app.current_mode == "catalog"
        assert any("needs a fleet source" in n.message for n in app._notifications)


async def test_clicking_the_pane_bar_switches(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.click("#tab-recommend")
        await pilot.pause()
        assert app.current_mode == "recommend"


async def test_help_lists_every_binding(make_app):
    from fleet_tui.ui.app import FleetApp
    from fleet_tui.ui.panes import BY_MODE as PANE_TITLES
    from fleet_tui.ui.panes import pane_class

    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.help_text()
        for mode in PANE_TITLES:
            if PANE_TITLES[mode].needs_source:  # hidden without its source (fleet, jobs)
                continue
            for binding in pane_class(mode).BINDINGS:
                if binding.description:
                    assert binding.description in text, (mode, binding)
        for binding in FleetApp.BINDINGS:
            if binding.show:
                assert binding.description in text
        assert app.screen.query_one("#help-text")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_themes_registered_and_switchable(make_app):
    app = make_app(theme="high-contrast")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.theme == "fleet-high-contrast"
        assert {"fleet-dark", "fleet-light", "fleet-high-contrast"} <= set(app.available_themes)
        app.theme = "fleet-light"
        await pilot.pause()
        assert app.current_theme.dark is False


async def test_status_line_says_no_device_and_catalog_count(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        text = str(app.screen.query_one(StatusLine).render())
        assert "NO DEVICE" in text
        assert app.catalog_status.state == "ready"
        assert f"{app.catalog_status.instances:,} offers" in text


async def test_settle_waits_for_a_catalog_load_that_starts_late(make_app, monkeypatch):
    """The catalog load starts after the first frame. On a loaded core ``settle`` once looked before
    that worker existed, found nothing to wait for, and the test above read "loading"."""
    from fleet_tui.ui.app import FleetApp

    start = FleetApp.load_catalog
    monkeypatch.setattr(FleetApp, "load_catalog",
                        lambda self: self.set_timer(0.5, lambda: start(self)))  # half a second late
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        assert app.catalog_status.state == "ready"


async def test_q_quits_cleanly(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.set_focus(None)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)
    assert app._exception is None


async def test_modes_keys_bar_and_palette_come_from_the_pane_registry(make_app):
    from fleet_tui.ui.app import FleetApp
    from fleet_tui.ui.panes import PANES, pane_class

    assert list(FleetApp.MODES) == [p.mode for p in PANES]
    for pane in PANES:
        assert pane_class(pane.mode).MODE == pane.mode
        assert any(b.key == pane.key and b.action == f"switch_mode('{pane.mode}')"
                   for b in FleetApp.BINDINGS)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        shown = [p for p in PANES if p.needs_source is None]  # no fleet source here
        tabs = [w.id for w in app.screen.query(".pane-tab")]
        assert tabs == [f"tab-{p.mode}" for p in shown]
        titles = [c.title for c in app.get_system_commands(app.screen) if c.title.startswith("Pane: ")]
        assert titles == [f"Pane: {p.title}" for p in shown]
        text = app.help_text()
        for pane in shown:
            assert any(line in (pane.title, f"{pane.title} (this pane)")
                       for line in text.splitlines())
        from fleet_tui.core.monitor.sources import SOURCES
        from fleet_tui.ui.help import sources_markdown

        assert any(c.title == "Monitor sources" for c in app.get_system_commands(app.screen))
        assert all(f"`{info.usage}`" in sources_markdown() for info in SOURCES.values())


async def test_a_closed_terminal_ends_the_process_even_when_shutdown_blocks(make_app, monkeypatch):
    """SIGHUP asks the app to exit as ``q`` does; when Textual's shutdown blocks (it can, writing
    to a pty that is gone), a watchdog ends the process with 128 + the signal number."""
    import asyncio
    import os
    import signal

    from fleet_tui.ui.app import FleetApp

    ended: list[int] = []
    monkeypatch.setattr(os, "_exit", ended.append)
    monkeypatch.setattr(FleetApp, "EXIT_GRACE_S", 0.2)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        asked: list[int] = []
        monkeypatch.setattr(app, "exit", lambda *a, **k: asked.append(1))  # a shutdown that never ends
        os.kill(os.getpid(), signal.SIGHUP)  # the real signal, through the app's loop handler
        for _ in range(50):
            await asyncio.sleep(0.05)
            if ended:
                break
        assert asked == [1] and ended == [128 + signal.SIGHUP]
