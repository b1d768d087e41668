"""Base class of the panes: each pane is a Textual screen used as an app mode."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer

from fleet_tui.ui.widgets.chrome import PANES, PaneBar, StatusLine


class PaneScreen(Screen):
    """Pane bar on top, the pane's body, the status line and the key footer at the bottom."""

    MODE = ""
    TITLE_TEXT = ""

    def compose(self) -> ComposeResult:
        panes = tuple(p for p in PANES if p[0] != "fleet" or self.app.has_fleet)
        yield PaneBar(self.MODE, panes)
        with Vertical(classes="pane-body"):
            yield from self.compose_body()
        yield StatusLine()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        return iter(())
