"""Waiting for the Fleet or Jobs pane to draw a view: each drawn view posts the pane's ``ViewDrawn``
message, seen here through ``App.run_test(message_hook=...)``, so the panes carry no test hook."""

from __future__ import annotations

import asyncio

from textual.message import Message

from fleet_tui.ui.fleet import FleetScreen
from fleet_tui.ui.jobs import JobsScreen

DRAWN = (FleetScreen.ViewDrawn, JobsScreen.ViewDrawn)


class ViewsDrawn:
    """Counts the views the panes have drawn; pass ``hook`` as ``run_test``'s ``message_hook``."""

    def __init__(self) -> None:
        self.count = 0
        self._last: Message | None = None  # a bubbling message arrives at the screen, then the app
        self._drawn = asyncio.Event()

    def hook(self, message: Message) -> None:
        if isinstance(message, DRAWN) and message is not self._last:
            self._last = message
            self.count += 1
            self._drawn.set()

    async def next(self, timeout_s: float = 120.0) -> None:
        """Until a view is drawn after this call (generous for a loaded machine)."""
        seen = self.count
        while self.count == seen:
            self._drawn.clear()
            await asyncio.wait_for(self._drawn.wait(), timeout_s)

    async def until(self, condition, timeout_s: float = 120.0) -> None:
        """Views drawn one after another until ``condition()`` holds."""
        while not condition():
            await self.next(timeout_s)
