"""The terminal: app state after key presses (the tmux side is tests/e2e/)."""

from __future__ import annotations

import re

from textual.widgets import Static

from tests.ui.conftest import settle, wait_for


async def test_mistyped_instance_is_a_message_not_a_crash(make_app):
    app = make_app(source="sim:2", instance="p5.48xlarg", interval=0.25)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: app.monitor.latest is not None, "first tick")
        # the headless command's words: unknown instance type ... did you mean p5.48xlarge
        assert app.instance_error and "unknown instance type 'p5.48xlarg'" in app.instance_error
        assert "p5.48xlarge" in app.instance_error
        messages = " ".join(str(n.message) for n in app._notifications)
        assert "unknown instance type 'p5.48xlarg'" in messages
        cost = app.screen.query_one("#cost-line", Static)
        await wait_for(pilot, lambda: "p5.48xlarg" in str(cost.render()), "the cost line says why")
        assert app.return_code is None  # still running


async def test_monitor_at_80x24_shows_every_devices_primary_diagnosis_and_cost(make_app):
    from fleet_tui.ui.widgets.device_card import DeviceCard
    from fleet_tui.ui.widgets.device_table import DeviceTable

    app = make_app(source="sim:8", instance="p5.48xlarge", interval=0.25)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None
                       and app.monitor.latest.tick.seq >= 3, "a few ticks")
        table = app.screen.query_one("#devices", DeviceTable)
        await wait_for(pilot, lambda: table.rows_shown == 8, "eight rows")
        app.monitor.toggle_pause()  # freeze the data: draws coalesce, so compare the drawn tick
        await pilot.pause(0.6)
        app.monitor.redraw_now()
        await pilot.pause()
        tick = app.monitor.latest.tick
        for dev in app.monitor.latest.snapshot.devices:
            cell = table.cell(dev.key, "diag")
            primary = tick.analyses[dev.key].primary.replace("_", " ")
            assert primary[:10] in cell, (dev.key, cell)
        # every row is on screen: header + 8 rows inside the screen
        assert table.region.height == 9 and table.region.bottom <= 24
        for dev in app.monitor.latest.snapshot.devices:
            assert table.cell(dev.key, "diag")[2:12] in table.markup_text
        cost = str(app.screen.query_one("#cost-line", Static).render())
        assert "idle $" in cost and "/h" in cost
        assert not app.screen.query(DeviceCard)  # no cards until a row is opened
        table.focus()
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 1, "the row's card")
        card = app.screen.query_one(DeviceCard)
        assert card.device_key == app.monitor.latest.snapshot.devices[1].key
        assert card.region.height > 0
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.focused_key is None, "back to all devices")


async def test_monitor_at_200x60_uses_the_width(make_app):
    from fleet_tui.ui.widgets.device_card import DeviceCard

    app = make_app(source="sim:8", interval=0.25)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 8, "eight cards")
        await pilot.pause(0.3)
        cards = list(app.screen.query(DeviceCard))
        assert len({c.region.x for c in cards}) >= 3  # three or more cards side by side
        assert " TC " in app.screen.query_one("#devices").markup_text  # the wide columns


async def test_help_opens_on_the_current_panes_keys_each_key_once(make_app):
    from fleet_tui.ui.help import HelpScreen

    app = make_app(source="sim:1", interval=0.25)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.help_text()
        lines = text.splitlines()
        assert lines[1] == "Monitor (this pane)" and "Everywhere" in lines[2:12]
        assert text.count("Faster") == 1 and re.search(r"\+ +Faster", text)
        await pilot.press("escape", "2")
        await pilot.pause()
        assert app.help_text().splitlines()[1] == "Workload builder (this pane)"


async def test_footer_shows_help_and_quit_at_80_and_120_columns(make_app):
    from textual.widgets import Footer

    for size in ((80, 24), (120, 30)):
        for source in (None, "sim:2"):
            app = make_app(source=source, interval=0.25) if source else make_app()
            async with app.run_test(size=size) as pilot:
                await settle(app, pilot)
                for mode in ("catalog", "builder", "monitor", "recommend"):
                    await app.switch_mode(mode)
                    footer = app.screen.query_one(Footer)
                    await wait_for(pilot, lambda footer=footer: footer.query("FooterKey"), "the footer's keys")
                    await pilot.pause(0.1)
                    keys = {item.key: item for item in footer.query("FooterKey")}
                    palette = keys.get("ctrl+p")  # docked right, over anything below it
                    limit = palette.region.x if palette is not None else size[0]
                    for key in ("question_mark", "q"):
                        assert key in keys, (size, mode, key)
                        item = keys[key]
                        assert item.region.right <= limit, (size, mode, key, item.region, limit)


async def _builder(app, pilot):
    from fleet_tui.ui.builder import BuilderScreen

    await settle(app, pilot)
    await pilot.press("2")
    await wait_for(pilot, lambda: isinstance(app.screen, BuilderScreen), "the builder")
    await settle(app, pilot)
    return app.screen


async def test_builder_at_80x24_shows_verdict_first_fix_speed_and_cost_first(make_app):
    from textual.widgets import Input, Select

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _builder(app, pilot)
        assert app.focused is screen.query_one("#b-result")  # ? and q work; arrows scroll
        screen.query_one("#b-accel", Select).value = "H100"
        screen.query_one("#b-params", Input).value = "70B"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and screen.last_result.markup, "sizing")
        result = screen.query_one("#b-result")
        text = screen.query_one("#b-result-text")
        await pilot.pause(0.2)
        rows = [strip.text for strip in text.render_lines(text.size.region)]
        visible = "\n".join(rows[:result.scrollable_content_region.height])
        assert "Does not start" in visible and "First change that would make it start" in visible
        # a setup that does not fit gets no speed; its fixes come first
        assert "→" in visible and "Speed (model)" not in visible
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert result.scroll_y > 0  # the rest is reachable from the keyboard
        screen.query_one("#b-params", Input).value = "8B"  # fits: speed and cost on the first screen
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and "Starts" in (screen.last_result.markup or ""),
                       "sizing 8B")
        await pilot.pause(0.2)
        # the edit scrolled the results back to the verdict: no key press needed to see it
        assert result.scroll_y == 0
        rows = [strip.text for strip in text.render_lines(text.size.region)]
        visible = "\n".join(rows[:result.scrollable_content_region.height])
        assert "Starts" in visible and "Speed (model)" in visible and "$" in visible, visible


async def test_builder_batch_and_params_mistakes_are_errors_in_label_words(make_app):
    from textual.widgets import Input

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _builder(app, pilot)
        screen.query_one("#b-params", Input).value = "7B"
        batch = screen.query_one("#b-batch", Input)
        batch.value = ""
        batch.focus()
        await pilot.press(*"2.5")
        await settle(app, pilot)
        assert batch.value == "2.5"  # not silently 25
        assert screen.last_result.error.startswith("batch '2.5': not a whole number")
        assert batch.has_class("-invalid")
        batch.value = ""
        await settle(app, pilot)
        assert screen.last_result.workload is None and "batch is empty" in screen.last_result.error
        batch.value = "2"
        screen.query_one("#b-params", Input).value = "llama-3.1-8b"
        await settle(app, pilot)
        error = screen.last_result.error
        assert "is a model name" in error and "model preset" in error
        assert screen.query_one("#b-params", Input).has_class("-invalid")
        screen.query_one("#b-params", Input).value = "7B"
        screen.query_one("#b-gen", Input).value = "256"
        screen.query_one("#b-seq", Input).value = ""
        await settle(app, pilot)
        assert screen.last_result.error == ("gen len needs seq/prompt len (generation = a prompt "
                                            "plus new tokens)")  # labels, not --flags


async def test_checkboxes_read_checked_or_not_without_colour(make_app):
    from fleet_tui.ui.widgets.form import Check

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _builder(app, pilot)
        box = screen.query_one("#b-spot", Check)
        off = box.render().plain
        box.value = True
        await pilot.pause()
        on = box.render().plain
        assert off != on and "✔" in on and "✔" not in off


async def _recommend(app, pilot, current: str = ""):
    from textual.widgets import Input, Select

    screen = await _builder(app, pilot)
    screen.query_one("#b-model", Select).value = "llama-3.1-8b"
    screen.query_one("#b-current", Input).value = current
    await settle(app, pilot)
    app.set_focus(None)
    await pilot.press("4")
    await settle(app, pilot)
    await settle(app, pilot)
    return screen, app.screen


async def test_recommend_at_80x24_shows_top_offers_with_cost_per_unit(make_app):
    from textual.widgets import DataTable

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        _builder_screen, rec = await _recommend(app, pilot)
        table = rec.query_one("#rec-table", DataTable)
        assert table.row_count >= 5 and table.region.height >= 8
        unit = next(c for c in table.columns.values() if str(c.label) == "cost/unit")
        x = sum(c.get_render_width(table) for c in table.ordered_columns[:table.ordered_columns.index(unit) + 1])
        assert x <= table.region.width  # the cost/unit column is on screen


async def test_recommend_escape_rightsizing_and_current_instance_typo(make_app):
    from textual.widgets import DataTable, Input, Static

    app = make_app(source="sim:2", interval=0.25)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.monitor.latest is not None
                       and app.monitor.latest.tick.seq >= 3, "a few recorded ticks")
        builder, rec = await _recommend(app, pilot, current="p4d.24xlarg")
        table, side = rec.query_one("#rec-table", DataTable), rec.query_one("#rec-side")
        # a typo in "current instance" marks that field; the table is still filled
        assert table.row_count > 0
        assert "p4d.24xlarg" in str(rec.query_one("#rec-summary", Static).render())
        assert builder.query_one("#b-current", Input).has_class("-invalid")
        # right-sizing stays while the cursor moves
        await pilot.press("s")
        text = lambda: str(rec.query_one("#rec-side-text", Static).render())  # noqa: E731
        await wait_for(pilot, lambda: "Right-sizing from observed usage" in text(), "right-sizing")
        await pilot.press("down", "down")
        await pilot.pause(0.2)
        assert "Right-sizing from observed usage" in text() and side.border_title == "Right-sizing"
        # escape closes the side panel
        await pilot.press("escape")
        await pilot.pause()
        assert side.has_class("-hidden")


async def test_an_ended_replay_says_so_and_restarts_with_r(make_app):
    from fleet_tui.ui.widgets.chrome import StatusLine

    app = make_app(source="replay:demo@2000", interval=0.25)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.source_status.ended, "the end of the replay")
        status = lambda: str(app.screen.query_one(StatusLine).render())  # noqa: E731
        await wait_for(pilot, lambda: "ENDED" in status(), "the status line")
        assert "every" not in status() and "r: restart" in status()
        message = app.screen.query_one("#mon-message", Static)
        await wait_for(pilot, lambda: "REPLAY ENDED" in str(message.render()), "the banner")
        first_source = app.monitor.source
        await pilot.press("r")
        await wait_for(pilot, lambda: app.monitor.source is not first_source, "a fresh replay")
        await wait_for(pilot, lambda: app.monitor.latest is not None, "ticks again")
        assert app.monitor.session_dir is not None
