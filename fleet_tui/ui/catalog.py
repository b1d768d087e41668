"""Placeholder; replaced by the real pane."""

from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen


class CatalogScreen(PaneScreen):
    MODE = "catalog"

    def compose_body(self):
        yield Static("catalog", classes="pane-body")
