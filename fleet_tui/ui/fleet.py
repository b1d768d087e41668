"""Fleet pane (``--source prometheus:URL``): fleet totals, a nodes × devices grid, per-node roll-ups
worst first, the worst devices, and a drill-down into one node.

The roll-ups are the core's ``FleetView`` (``fleet_tui.core.fleet.FleetViews``, the same path as
``fleet`` and ``export``), built in a thread worker from the engine's latest tick (its snapshot and
per-device analyses, windowed by the fleet policy; the engine analyses in its own thread too); this
pane lays them out and updates the node table's changed cells in place (``FleetTable``).

Threads: the worker reads the newest tick (immutable) from the pane and hands back an immutable
``FleetView`` and row texts through ``call_from_thread``; the pane's ``FleetViews`` (which keeps the
last view's devices) is used by one worker at a time under a lock (an exclusive worker that was
superseded may still be running: a thread cannot be stopped), and a superseded worker draws nothing.
Each drawn view posts ``FleetScreen.ViewDrawn`` (what a script or test that waits for views sees).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import Worker, get_current_worker

from fleet_tui.ui import runtime
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.runtime import FrozenSurvivors
from fleet_tui.ui.widgets.fleet_table import FleetTable
from fleet_tui.ui.widgets.gauges import pct, usd
from fleet_tui.ui.widgets.severity import severity_style
from fleet_tui.ui.widgets.text import escape_text

if TYPE_CHECKING:  # for the checker only: the core's fleet loads with the first view
    from fleet_tui.core.fleet import FleetView, FleetViews
    from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
    from fleet_tui.core.monitor.snapshot import Snapshot
    from fleet_tui.ui.monitor_link import MonitorView

    #: the newest tick to draw: its snapshot and each device's analysis
    Tick = tuple[Snapshot, Mapping[str, DeviceAnalysis]]
    #: an aggregated fleet's node read in full: (node, its view or None, why not)
    NodeRead = tuple[str, FleetView | None, str | None]

GRID_ROWS = 48  # nodes drawn in the grid (worst first); the table lists them all
OFFENDERS = 12
NODE_COLUMNS = (("node", "node"), ("n", "devices"), ("util", "util"), ("sm", "SM active"),
                ("mem", "memory"), ("power", "power"), ("worst", "worst"), ("idle", "idle"),
                ("idle_usd", "idle $/h"), ("waste", "waste $/h"))


class FleetViewPane(PaneScreen):
    """A pane drawn from the core's ``FleetViews`` of the engine's newest tick (the fleet and jobs
    panes): ``redraw`` keeps the tick and starts the pane's ``_build`` thread worker, which reads
    it under ``_lock`` (a superseded exclusive worker may still run) and hands an immutable view
    back to the loop; ``view_drawn`` then frees what the refreshes left (``FrozenSurvivors``)
    and posts the pane's message."""

    def __init__(self) -> None:
        super().__init__()
        self._views: FleetViews | None = None  # ticks -> FleetView (keeps converted diagnoses)
        self._lock = threading.Lock()  # one worker at a time uses the views (and the pane's own)
        self._tick: Tick | None = None  # the newest (snapshot, analyses) to draw: what _build reads
        self._frozen = FrozenSurvivors()

    def on_unmount(self) -> None:
        runtime.release_frozen()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A finished view worker lets go of its task. The task's context holds the worker (as
        Textual's ``active_worker``) and the worker its task: a reference cycle per refresh that,
        frozen with the view, waited for a full collection."""
        worker = event.worker
        if worker.node is self and worker.is_finished:
            worker._task = None

    def on_screen_resume(self) -> None:
        if self.app.monitor is not None:
            self.app.monitor.redraw_now()

    def redraw(self, view: MonitorView) -> None:
        """Called by MonitorLink (visible pane only): build the pane's view off the loop."""
        if self._views is None:
            self._views = fleet_views(self.app)
        self._tick = (view.snapshot, view.tick.analyses)
        self._build()

    def _build(self) -> None:
        raise NotImplementedError

    @contextmanager
    def _newest(self) -> Iterator[tuple[FleetViews, Tick] | None]:
        """Inside the views' lock, for a ``_build`` worker: the views and the newest tick, or None
        when a newer tick's worker took over or nothing has been drawn yet."""
        worker = get_current_worker()
        with self._lock:
            views, tick = self._views, self._tick
            yield None if worker.is_cancelled or tick is None or views is None else (views, tick)

    def view_drawn(self, message: Message) -> None:
        """A view is on screen: freeze what survived, post ``message``."""
        engine = self.app.monitor.engine if self.app.monitor is not None else None
        self._frozen.freeze(filling=engine is not None and engine.filling)
        self.post_message(message)


class FleetScreen(FleetViewPane):
    MODE = "fleet"
    BINDINGS = [
        Binding("enter", "drill", "Drill into node", show=False),
        Binding("d", "drill", "Drill into node"),
        Binding("escape", "back", "Whole fleet"),
        Binding("p", "pause", "Pause/resume"),
    ]
    DEFAULT_CSS = """
    FleetScreen #fleet-summary { height: auto; padding: 0 1; }
    FleetScreen #fleet-main { height: 1fr; }
    FleetScreen #fleet-left { width: 1fr; }
    FleetScreen #fleet-nodes { height: 1fr; }
    FleetScreen #fleet-grid { height: auto; max-height: 50%; border: round $pane-border;
                              padding: 0 1; }
    FleetScreen #fleet-side { width: 48; border: round $pane-border; padding: 0 1; }
    FleetScreen #fleet-side.-narrow { display: none; }
    """

    class ViewDrawn(Message):
        """A fleet view was drawn (``view`` is the core FleetView now on screen)."""

        def __init__(self, view) -> None:
            super().__init__()
            self.view = view

    class NodeRead(Message):
        """An aggregated fleet's drilled node was read in full (``FleetScreen.node_read``)."""

    def __init__(self) -> None:
        super().__init__()
        self.view = None  # the latest core FleetView
        self.drill_node: str | None = None
        # an aggregated fleet's drilled node read in full: (node, its one-node view or None, why
        # not); what tests wait on is ``NodeRead``
        self.node_read: NodeRead | None = None
        self._shown: dict[str, str] = {}  # selector -> the markup its Static shows

    def compose_body(self) -> ComposeResult:
        yield Static("waiting for the first fleet reading…", id="fleet-summary")
        with Horizontal(id="fleet-main"):
            with Vertical(id="fleet-left"):
                yield VerticalScroll(Static("", id="fleet-grid-text"), id="fleet-grid")
                yield FleetTable(id="fleet-nodes", cursor_type="row", zebra_stripes=True)
            yield VerticalScroll(Static("", id="fleet-side-text"), id="fleet-side")

    def on_mount(self) -> None:
        table = self.query_one("#fleet-nodes", DataTable)
        for key, label in NODE_COLUMNS:
            table.add_column(label, key=key)
        self.query_one("#fleet-grid").border_title = "Nodes × devices (worst first)"
        self.query_one("#fleet-side").border_title = "Worst devices"
        self.query_one("#fleet-side").set_class(self.size.width < 110, "-narrow")

    def on_resize(self, event) -> None:
        self.query_one("#fleet-side").set_class(event.size.width < 110, "-narrow")

    # ----- drawing -----
    # No arguments: a finished Textual worker is freed only by the cyclic garbage collector (its
    # task's context refers back to it), and with the tick as an argument it kept the whole
    # snapshot (4,096 devices) alive until a full collection: ~100-250 ms with the GIL held, the
    # UI's longest block at 4,096 GPUs (bench/fleet_app_loop.py). The worker reads the newest
    # tick from the pane instead. A description, or Textual builds one from repr().
    @work(thread=True, exclusive=True, group="fleet-view", exit_on_error=False,
          description="the fleet view")
    def _build(self) -> None:
        """Off the loop: the view and every node's table row (512 rows at 4,096 GPUs)."""
        worker = get_current_worker()
        with self._newest() as newest:
            if newest is None:
                return
            fleet = newest[0].view(*newest[1])
        rows = [node_row(n) for n in fleet.nodes]
        drill = self.drill_node  # the texts as of now; _draw redoes them if the user drilled since
        texts = (drill, summary_markup(fleet), grid_markup(fleet, drill),
                 offenders_markup(fleet.offenders, fleet.ages))
        if not worker.is_cancelled:
            self.app.call_from_thread(self._draw_new, fleet, rows, texts)
        if fleet.aggregated and drill is not None and not worker.is_cancelled:
            # the drilled node's devices, read again with each view (after it is drawn: a slow
            # Prometheus delays only the side panel)
            self.app.call_from_thread(self._node_was_read, self._read_node(drill))

    def _read_node(self, node: str) -> NodeRead:
        """An aggregated fleet's node read in full (in a worker: one HTTP request)."""
        from fleet_tui.core.fleet import read_node_view

        prices = self._views.instance_prices if self._views is not None else None
        try:
            return node, read_node_view(self.app.source, node, prices), None
        except Exception as exc:  # noqa: BLE001 - shown in the side panel, never raised
            return node, None, f"{node}: its devices not read: {exc}"

    @work(thread=True, exclusive=True, group="fleet-node", exit_on_error=False,
          description="one node's devices")
    def _fetch_node(self) -> None:
        """Off the loop: the drilled node of an aggregated fleet, at once (not at the next view)."""
        node = self.drill_node
        if node is not None:
            self.app.call_from_thread(self._node_was_read, self._read_node(node))

    def _node_was_read(self, read: NodeRead) -> None:
        if read[0] != self.drill_node:  # the user drilled elsewhere (or back) meanwhile
            return
        self.node_read = read
        if self.view is not None:
            self._draw_drill(self.view)
        self.post_message(self.NodeRead())

    def _draw_new(self, fleet, rows: list[tuple[str, ...]], texts: tuple) -> None:
        self._draw(fleet, rows, texts)
        self.view_drawn(self.ViewDrawn(fleet))

    def _draw(self, fleet, rows: list[tuple[str, ...]] | None = None,
              texts: tuple | None = None) -> None:
        """Lay out ``fleet``; ``rows`` and ``texts`` (drill node, summary, grid, offenders) as
        the worker made them, off the loop."""
        self.view = fleet
        if texts is None or texts[0] != self.drill_node:
            texts = (self.drill_node, summary_markup(fleet), grid_markup(fleet, self.drill_node),
                     None)
        self._set_text("#fleet-summary", texts[1])
        self._draw_nodes(fleet, rows)
        self._set_text("#fleet-grid-text", texts[2])
        if self.drill_node is not None:
            self._draw_drill(fleet)
        else:
            self.query_one("#fleet-side").border_title = (
                "Least-used devices (server)" if fleet.aggregated else "Worst devices")
            self._set_text("#fleet-side-text", texts[3] if texts[3] is not None
                           else offenders_markup(fleet.offenders, fleet.ages))

    def _set_text(self, selector: str, markup: str) -> None:
        """Update a Static only when its text changed (an update re-parses the markup and
        re-renders the widget)."""
        if self._shown.get(selector) != markup:
            self._shown[selector] = markup
            self.query_one(selector, Static).update(markup)

    def _draw_nodes(self, fleet, rows: list[tuple[str, ...]] | None = None) -> None:
        """The node table, worst first: row N shows the N-th worst node (``FleetTable``)."""
        if rows is None:
            rows = [node_row(n) for n in fleet.nodes]
        self.query_one("#fleet-nodes", FleetTable).show_rows(rows)

    def _draw_drill(self, fleet) -> None:
        side = self.query_one("#fleet-side")
        try:
            node = fleet.node(self.drill_node)
        except KeyError as exc:
            self._set_text("#fleet-side-text", f"[$error]{escape_text(str(exc))}[/]")
            return
        side.border_title = f"Node {node.node}"
        ages = fleet.ages
        if fleet.aggregated:  # the roll-up has no devices: the node as read in full, if it was
            read = self.node_read if self.node_read and self.node_read[0] == node.node else None
            if read is None:
                self._set_text("#fleet-side-text", f"{node.device_count} devices · reading "
                               f"{escape_text(node.node)}'s devices from Prometheus…")
                return
            if read[1] is None:
                self._set_text("#fleet-side-text", f"[$error]{escape_text(read[2] or '')}[/]")
                return
            detail = read[1]
            node, ages = detail.node(node.node), detail.ages
        lines = [f"{node.device_count} devices · util {pct(node.mean_gpu_util_pct)} · "
                 f"SM {pct(node.mean_sm_active_pct)} · idle {node.idle_devices}"]
        lines += [escape_text(e) for e in node.errors]
        lines.append("")
        lines.append(offenders_markup(node.devices, ages, with_node=False))
        self._set_text("#fleet-side-text", "\n".join(lines))

    # ----- actions -----
    def action_drill(self) -> None:
        table = self.query_one("#fleet-nodes", DataTable)
        if self.view is None or table.row_count == 0:
            return
        key = table.get_row_at(table.cursor_row)[0]  # the node column
        self.drill_node = "" if key == "(this host)" else key
        self.node_read = None
        self.query_one("#fleet-side").remove_class("-narrow")
        self._draw(self.view)
        if self.view.aggregated:
            self._fetch_node()

    @on(DataTable.RowSelected, "#fleet-nodes")
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_drill()

    def action_back(self) -> None:
        self.drill_node = None
        self.node_read = None
        self.query_one("#fleet-side").set_class(self.size.width < 110, "-narrow")
        if self.view is not None:
            self._draw(self.view)

    def action_pause(self) -> None:
        if self.app.monitor is not None:
            self.app.monitor.toggle_pause()


def summary_markup(fleet) -> str:
    from fleet_tui.core.fleet import PRICE_UNKNOWN
    parts = [f"[b]{fleet.node_count}[/] nodes", f"[b]{fleet.device_count}[/] devices",
             f"util [b]{pct(fleet.utilization_pct)}[/]", f"SM active [b]{pct(fleet.sm_active_pct)}[/]",
             f"efficiency [b]{pct(fleet.efficiency_pct)}[/]"]
    if fleet.usd_per_hour is not None:
        parts.append(f"{usd(fleet.usd_per_hour)}/h")
    idle_cost = (PRICE_UNKNOWN if fleet.usd_per_hour is None
                 else f"{usd(fleet.idle_usd_per_hour)}/h")
    parts.append(f"[$warning]idle {fleet.idle_devices} ({idle_cost})[/]")
    if fleet.waste_usd_per_hour is not None:
        parts.append(f"waste {usd(fleet.waste_usd_per_hour)}/h")
    if fleet.stale_devices:
        parts.append(f"[$error]{fleet.stale_devices} stale[/]")
    text = "  ·  ".join(parts)
    if fleet.aggregate is not None:
        agg = fleet.aggregate
        counts = agg.counts
        text += (f"\n[$accent]aggregated on the server[/]: more than {agg.threshold} devices, so "
                 "Prometheus computes the per-node and per-job means and counts; no per-device "
                 f"diagnosis (d: one node's devices) · memory ≥95% {counts.get('mem_full', 0)} · "
                 f"idle drawing power {counts.get('idle_powered', 0)} · XID {counts.get('xid', 0)} · "
                 f"power-capped {counts.get('power_capped', 0)} · thermal {counts.get('thermal', 0)}")
    if fleet.errors:
        text += "\n[$error]" + escape_text("; ".join(fleet.errors[:3])) + "[/]"
    return text


def node_row(n) -> tuple[str, ...]:
    mem = n.mem_used_pct
    return (n.node or "(this host)", str(n.device_count), pct(n.mean_gpu_util_pct),
            pct(n.mean_sm_active_pct), pct(mem), f"{n.power_w:,.0f} W",
            n.worst_kind.replace("_", " "), str(n.idle_devices),
            usd(n.idle_usd_per_hour if n.usd_per_hour is not None else None),
            usd(n.waste_usd_per_hour))


def _cell(d) -> str:
    style = severity_style(d.severity)
    if d.state != "ok":
        return "[$error]✗✗[/]"
    util = d.gpu_util_pct
    text = "--" if util is None else ("██" if util >= 99.5 else f"{util:2.0f}")
    return f"[{style}]{text}[/]"


def grid_markup(fleet, highlight: str | None = None) -> str:
    if fleet.aggregated:
        return _aggregate_grid(fleet, highlight)
    rows = fleet.grid()
    width = max((len(name or "(this host)") for name, _ in rows[:GRID_ROWS]), default=4)
    lines = []
    for name, devices in rows[:GRID_ROWS]:
        label = escape_text((name or "(this host)").ljust(width))
        if highlight is not None and name == highlight:
            label = f"[reverse]{label}[/]"
        lines.append(f"{label}  " + " ".join(_cell(d) for d in devices))
    if len(rows) > GRID_ROWS:
        lines.append(f"[$text-muted]… {len(rows) - GRID_ROWS} more nodes in the table below[/]")
    lines.append("[$text-muted]cells: util % (██ = 100), colour = worst diagnosis, ✗✗ = stale[/]")
    return "\n".join(lines)


def _aggregate_grid(fleet, highlight: str | None) -> str:
    """An aggregated fleet's nodes (no devices read): the idle share of each node, worst first."""
    nodes = fleet.nodes[:GRID_ROWS]
    width = max((len(n.node) for n in nodes), default=4)
    lines = []
    for n in nodes:
        label = escape_text(n.node.ljust(width))
        if highlight is not None and n.node == highlight:
            label = f"[reverse]{label}[/]"
        busy = n.device_count - n.idle_devices - n.stale_devices
        cells = "[$success]" + "█" * max(0, busy) + "[/][$warning]" + "░" * n.idle_devices + "[/]"
        cells += "[$error]" + "✗" * n.stale_devices + "[/]"
        lines.append(f"{label}  {cells}  util {pct(n.mean_gpu_util_pct)}")
    if len(fleet.nodes) > GRID_ROWS:
        lines.append(f"[$text-muted]… {len(fleet.nodes) - GRID_ROWS} more nodes in the table below[/]")
    lines.append("[$text-muted]per node: █ busy, ░ idle, ✗ stale devices (aggregated on the server)[/]")
    return "\n".join(lines)


def offenders_markup(devices, ages, with_node: bool = True) -> str:
    """``ages``: the readings' ages by device key (``FleetView.ages``)."""
    lines = []
    for d in list(devices)[:OFFENDERS if with_node else None]:
        style = severity_style(d.severity)
        where = f"{d.node}/" if with_node and d.node else ""
        head = f"[b {style}]{escape_text(d.primary.replace('_', ' '))}[/] {escape_text(where)}#{d.index}"
        detail = f"util {pct(d.gpu_util_pct)}"
        if d.sm_active_pct is not None:
            detail += f", SM {pct(d.sm_active_pct)}"
        if d.waste_usd_per_hour:
            detail += f", waste {usd(d.waste_usd_per_hour)}/h"
        if d.state != "ok":
            age_s = ages.get(d.key)
            age = f" {age_s:.0f} s old" if age_s is not None else ""
            detail = f"[$error]{escape_text(d.state)}{age}: {escape_text(d.error or '')}[/]"
        lines.append(f"{head}  [$text-muted]{detail}[/]")
    return "\n".join(lines) or "[$success]No devices reporting problems.[/]"


def fleet_views(app):
    """The core's ``FleetViews`` for this app's fleet (the node price from ``--instance``)."""
    from fleet_tui.core.fleet import FleetViews

    return FleetViews(node_usd_per_hour(app))


def node_usd_per_hour(app) -> float | None:
    """$/h of one node from ``--instance`` (the core picks the catalog row); None when no instance
    was given or it is unknown (the app already warned about it)."""
    if not app.instance_type or app.catalog is None:
        return None
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.monitor.cost import choose_instance

    try:
        return choose_instance(app.catalog, app.instance_type).usd_per_hour
    except UserError:
        return None
