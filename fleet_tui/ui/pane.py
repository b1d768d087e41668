"""Base class of the panes: each pane is a Textual screen used as an app mode."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # what Footer.compose yields; not re-exported
from textual.worker import Worker

from fleet_tui.ui.state import MOUNTING
from fleet_tui.ui.widgets.chrome import PaneBar, StatusLine

if TYPE_CHECKING:  # for the checker only: the app module imports this one
    from fleet_tui.ui.app import FleetApp


class KeyFooter(Footer):
    """Textual's footer with the keys that work everywhere first (``? Help``, ``q Quit``): a pane
    that shows one key more (``r Restart replay`` once a replay has ended) then cuts its own last
    key at 80 columns, never ``?`` or ``q`` (they were cut)."""

    FIRST = ("help", "quit")

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        first = [k for k in keys if isinstance(k, FooterKey) and k.action in self.FIRST]
        first.sort(key=lambda k: self.FIRST.index(k.action))
        yield from first + [k for k in keys if k not in first]


class PaneScreen(Screen):
    """Pane bar on top, the pane's body, the status line and the key footer at the bottom.

    A pane sets ``MODE`` to its registry name (``fleet_tui/ui/panes.py``) and yields its widgets
    from ``compose_body``."""

    MODE = ""

    if TYPE_CHECKING:
        @property
        def app(self) -> FleetApp: ...  # every pane runs in the FleetApp

    def compose(self) -> ComposeResult:
        yield PaneBar(self.MODE, self.app.available_panes())
        with Vertical(classes="pane-body"):
            yield from self.compose_body()
        yield StatusLine()
        yield KeyFooter(compact=True)

    def compose_body(self) -> ComposeResult:
        return iter(())

    def mount_later(self, work: Coroutine) -> Worker | None:
        """Run ``work``, a coroutine that mounts widgets after the pane is on screen, as a worker
        that quitting waits for (``FleetApp.action_quit``); once the app is quitting it is not run.
        Textual's shutdown removes a screen's widgets while the ones being mounted still handle
        their mount messages: a Select mounted then raised NoMatches from its own mount handler."""
        if self.app.quitting:
            work.close()
            return None
        return self.run_worker(work, group=MOUNTING, exit_on_error=False)
