"""Catalog, workload builder and recommendations: the main interactions, asserted on app state."""

from __future__ import annotations

import asyncio
import inspect
import json

from textual.widgets import DataTable, Input, Select, Static

from fleet_tui.ui.builder import BuilderScreen
from fleet_tui.ui.catalog import PAGE_ROWS
from tests.ui.conftest import settle, wait_for


async def test_catalog_filters_page_and_detail(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(130, 36)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#cat-table", DataTable)
        total = len(app.catalog.instances)
        assert table.row_count == min(total, PAGE_ROWS)
        count = str(app.screen.query_one("#cat-count", Static).render())
        if total > PAGE_ROWS:
            assert f"showing {PAGE_ROWS:,} of {total:,}" in count
        # type a filter: only that accelerator remains, cheapest $/GPU-hour first
        app.screen.query_one("#f-accelerator", Input).focus()
        await pilot.press(*"H100")
        await settle(app, pilot)
        page = app.screen._page
        assert page.instances and all(i.accelerator == "H100" for i in page.instances)
        prices = [i.usd_per_gpu_hour("on-demand") for i in page.instances]
        known = [p for p in prices if p is not None]
        assert known == sorted(known)
        detail = str(app.screen.query_one("#cat-detail-text", Static).render())
        assert page.instances[0].instance_type in detail and "as of" in detail
        # descending order with the key
        await pilot.press("escape", "o")
        await settle(app, pilot)
        known_desc = [p for p in (i.usd_per_gpu_hour("on-demand") for i in app.screen._page.instances)
                      if p is not None]
        assert known_desc == sorted(known_desc, reverse=True)


async def test_ctrl_c_while_the_catalog_filter_row_mounts_quits_cleanly(make_app, monkeypatch):
    # The filter row is mounted once the pane's first page shows. A ctrl+c that arrived just as its
    # mount began raced Textual's shutdown: the Selects' own mount handlers found their children
    # gone (NoMatches, "No nodes match '#label' on SelectCurrent"), the app printed a traceback and
    # exited with status 1 (seen once in tests/e2e/test_tmux.py on a loaded core). Here the key
    # arrives exactly then, every time.
    from textual.containers import Grid

    app = make_app(overrides=dict(source=None))
    mount_all = Grid.mount_all

    def mount_all_then_ctrl_c(grid, widgets, **kw):
        mounting = mount_all(grid, widgets, **kw)
        if grid.id == "cat-filters":
            app.simulate_key("ctrl+c")
        return mounting

    monkeypatch.setattr(Grid, "mount_all", mount_all_then_ctrl_c)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.return_code is not None, "the app to exit")
    assert app.return_code == 0 and app.quitting


async def test_ctrl_c_right_after_a_pane_key_quits_cleanly(make_app):
    # From the Monitor pane, a pane key then ctrl+c a few event-loop turns later: the key, on its
    # way through the focused widget, reached the app after ctrl+c had asked it to exit, and the
    # Workload pane then mounted during shutdown (NoMatches in its on_mount, exit status 1; on the
    # old code at 3 turns). Pane keys now do nothing once the app is quitting.
    for turns in (2, 3, 4):
        app = make_app(source="sim:8")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.5)
            app.simulate_key("2")
            for _ in range(turns):
                await asyncio.sleep(0)
            app.simulate_key("ctrl+c")
            await wait_for(pilot, lambda app=app: app.return_code is not None, "the app to exit")
        assert app.return_code == 0, turns


async def test_a_pane_mounts_nothing_later_once_the_app_is_quitting(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(80, 24)):
        async def mount_something():
            raise AssertionError("ran after quitting began")

        app.quitting = True  # as q, ctrl+c or SIGTERM set it before waiting for pending mounts
        work = mount_something()
        assert app.screen.mount_later(work) is None
        assert inspect.getcoroutinestate(work) == inspect.CORO_CLOSED
        # nor does a pane key or ? open a screen
        shown = app.screen
        await app.run_action("switch_mode('builder')")
        await app.run_action("help")
        assert app.screen is shown


async def test_catalog_same_answer_keeps_the_table_and_cursor(make_app):
    # A repeated query (a Select settling on mount, a reload with no change) must not clear and
    # refill the table: that flickers and throws away the user's place.
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(130, 36)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#cat-table", DataTable)
        table.focus()
        await pilot.press("down", "down", "down")
        assert table.cursor_row == 3
        app.screen.refresh_query()
        await settle(app, pilot)
        assert table.cursor_row == 3 and table.row_count > 3
        # a different answer does replace the page
        app.screen.query_one("#f-accelerator", Input).value = "H100"
        await settle(app, pilot)
        assert table.cursor_row == 0
        assert all(i.accelerator == "H100" for i in app.screen._page.instances)


async def test_catalog_empty_number_fields_are_not_errors_and_negatives_are_explained(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(130, 36)) as pilot:
        await settle(app, pilot)
        price = app.screen.query_one("#f-max-price", Input)
        price.focus()
        await pilot.press("5", "backspace")  # typed, then cleared: "any", not an error
        await settle(app, pilot)
        assert price.value == "" and not price.has_class("-invalid")
        price.value = "-5"
        await settle(app, pilot)
        count = str(app.screen.query_one("#cat-count", Static).render())
        assert "maximum $/hour -5: must be at least 0" in count


async def test_catalog_unknown_accelerator_is_explained(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.screen.query_one("#f-accelerator", Input).value = "H1OO"
        await settle(app, pilot)
        assert app.screen.query_one("#cat-table", DataTable).row_count == 0
        assert app.screen._page.error and "H1OO" in app.screen._page.error


async def _open_builder(app, pilot):
    app.set_focus(None)
    await pilot.press("2")
    await settle(app, pilot)
    assert isinstance(app.screen, BuilderScreen)
    return app.screen


async def test_builder_sizes_as_you_type_and_publishes_workload(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-params", Input).focus()
        await pilot.press(*"70B")
        await settle(app, pilot)
        assert app.workload is not None and app.workload.params == 70_000_000_000
        screen.query_one("#b-accel", Select).value = "L4"
        await settle(app, pilot)
        text = str(screen.query_one("#b-result-text", Static).render())
        # vLLM (the default engine) cannot start 70B on one L4: it says so and what would make it start
        assert "Does not start" in text and "that would make it start" in text
        assert "Cost" not in text  # a setup that does not fit is not priced
        screen.query_one("#b-params", Input).value = "1B"
        await settle(app, pilot)
        text = str(screen.query_one("#b-result-text", Static).render())
        assert "Starts" in text  # vLLM starts 1B on one L4
        assert app.workload.params == 1_000_000_000
        # the cost of the cheapest catalog offer with the chosen devices, as the core computes it
        from fleet_tui.core.catalog.setup_cost import cheapest_setup

        cost = cheapest_setup(app.catalog, "L4", 1)
        assert f"${cost.usd_per_hour:,.2f}/h" in text and cost.instance.instance_type in text


async def test_builder_ctrl_r_opens_recommendations_for_the_workload(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-params", Input).value = "8B"
        await settle(app, pilot)
        assert app.workload is not None
        screen.query_one("#b-params", Input).focus()  # from inside a field, as people do
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        assert app.current_mode == "recommend"


async def test_builder_says_speed_unknown_instead_of_inventing_one(make_app):
    # A10G: Ampere, but NVIDIA publishes no dense bf16 peak, so a forward pass has no speed estimate
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-params", Input).value = "1B"
        screen.query_one("#b-gen", Input).value = ""  # one forward pass: compute-bound
        screen.query_one("#b-accel", Select).value = "A10G"
        await settle(app, pilot)
        assert screen.last_result.error is None
        text = str(screen.query_one("#b-result-text", Static).render())
        assert "Fits" in text
        assert "unknown" in text and "A10G" in text and "tokens/s" not in text


async def test_builder_bad_input_is_a_sentence(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-params", Input).value = "lots"
        await settle(app, pilot)
        assert screen.last_result.error and "params" in screen.last_result.error
        assert app.workload is None


async def test_recommendations_rank_and_export(make_app, tmp_path):
    app = make_app(overrides=dict(source=None, export_dir=tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-model", Select).value = "llama-3.1-8b"
        await settle(app, pilot)
        app.set_focus(None)
        await pilot.press("4")
        await settle(app, pilot)
        await settle(app, pilot)
        rec_screen = app.screen
        result = rec_screen.result
        assert result is not None and result.error is None
        offers = result.recommendation.offers
        assert offers and rec_screen.query_one("#rec-table", DataTable).row_count == len(offers)
        costs = [o.cost_per_unit for o in offers]
        assert costs == sorted(costs)
        await pilot.press("j")
        await pilot.press("m")
        data = json.loads((tmp_path / "fleet-tui-recommendations.json").read_text())
        assert data["offers"][0]["instance_type"] == offers[0].instance_type
        md = (tmp_path / "fleet-tui-recommendations.md").read_text()
        assert offers[0].instance_type in md
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        # the file exists now: export asks before replacing it, and "no" keeps the user's file
        report = tmp_path / "fleet-tui-recommendations.md"
        report.write_text("my notes\n")
        await pilot.press("m")
        await pilot.pause()
        assert type(app.screen).__name__ == "Confirm"
        await pilot.press("n")
        await pilot.pause()
        assert report.read_text() == "my notes\n"
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert offers[0].instance_type in report.read_text()


async def test_recommendations_keys_and_side_panel_at_80_columns(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = await _open_builder(app, pilot)
        screen.query_one("#b-model", Select).value = "llama-3.1-8b"
        await settle(app, pilot)
        app.set_focus(None)
        await pilot.press("4")
        await settle(app, pilot)
        rec = app.screen
        table, side = rec.query_one("#rec-table", DataTable), rec.query_one("#rec-side")
        # at 80 columns the side panel would hide every number: it waits to be asked for
        assert side.has_class("-hidden")
        assert app.focused is table  # arrow keys move through the offers, not the pricing menu
        await pilot.press("down")
        assert table.cursor_row == 1
        await pilot.press("e")
        assert not side.has_class("-hidden") and side.border_title == "Explain"
        await pilot.press("e")
        assert side.has_class("-hidden")
        await pilot.resize_terminal(120, 30)  # the user's choice survives a resize
        await pilot.pause()
        assert side.has_class("-hidden")
        await pilot.press("e")
        assert not side.has_class("-hidden") and side.border_title == "Explain"


async def test_palette_commands_and_export_to_a_chosen_path(make_app, tmp_path):
    app = make_app(overrides=dict(source=None, export_dir=tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Pane: Catalog", "Pane: Workload builder", "Pane: Monitor",
                       "Pane: Recommendations", "Theme: fleet-light", "Theme: fleet-high-contrast",
                       "Export report as Markdown", "Export report as JSON",
                       "Export report to a path…"):
            assert wanted in titles
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
        target = tmp_path / "sub" / "report.json"
        app.screen.query_one("#path-input", Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert json.loads(target.read_text())["offers"]


def test_catalog_sizes_are_rounded_to_a_tenth():
    from fleet_tui.ui.catalog import gib

    # Vast reports 15.996 GiB for a 16 GiB card; the table shows what a person would say
    assert [gib(x) for x in (15.996, 11.94, 23.988, 80, 141.0, 0.5)] == \
        ["16", "11.9", "24", "80", "141", "0.5"]
