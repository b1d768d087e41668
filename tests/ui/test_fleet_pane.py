"""Fleet pane over a simulated fleet (nodes × devices, worst first, drill-down)."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from tests.ui.conftest import wait_for, widget_app
from tests.ui.drawn import ViewsDrawn
from tests.ui.fleet_fake import SimFleetSource


async def next_view(screen, drawn: ViewsDrawn):
    """The next fleet view the pane draws."""
    await drawn.next()
    return screen.view


async def test_fleet_grid_rollups_and_drill_down(make_app):
    source = SimFleetSource(nodes=5, devices_per_node=4)
    app = make_app(source="sim:1", interval=0.25,
                   overrides=dict(source=source, source_spec=source.name, start_mode="fleet"))
    drawn = ViewsDrawn()
    async with app.run_test(size=(140, 40), message_hook=drawn.hook) as pilot:
        assert app.has_fleet and app.current_mode == "fleet"
        screen = app.screen
        view = screen.view if screen.view is not None else await next_view(screen, drawn)
        assert view.device_count == 20
        table = screen.query_one("#fleet-nodes", DataTable)
        assert table.row_count == 5
        # worst node first, as the core ranked them (row N shows the N-th worst node: cells
        # rewritten in place as the ranking moves)
        def shown():
            return [table.get_row_at(i)[0] for i in range(table.row_count)]

        assert shown() == [n.node for n in view.nodes]
        view = await next_view(screen, drawn)  # a later view: rows follow its ranking
        assert shown() == [n.node for n in view.nodes]
        grid = str(screen.query_one("#fleet-grid-text", Static).render())
        assert all(f"node-0{i}" in grid for i in range(5))
        assert "FLEET" in str(app.screen.query_one("StatusLine").render())
        table.focus()
        await pilot.press("d")  # the cursor's row: the worst node of the view drawn last
        first = screen.drill_node
        assert first in {n.node for n in view.nodes}
        assert screen.query_one("#fleet-side").border_title == f"Node {first}"  # drawn at once
        view = await next_view(screen, drawn)  # later views keep the drill-down
        assert screen.query_one("#fleet-side").border_title == f"Node {first}"
        await pilot.press("escape")
        assert screen.drill_node is None
        # the monitor pane caps its cards and points to this pane
        await pilot.press("3")
        await wait_for(pilot, lambda: "Fleet pane" in str(app.screen.query_one("#mon-message").render()),
                       "monitor's pointer to the fleet pane")


async def test_fleet_table_rewrites_changed_cells_in_place():
    from fleet_tui.ui.widgets.fleet_table import FleetTable

    app = widget_app(lambda: FleetTable(id="t"))
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(FleetTable)
        table.add_column("node", key="node")
        table.add_column("util", key="util")
        table.show_rows([("n1", "10%"), ("n2", "20%"), ("n3", "30%")])
        await pilot.pause()

        def lines():
            return [table.render_line(y).text.strip() for y in range(1, 4)]

        assert lines()[0].startswith("n1")  # drawn once: its renders are cached
        table.show_rows([("n2", "25%"), ("n1", "10%"), ("n3", "30%")])  # n2 moved up
        await pilot.pause()
        assert [table.get_row_at(i) for i in range(3)] == [["n2", "25%"], ["n1", "10%"],
                                                           ["n3", "30%"]]
        assert [line.split() for line in lines()] == [["n2", "25%"], ["n1", "10%"],
                                                      ["n3", "30%"]]
        table.show_rows([("n3", "30%"), ("n1", "10%")])  # a node left: rebuilt
        await pilot.pause()
        assert table.row_count == 2 and table.get_row_at(0) == ["n3", "30%"]


async def test_job_alerts_of_one_rule_are_one_notification(make_app):
    from fleet_tui.core.monitor.alerts import Alert

    source = SimFleetSource(nodes=2, devices_per_node=2)
    app = make_app(source="sim:1", interval=0.25,
                   overrides=dict(source=source, source_spec=source.name, start_mode="jobs"))
    async with app.run_test(size=(140, 40)) as pilot:
        assert app.current_mode == "jobs"
        before = len(list(app._notifications))
        idle = [Alert(rule="job-idle", severity="warning", device_key=f"job:{n}",
                      message=f"job {n}: 8 of its 8 devices idle for 1800 s", device_index=None,
                      at=1.0, since=0.0) for n in range(1000, 1200)]
        app.screen._notify(idle)
        await pilot.pause()
        notes = list(app._notifications)[before:]
        assert [(n.title, n.severity) for n in notes] == [("job-idle on 200 jobs", "warning")]
        assert notes[0].message == ("200 jobs (1000, 1001, 1002 and 197 more): "
                                    "job 1000: 8 of its 8 devices idle for 1800 s")
