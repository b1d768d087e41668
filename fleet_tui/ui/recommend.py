"""Placeholder; replaced by the real pane."""

from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen


class RecommendScreen(PaneScreen):
    MODE = "recommend"

    def compose_body(self):
        yield Static("recommend", classes="pane-body")
