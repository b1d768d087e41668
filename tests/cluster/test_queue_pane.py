"""Queue pane: the hand-computed strict-FIFO vs EASY-backfill case of test_queue.py, as a form."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Static

from fleet_tui.core.cluster.joblists import swf_line
from fleet_tui.ui.launch import AppConfig, build_app
from tests.ui.conftest import wait_for
from tests.ui.fleet_fake import SimFleetSource


async def test_queue_pane_simulates_the_hand_case_and_names_bad_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    swf = tmp_path / "hand.swf"
    swf.write_text("\n".join([swf_line(1, 0, 10, 2, 10, 1), swf_line(2, 1, 5, 4, 5, 2),
                              swf_line(3, 2, 3, 2, 3, 1), swf_line(4, 3, 4, 1, 4, 3),
                              swf_line(5, 4, 2, 2, 6, 2)]) + "\n")
    source = SimFleetSource(nodes=2, devices_per_node=2)
    app = build_app(AppConfig(source="sim:1", interval_s=0.5), source=source,
                    source_spec=source.name, start_mode="fleet")
    app.animation_level = "none"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("8")
        screen = app.screen
        assert screen.MODE == "queue"
        assert not isinstance(app.focused, Input)  # number keys still switch panes
        await pilot.press("slash")
        assert app.focused is screen.query_one("#q-file", Input)
        await pilot.press("escape")
        assert app.focused is None
        for field, value in (("file", str(swf)), ("nodes", "1"), ("gpus_per_node", "4"),
                             ("add_nodes", "1"), ("spot_fraction", "0")):
            screen.query_one(f"#q-{field}", Input).value = value
        screen.query_one("#q-file", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.doc is not None, "the simulation")
        fifo, bf = screen.doc["policies"]["fifo"], screen.doc["policies"]["backfill"]
        assert (fifo["mean_wait_s"], fifo["makespan_s"]) == (9.6, 20)
        assert (bf["mean_wait_s"], bf["makespan_s"]) == (4.4, 17)
        table = screen.query_one("#queue-table", DataTable)
        assert [str(k.value) for k in table.rows] == ["fifo", "priority", "fair-share", "backfill",
                                                      "preemption"]
        assert "With 2 nodes" in str(screen.query_one("#queue-whatif-text", Static).render())
        assert "backfill scans the whole queue" in str(screen.query_one("#queue-status",
                                                                         Static).render())
        # 2 GPUs per node cannot hold job 2 (4 GPUs): skipped and counted, the rest simulated
        screen.doc = None
        screen.query_one("#q-gpus_per_node", Input).value = "2"
        await pilot.press("enter")
        status = screen.query_one("#queue-status", Static)
        await wait_for(pilot, lambda: screen.doc is not None, "the simulation")
        assert "1 larger than the cluster, skipped" in str(status.render())
        # a bad depth: the error names the form's field
        screen.doc = None
        screen.query_one("#q-backfill_depth", Input).value = "0"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "must be at least 1" in str(status.render()), "the error")
        assert screen.doc is None and "Backfill depth" in str(status.render())
