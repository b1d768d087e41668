"""Placeholder; replaced by the real pane."""

from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen


class BuilderScreen(PaneScreen):
    MODE = "builder"

    def compose_body(self):
        yield Static("builder", classes="pane-body")
