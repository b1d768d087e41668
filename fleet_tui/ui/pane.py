"""Base class of the panes: each pane is a Textual screen used as an app mode."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer

from fleet_tui.ui.widgets.chrome import PaneBar, StatusLine


class PaneScreen(Screen):
    """Pane bar on top, the pane's body, the status line and the key footer at the bottom.

    A pane sets ``MODE`` to its registry name (``fleet_tui/ui/panes.py``) and yields its widgets
    from ``compose_body``."""

    MODE = ""

    def compose(self) -> ComposeResult:
        yield PaneBar(self.MODE, self.app.available_panes())
        with Vertical(classes="pane-body"):
            yield from self.compose_body()
        yield StatusLine()
        yield Footer(compact=True)  # ? and q must fit at 80 columns with the pane keys

    def compose_body(self) -> ComposeResult:
        return iter(())
