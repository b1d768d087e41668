"""Placeholder; replaced by the real pane."""

from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen


class FleetScreen(PaneScreen):
    MODE = "fleet"

    def compose_body(self):
        yield Static("fleet", classes="pane-body")
