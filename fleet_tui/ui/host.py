"""The app's shared state, as the panes and the monitor link see it, without importing the app.

:class:`FleetApp` (``ui/app.py``) imports every pane and the monitor link; they in turn need to name
what they read and call on the app. They name this base class instead, so no module imports the one
that imports it (``tests/test_import_cycles.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.reactive import var

from fleet_tui.ui.state import CatalogStatus, SourceStatus

if TYPE_CHECKING:  # for the checker only: these load after the first frame (start-up time)
    from fleet_tui.core.catalog.models import Catalog
    from fleet_tui.core.monitor.source import Source
    from fleet_tui.core.workload import Workload
    from fleet_tui.ui.state import BuilderChoice


class AppHost(App[int]):
    """The reactive state the panes watch, and the app's settings the monitor link reads."""

    source_status: var[SourceStatus] = var(SourceStatus())
    catalog_status: var[CatalogStatus] = var(CatalogStatus())
    catalog: var[Catalog | None] = var(None)  # once loaded
    workload: var[Workload | None] = var(None)  # the workload the builder last produced
    builder_context: var[BuilderChoice | None] = var(None)  # accelerator, hours, spot, current

    source_spec: str | None
    source: Source | None  # an unopened core Source (or None: no monitor)
    record_db: Path | None  # --record: keep the history
    catalog_settled: asyncio.Event  # set once the catalog loaded or failed (made on mount)

    def priced_instance(self) -> str | None:
        """The instance type to price this machine as (None when unknown to the catalog)."""
        raise NotImplementedError
