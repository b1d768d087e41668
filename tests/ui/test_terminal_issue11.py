"""Issue 11, "The terminal": app state after key presses (the tmux side is tests/e2e/)."""

from __future__ import annotations

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
        await wait_for(pilot, lambda: table.row_count == 8, "eight rows")
        tick = app.monitor.latest.tick
        await pilot.pause(0.3)
        for dev in app.monitor.latest.snapshot.devices:
            cell = str(table.get_cell(dev.key, "diag"))
            primary = tick.analyses[dev.key].primary.replace("_", " ")
            assert primary[:10] in cell, (dev.key, cell)
        # every row is inside the table's visible region (no scrolling needed)
        assert table.region.height >= 9 and table.max_scroll_y == 0
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
        assert "tensor" in " ".join(str(c.label) for c in
                                     app.screen.query_one("#devices").columns.values()) or \
            "TC" in " ".join(str(c.label) for c in app.screen.query_one("#devices").columns.values())
