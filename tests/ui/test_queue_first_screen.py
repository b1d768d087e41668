"""The Queue pane of a recorded fleet answers on its first screen: the recording's own job list is
simulated when the pane opens, without a key; a fleet without a job list waits for the form."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Static

from fleet_tui.ui.launch import AppConfig, build_app
from fleet_tui.ui.queue import QueueScreen
from tests.ui.conftest import wait_for
from tests.ui.fleet_fake import SimFleetSource


async def test_a_recorded_fleet_opens_the_queue_pane_on_its_simulation(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    app = build_app(AppConfig(source="fleet-replay:demo", interval_s=0.5))
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        await wait_for(pilot, lambda: screen.doc is not None, "the simulation")
        doc = screen.doc
        assert doc is not None and doc["jobs"] > 0 and doc["file"].endswith(".csv")
        table = screen.query_one("#queue-table", DataTable)
        assert table.row_count == 5
        assert "jobs" in str(screen.query_one("#queue-status", Static).render())
        assert not isinstance(app.focused, Input)  # number keys still switch panes


async def test_a_fleet_without_a_job_list_waits_for_the_form(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    source = SimFleetSource(nodes=2, devices_per_node=2)
    app = build_app(AppConfig(source="sim:1", interval_s=0.5), source=source,
                    source_spec=source.name, start_mode="fleet")
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, QueueScreen) and screen.doc is None
        assert "Press / to edit the form" in str(screen.query_one("#queue-status", Static).render())
