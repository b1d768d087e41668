"""Placeholder; replaced by the real pane."""

from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen


class MonitorScreen(PaneScreen):
    MODE = "monitor"

    def compose_body(self):
        yield Static("monitor", classes="pane-body")
