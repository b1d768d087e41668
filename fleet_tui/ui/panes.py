"""The registry of panes: one ``PaneInfo`` per pane, in pane-bar order.

The app's modes, number keys, pane bar, palette commands and the ``?`` help are all read from
``PANES``; each pane's own keys come from its screen's ``BINDINGS``. Adding a pane is one module
under ``fleet_tui/ui/`` (a ``PaneScreen`` subclass with ``MODE`` set) plus one line here.

Screens are named by import path and imported on first use, so the first frame only pays for the
pane it shows.
"""

from __future__ import annotations

import importlib

from textual.screen import Screen

from fleet_tui.core.records import record


@record
class PaneInfo:
    mode: str  # the App mode (and the screen's MODE)
    key: str  # the key that switches to it
    label: str  # short name: pane bar and footer
    title: str  # long name: help sections and the palette
    tooltip: str  # footer tooltip
    screen: str  # "module:Class" of its PaneScreen
    needs_source: str | None = None  # a source kind the pane needs (hidden without it)
    unavailable: str = ""  # said when its key is pressed without that source


PANES: tuple[PaneInfo, ...] = (
    PaneInfo("catalog", "1", "Catalog", "Catalog", "Instances and prices",
             "fleet_tui.ui.catalog:CatalogScreen"),
    PaneInfo("builder", "2", "Workload", "Workload builder", "Size a workload",
             "fleet_tui.ui.builder:BuilderScreen"),
    PaneInfo("monitor", "3", "Monitor", "Monitor", "Live devices",
             "fleet_tui.ui.monitor:MonitorScreen"),
    PaneInfo("recommend", "4", "Recommend", "Recommendations", "Ranked offers",
             "fleet_tui.ui.recommend:RecommendScreen"),
    PaneInfo("fleet", "5", "Fleet", "Fleet", "Nodes x devices (Prometheus)",
             "fleet_tui.ui.fleet:FleetScreen", needs_source="fleet",
             unavailable="The fleet pane needs a fleet source: start with --source prometheus:URL."),
    PaneInfo("jobs", "6", "Jobs", "Jobs", "Jobs worst first: idle GPUs and their cost",
             "fleet_tui.ui.jobs:JobsScreen", needs_source="fleet",
             unavailable="The jobs pane needs a fleet source: start with --source prometheus:URL "
                         "(exporters with job labels)."),
    PaneInfo("plan", "7", "Plan", "Capacity plan", "Reserved / on-demand / spot mix",
             "fleet_tui.ui.plan:PlanScreen", needs_source="fleet",
             unavailable="The plan pane reads a fleet's history: start with --source "
                         "prometheus:URL --instance TYPE."),
    PaneInfo("queue", "8", "Queue", "Queue what-if", "Scheduling policies side by side",
             "fleet_tui.ui.queue:QueueScreen", needs_source="fleet",
             unavailable="The queue pane belongs to the head-node panes (--source prometheus:URL); "
                         "without a fleet use 'fleet-tui queue simulate FILE'."),
)

BY_MODE: dict[str, PaneInfo] = {pane.mode: pane for pane in PANES}


def pane_class(mode: str) -> type[Screen]:
    """The screen class of pane ``mode``, imported now."""
    module, _, name = BY_MODE[mode].screen.partition(":")
    return getattr(importlib.import_module(module), name)
