"""Fleet pane over a simulated fleet (nodes × devices, worst first, drill-down)."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.ui.conftest import wait_for
from tests.ui.fleet_fake import SimFleetSource


async def test_fleet_grid_rollups_and_drill_down(make_app):
    source = SimFleetSource(nodes=5, devices_per_node=4)
    app = make_app(source="sim:1", interval=0.25,
                   overrides=dict(source=source, source_spec=source.name, start_mode="fleet"))
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.has_fleet and app.current_mode == "fleet"
        screen = app.screen
        await wait_for(pilot, lambda: screen.view is not None and screen.view.device_count == 20,
                       "a fleet view of 20 devices")
        table = screen.query_one("#fleet-nodes", DataTable)
        await wait_for(pilot, lambda: table.row_count == 5, "five node rows")
        view = screen.view
        # worst node first, as the core ranked them (rows re-sorted in place as the ranking moves)
        def shown():
            return [str(row.key.value) for row in table.ordered_rows]

        assert shown() == [n.node for n in view.nodes]
        first_view = view
        await wait_for(pilot, lambda: screen.view is not first_view, "a later fleet view")
        assert shown() == [n.node for n in screen.view.nodes]
        view = screen.view
        grid = str(screen.query_one("#fleet-grid-text", Static).render())
        assert all(f"node-0{i}" in grid for i in range(5))
        assert "FLEET" in str(app.screen.query_one("StatusLine").render())
        table.focus()
        await pilot.press("d")
        await pilot.pause()
        first = view.nodes[0].node
        assert screen.drill_node == first
        await wait_for(pilot, lambda: screen.query_one("#fleet-side").border_title == f"Node {first}",
                       "drill-down panel")
        await pilot.press("escape")
        assert screen.drill_node is None
        # the monitor pane caps its cards and points to this pane
        await pilot.press("3")
        await wait_for(pilot, lambda: "Fleet pane" in str(app.screen.query_one("#mon-message").render()),
                       "monitor's pointer to the fleet pane")
