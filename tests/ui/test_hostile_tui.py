"""The TUI with hostile text: a NUL byte typed into the export path is a notice, not a crash;
table cells and styled lines from outside show as text (no escape code, no markup)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input, Select

from fleet_tui.ui.widgets.table import safe_cell
from fleet_tui.ui.widgets.text import escape_text, styled_line
from tests.ui.conftest import settle
from tests.ui.test_panes import _open_builder


async def test_a_nul_byte_in_the_export_path_is_a_notice(make_app, tmp_path, monkeypatch):
    app = make_app(overrides=dict(source=None, export_dir=tmp_path))
    notes: list[str] = []
    notify = app.notify
    monkeypatch.setattr(app, "notify", lambda message, **kw: (notes.append(message),
                                                              notify(message, **kw)))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-model", Select).value = "llama-3.1-8b"
        await settle(app, pilot)
        app.set_focus(None)
        await pilot.press("4")
        await settle(app, pilot)
        await settle(app, pilot)
        command = next(c for c in app.get_system_commands(app.screen)
                       if c.title == "Export report to a path…")
        command.callback()
        await pilot.pause()
        app.screen.query_one("#path-input", Input).value = str(tmp_path / "re\x00port.md")
        await pilot.press("enter")
        await pilot.pause()
        assert app.is_running  # no crash
        assert any("NUL" in m for m in notes), notes
        assert not any("\x00" in m for m in notes)


def test_cells_and_lines_from_outside_are_text():
    cell = safe_cell("node\x1b]0;pwned\x07 [bold]x[/]\nrow")
    assert isinstance(cell, Text) and "\x1b" not in cell.plain and "\n" not in cell.plain
    assert cell.plain.endswith("[bold]x[/] row")  # markup shown as typed
    assert safe_cell("plain node-7") == "plain node-7" and safe_cell(3) == 3
    markup, content = styled_line([("proc\x1b[2J", None), (" gpu", "bold")])
    assert "\x1b" not in markup and "\x1b" not in content.plain
    assert escape_text("a[b]\x07") == "a\\[b]?"


async def test_sigterm_ends_the_app_with_status_143(make_app, monkeypatch):
    import asyncio
    import os
    import signal

    ended: list[int] = []
    monkeypatch.setattr(os, "_exit", ended.append)  # the watchdog, should shutdown block
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        os.kill(os.getpid(), signal.SIGTERM)  # the real signal, through the app's loop handler
        for _ in range(100):
            await asyncio.sleep(0.05)
            if not app.is_running:
                break
    assert app.return_code == 128 + signal.SIGTERM
