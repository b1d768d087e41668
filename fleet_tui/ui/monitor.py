"""Monitor pane: a card per device, host, processes, diagnoses, cost meter.

The pane draws only while it is the current screen. The app's ``MonitorLink`` coalesces engine
ticks and calls ``redraw`` at most a few times a second; when the pane is shown again it redraws
from the latest tick and the core's history, so nothing is lost while it was hidden.
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region
from textual.markup import escape
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey, RowKey

from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.widgets.device_card import DeviceCard
from fleet_tui.ui.widgets.gauges import gauge, human_bytes, pct, usd
from fleet_tui.ui.widgets.table import Table
from fleet_tui.ui.widgets.text import LiveText, update_text

DIAGNOSES_REFRESH_S = 3.0  # numbers in unchanged findings refresh this often
MAX_FINDINGS = 6  # most important first (the engine's order); focus a device to see all of its own
MAX_CARDS = 16  # cards drawn at once; a fleet's devices belong in the Fleet pane's grid
SEVERITY_STYLE = {"critical": "$error", "error": "$error", "warning": "$warning",
                  "warn": "$warning", "info": "$primary"}


class CardsScroll(VerticalScroll):
    """The cards' scroll area; tells the pane when it scrolls (cards off screen are not redrawn
    every tick, so the ones scrolled into view are brought up to date at once)."""

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if old_value != new_value and isinstance(self.screen, MonitorScreen):
            self.screen.cards_scrolled()


class ProcessTable(Table):
    """The process table. ``set_cell`` changes a cell and repaints only its row:
    ``DataTable.update_cell`` repaints every visible row, and on a tick usually one number (a
    growing process's memory) changes."""

    def set_cell(self, row_key: str, column_key: str, value: str) -> None:
        if self.get_cell(row_key, column_key) == value:
            return
        # The same data change update_cell makes (its caches are keyed by the update count),
        # but only the row's lines are marked dirty; the others repaint from the line cache.
        self._data[RowKey(row_key)][ColumnKey(column_key)] = value
        self._update_count += 1
        self.refresh_row(self.get_row_index(row_key))


class MonitorScreen(PaneScreen):
    MODE = "monitor"
    BINDINGS = [
        Binding("p", "pause", "Pause/resume"),
        Binding("plus,equals_sign", "interval(-1)", "Faster", key_display="+"),
        Binding("minus", "interval(1)", "Slower", key_display="-"),
        Binding("f", "focus_device", "Focus device"),
        Binding("escape", "unfocus_device", "All devices", show=False),
    ]
    DEFAULT_CSS = """
    MonitorScreen #mon-top { height: auto; padding: 0 1; }
    MonitorScreen #mon-main { height: 1fr; }
    MonitorScreen #cards { width: 1fr; layout: grid; grid-size: 2; grid-gutter: 0 1; grid-rows: auto; height: 1fr; }
    MonitorScreen #cards.-narrow, MonitorScreen #cards.-focus, MonitorScreen #cards.-single { grid-size: 1; }
    MonitorScreen #mon-side { width: 42; height: 1fr; }
    MonitorScreen #mon-side.-narrow { display: none; }
    MonitorScreen #diagnoses { height: 1fr; border: round $pane-border; padding: 0 1; }
    MonitorScreen #cost { height: auto; border: round $pane-border; padding: 0 1; }
    MonitorScreen #procs { height: 7; }
    MonitorScreen #procs.-short { height: 4; }
    MonitorScreen #mon-message { height: auto; color: $warning; padding: 0 1; }
    """

    focused_key: str | None = None
    _diag_signature: tuple | None = None
    _diag_drawn_at: float = 0.0

    def compose_body(self) -> ComposeResult:
        yield LiveText(id="mon-message")
        yield LiveText(id="mon-top")
        with Horizontal(id="mon-main"):
            yield CardsScroll(id="cards")
            with Vertical(id="mon-side"):
                yield LiveText(id="cost")
                yield VerticalScroll(LiveText(id="diagnoses-text"), id="diagnoses")
        yield ProcessTable(id="procs", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#procs", DataTable)
        for key, label in (("pid", "PID"), ("dev", "device"), ("mem", "GPU memory"),
                           ("user", "user"), ("cmd", "command")):
            table.add_column(label, key=key)
        self.query_one("#diagnoses").border_title = "Diagnoses"
        self.query_one("#cost").border_title = "Cost"
        self._set_narrow(self.size.width, self.size.height)

    def on_resize(self, event) -> None:
        self._set_narrow(event.size.width, event.size.height)

    def _set_narrow(self, width: int, height: int = 40) -> None:
        self.query_one("#procs").set_class(height < 32, "-short")
        self.query_one("#cards").set_class(width < 110, "-narrow")
        self.query_one("#mon-side").set_class(width < 90, "-narrow")

    def cards_scrolled(self) -> None:
        if self.app.monitor is not None:
            self.call_after_refresh(self.app.monitor.redraw_now)  # fill cards that came into view

    def on_screen_resume(self) -> None:
        link = self.app.monitor
        if link is not None:
            link.redraw_now()
        else:
            update_text(self.query_one("#mon-message", Static), 
                "No monitor source. Start with --source sim:8, --source replay:demo or on a GPU host.")

    # ----- drawing (called by MonitorLink, only while this screen is shown) -----
    def redraw(self, view) -> None:
        """``view`` is a MonitorView (see monitor_link.py): latest snapshot + analysis + history."""
        snap = view.snapshot
        message = snap.message or ""
        if snap.source_kind == "replay":
            message = f"REPLAY of a recorded trace ({snap.source}) — not live data."
        elif snap.source_kind == "simulated":
            message = f"SIMULATED devices ({snap.source}) — synthetic data, not real hardware."
        if snap.errors:
            message += ("  " if message else "") + "; ".join(snap.errors)
        update_text(self.query_one("#mon-message", Static), escape(message))
        self._draw_host(snap)
        self._draw_cards(view)
        self._draw_processes(snap)
        self._draw_diagnoses(view)
        self._draw_cost(view)

    def _draw_host(self, snap) -> None:
        host = snap.host
        if host is None:
            update_text(self.query_one("#mon-top", Static), "")
            return
        cpu = None if host.cpu_pct is None else host.cpu_pct / 100
        mem = (host.mem_used_bytes / host.mem_total_bytes
               if host.mem_used_bytes is not None and host.mem_total_bytes else None)
        ram = ("N/A" if host.mem_total_bytes is None else
               f"{human_bytes(host.mem_used_bytes)} of {human_bytes(host.mem_total_bytes)}")
        text = (gauge("CPU", cpu, pct(host.cpu_pct), 10, label_width=4) + "   "
                + gauge("RAM", mem, ram, 10, label_width=4))
        if host.load_avg:
            text += f"   [$text-muted]load[/] {host.load_avg[0]:.2f}"
        update_text(self.query_one("#mon-top", Static), text)

    def _draw_cards(self, view) -> None:
        container = self.query_one("#cards")
        devices = view.snapshot.devices
        if self.focused_key is not None and not any(d.key == self.focused_key for d in devices):
            self.focused_key = None
        shown = [d for d in devices if self.focused_key in (None, d.key)][:MAX_CARDS]
        if len(devices) > MAX_CARDS and self.focused_key is None:
            update_text(self.query_one("#mon-message", Static), 
                f"Showing {MAX_CARDS} of {len(devices)} devices"
                + (" — the Fleet pane (5) shows them all." if self.app.has_fleet else "."))
        container.set_class(len(shown) == 1, "-single")
        container.set_class(self.focused_key is not None, "-focus")
        cards = {c.device_key: c for c in container.query(DeviceCard)}
        wanted = [d.key for d in shown]
        if list(cards) != wanted:  # devices came or went: rebuild the cards once
            container.remove_children()
            cards = {d.key: DeviceCard(d.key) for d in shown}
            container.mount_all(cards.values())
        # the visible part of the cards' scroll canvas (virtual_region is in the same space)
        offset, size = container.scroll_offset, container.scrollable_content_region.size
        viewport = Region(offset.x, offset.y, size.width, size.height)
        for dev in shown:
            card = cards[dev.key]
            if card.drawn and not viewport.overlaps(card.virtual_region):
                continue  # scrolled out of view: drawn again when scrolled back (see on_scroll)
            card.drawn = True
            card.set_class(self.focused_key == dev.key, "-focused")
            card.show(dev, view, detailed=self.focused_key == dev.key)

    def _draw_processes(self, snap) -> None:
        table = self.query_one("#procs", ProcessTable)
        rows = {}
        for dev in snap.devices:
            for proc in dev.processes:
                rows[f"{dev.key}:{proc.pid}"] = (
                    str(proc.pid), f"#{dev.index}",
                    human_bytes(proc.used_gpu_bytes) if proc.used_gpu_bytes is not None else "N/A",
                    proc.user or "", (proc.command or "")[:80])
        existing = {str(k.value) for k in table.rows}
        for key in existing - rows.keys():
            table.remove_row(key)
        columns = ("pid", "dev", "mem", "user", "cmd")
        for key, values in rows.items():
            if key in existing:  # update in place by key, no rebuild; only changed rows repaint
                for column, value in zip(columns, values):
                    table.set_cell(key, column, value)
            else:
                table.add_row(*values, key=key)

    def _draw_diagnoses(self, view) -> None:
        # The findings are judged over a window of several seconds; their sentences' numbers drift
        # every tick. Re-render when the set of findings changes, else at most every few seconds.
        signature = (self.focused_key, tuple((getattr(d, "device_key", None), getattr(d, "kind", None),
                                              getattr(d, "severity", None)) for d in view.diagnoses),
                     bool(view.snapshot.devices))
        now = time.monotonic()
        if signature == self._diag_signature and now - self._diag_drawn_at < DIAGNOSES_REFRESH_S:
            return
        self._diag_signature, self._diag_drawn_at = signature, now
        lines = []
        shown = 0
        findings = view.diagnoses
        for diag in findings:
            style = SEVERITY_STYLE.get(str(getattr(diag, "severity", "info")), "$text")
            where = getattr(diag, "device", None) or getattr(diag, "device_key", None)
            if self.focused_key is not None and getattr(diag, "device_key", None) not in (
                    None, self.focused_key):
                continue  # focused on one device: its diagnoses only
            if self.focused_key is None and shown >= MAX_FINDINGS:
                lines.append(f"[$text-muted]+{len(findings) - shown} more — press f to focus one "
                             "device and see all of its diagnoses[/]")
                break
            shown += 1
            title = getattr(diag, "title", None) or getattr(diag, "kind", "diagnosis")
            head = f"[b {style}]{escape(str(title))}[/]"
            if where not in (None, ""):
                head += f" [$text-muted]· {escape(str(where))}[/]"
            lines.append(head)
            evidence = _as_list(getattr(diag, "evidence", ()))
            if self.focused_key is None:
                evidence = evidence[:1]  # the sentence; the signal values show when focused
            for item in evidence:
                lines.append(f"  [$text-muted]•[/] {escape(str(item))}")
            for item in _as_list(getattr(diag, "actions", ())):
                lines.append(f"  [$accent]→[/] {escape(str(item))}")
        if not lines and not view.snapshot.devices:
            lines = ["[$text-muted]No devices to diagnose.[/]"]
        if not lines:
            lines = ["[$success]No problems seen[/]" if view.analysis_available
                     else "[$text-muted]Analysis not available in this build.[/]"]
        update_text(self.query_one("#diagnoses-text", Static), "\n".join(lines), reserve=True)

    def _draw_cost(self, view) -> None:
        cost = view.cost
        if self.app.instance_error:  # a mistyped --instance: say so instead of pricing it
            text = f"[$warning]{escape(self.app.instance_error)}[/]"
        elif cost is None:
            text = ("[$text-muted]Give --instance TYPE to price this machine.[/]"
                    if not self.app.instance_type else "[$text-muted]Cost not available.[/]")
        else:
            text = "\n".join(f"[$text-muted]{escape(label)}[/] {escape(value)}" for label, value in cost)
        update_text(self.query_one("#cost", Static), text)

    # ----- actions -----
    def action_pause(self) -> None:
        if self.app.monitor is not None:
            self.app.monitor.toggle_pause()

    def action_interval(self, direction: int) -> None:
        if self.app.monitor is not None:
            self.app.monitor.step_interval(direction)

    def action_focus_device(self) -> None:
        link = self.app.monitor
        if link is None or link.latest is None:
            return
        keys = [d.key for d in link.latest.snapshot.devices]
        if not keys:
            return
        if self.focused_key not in keys:
            self.focused_key = keys[0]
        else:
            i = keys.index(self.focused_key)
            self.focused_key = keys[i + 1] if i + 1 < len(keys) else None
        link.set_focus(self.focused_key)
        link.redraw_now()

    def action_unfocus_device(self) -> None:
        if self.focused_key is not None:
            self.focused_key = None
            if self.app.monitor is not None:
                self.app.monitor.set_focus(None)
                self.app.monitor.redraw_now()


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


__all__ = ["MonitorScreen", "usd"]
