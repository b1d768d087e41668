"""Monitor pane: a device table with each device's primary diagnosis, the cost, the diagnoses;
cards, history graphs and processes when the terminal has room.

Small screen first: at 80×24 the first screen shows the host line, one table row per
device (numbers and primary diagnosis, up to 8 without scrolling), the cost (idle dollars
included) and the diagnoses; Enter on a row opens that device's card, escape closes it. From
110×40 the table is followed by a grid of cards as wide as the terminal allows, the side panel
(cost, diagnoses) and the process table.

The pane draws only while it is the current screen. The app's ``MonitorLink`` coalesces engine
ticks and calls ``redraw`` at most a few times a second; when the pane is shown again it redraws
from the latest tick and the core's history, so nothing is lost while it was hidden.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region
from textual.markup import escape
from textual.widgets import Static

from fleet_tui.core.monitor.severity import severity_rank
from fleet_tui.ui import runtime
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.widgets.device_card import DeviceCard
from fleet_tui.ui.widgets.device_table import DeviceTable
from fleet_tui.ui.widgets.diagnosis_text import diagnosis_lines
from fleet_tui.ui.widgets.gauges import gauge_parts, human_bytes, pct, usd
from fleet_tui.ui.widgets.process_table import ProcessTable
from fleet_tui.ui.widgets.text import LiveText, styled_line, update_text

if TYPE_CHECKING:  # for the checker only: the engine loads after the first frame (start-up time)
    from textual.events import Resize

    from fleet_tui.core.monitor.cost import CostState
    from fleet_tui.core.monitor.engine import Finding
    from fleet_tui.core.monitor.snapshot import ProcessInfo, Snapshot
    from fleet_tui.ui.monitor_link import MonitorView

# Numbers in unchanged findings refresh this often: re-rendering the panel's ~30 wrapped lines took
# ~20 ms a time (bench/bench_monitor_cpu.py), and the findings are judged over a 5 s window anyway.
DIAGNOSES_REFRESH_S = 5.0
MAX_FINDINGS = 6  # most important first (the engine's order); focus a device to see all of its own
MAX_FINDINGS_COMPACT = 3  # the small screen's table already shows every device's primary one
MAX_CARDS = 16  # cards drawn at once; a fleet's devices belong in the Fleet pane's grid


class CardsScroll(VerticalScroll):
    """The cards' scroll area; tells the pane when it scrolls (cards off screen are not redrawn
    every tick, so the ones scrolled into view are brought up to date at once)."""

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if old_value != new_value and isinstance(self.screen, MonitorScreen):
            self.screen.cards_scrolled()


WIDE_AT = (110, 40)  # (columns, rows) from which cards, side panel and processes are shown
CARD_WIDTH = 48  # a card's comfortable width: the grid gets as many columns as fit
SIDE_WIDTH = 42  # the side panel's least width


def side_width(columns: int, focused: bool = False) -> int:
    """The side panel's width at ``columns``: what whole cards leave (at 200 columns 56, beside
    three cards), or half the width beside one device's card, so the diagnoses' sentences and
    evidence wrap less as the terminal widens."""
    if focused:
        return max(SIDE_WIDTH, columns // 2)
    cards = max(1, (columns - SIDE_WIDTH) // CARD_WIDTH)
    return max(SIDE_WIDTH, columns - cards * CARD_WIDTH)


# What the app can show without a device: it is started so, there is no field for it.
NO_DEVICE_TRY = ("No device here? Start the app on a recorded H200, fleet-tui --source replay:demo, "
                 "or on simulated ones, fleet-tui --source sim:8.")


class MonitorScreen(PaneScreen):
    MODE = "monitor"
    BINDINGS = [
        Binding("p", "pause", "Pause/resume"),
        Binding("plus,equals_sign", "interval(-1)", "Faster", key_display="+"),
        Binding("minus", "interval(1)", "Slower", key_display="-"),
        Binding("f", "focus_device", "Next device"),
        Binding("escape", "unfocus_device", "All devices", show=False),
        Binding("r", "restart_replay", "Restart replay"),  # shown once a replay has ended
    ]
    DEFAULT_CSS = """
    MonitorScreen #mon-top { height: auto; padding: 0 1; }
    MonitorScreen #cost-line { height: auto; padding: 0 1; }
    MonitorScreen #mon-main { height: 1fr; }
    MonitorScreen #cards { width: 1fr; layout: grid; grid-size: 2; grid-gutter: 0 1; grid-rows: auto; height: 1fr; }
    MonitorScreen #mon-side { width: 42; height: 1fr; }
    MonitorScreen #diagnoses { height: 1fr; border: round $pane-border; padding: 0 1; }
    MonitorScreen #cost { height: auto; border: round $pane-border; padding: 0 1; }
    MonitorScreen #procs { height: 7; }
    MonitorScreen #mon-message { height: auto; color: $warning; padding: 0 1; }
    MonitorScreen .-compact #cards { display: none; }
    MonitorScreen .-compact #cards.-focus { display: block; grid-size: 1; }
    MonitorScreen .-compact #mon-side { width: 1fr; }
    MonitorScreen .-compact #mon-side.-focus { display: none; }
    MonitorScreen .-compact #cost { display: none; }
    MonitorScreen .-compact #procs { display: none; }
    MonitorScreen .-wide #cost-line { display: none; }
    MonitorScreen #cards.-focus { grid-size: 1; }
    """

    AUTO_FOCUS = "#devices"  # up/down move through the devices, Enter opens one
    focused_key: str | None = None
    _diag_signature: tuple[object, ...] | None = None
    _procs_seen: tuple[object, ...] | None = None  # (the table, each device's processes) last drawn
    # (device key, index, process) -> (row key, cells) of the last tick
    _proc_rows: dict[tuple[str, int, ProcessInfo], tuple[str, tuple[str, ...]]] = {}
    _diag_drawn_at: float = 0.0
    _diag_shown: tuple[tuple[str, str], ...] = ()  # (device key, kind) of the findings last drawn

    def compose_body(self) -> ComposeResult:
        yield LiveText(id="mon-message")
        yield LiveText(id="mon-top")
        yield DeviceTable(id="devices")
        yield LiveText(id="cost-line")
        with Horizontal(id="mon-main"):
            yield CardsScroll(id="cards")
            with Vertical(id="mon-side"):
                yield LiveText(id="cost")
                yield VerticalScroll(LiveText(id="diagnoses-text"), id="diagnoses")
        yield ProcessTable(id="procs")

    def on_mount(self) -> None:
        self.query_one("#diagnoses").border_title = "Diagnoses · Enter on a device: its card"
        self.query_one("#cost").border_title = "Cost"
        self._set_size_class(self.size.width, self.size.height)

    def on_resize(self, event: Resize) -> None:
        self._set_size_class(event.size.width, event.size.height)

    wide = False  # cards, side panel and processes shown (set with the size classes)

    def _set_size_class(self, width: int, height: int) -> None:
        wide = self.wide = width >= WIDE_AT[0] and height >= WIDE_AT[1]
        body = self.query_one(".pane-body")
        body.set_class(wide, "-wide")
        body.set_class(not wide, "-compact")
        table = self.query_one("#devices", DeviceTable)
        table.max_rows = 8 if height < 40 else 16
        table.display = not (self.focused_key is not None and not wide)
        self._grid_columns()

    def _grid_columns(self, cards: int | None = None) -> None:
        """As many card columns as fit the width (one per device at most)."""
        container = self.query_one("#cards")
        if cards is None:
            cards = max(len(container.children), 1)
        focused = self.focused_key is not None
        side = side_width(self.size.width, focused)
        # wide: the side panel takes its share of the width; compact: all of it (a line each)
        want = side if self.wide else "1fr"
        panel = self.query_one("#mon-side")
        if str(panel.styles.width) != str(want if isinstance(want, str) else f"{want}"):
            panel.styles.width = want
        width = self.size.width - side
        columns = 1 if focused else max(1, min(cards, width // CARD_WIDTH))
        if container.styles.grid_size_columns != columns:
            container.styles.grid_size_columns = columns

    def on_device_table_selected(self, event: DeviceTable.Selected) -> None:
        """Enter on a device row: its card, with all of its diagnoses (escape: all devices)."""
        key = event.device_key
        self.focused_key = None if self.focused_key == key else key
        self._apply_focus()

    def cards_scrolled(self) -> None:
        if self.app.monitor is not None:
            self.call_after_refresh(self.app.monitor.redraw_now)  # fill cards that came into view

    def on_screen_resume(self) -> None:
        link = self.app.monitor
        if link is not None:
            link.redraw_now()
        else:
            update_text(self.query_one("#mon-message", Static), f"No monitor source. {NO_DEVICE_TRY}")

    # ----- drawing (called by MonitorLink, only while this screen is shown) -----
    def redraw(self, view: MonitorView) -> None:
        """Draw ``view``, a MonitorView (monitor_link.py), in one batch: one frame paints it."""
        runtime.settle_after_first_tick()  # the first tick comes after the catalog has loaded
        with self.app.batch_update():
            self._redraw(view)

    def _redraw(self, view: MonitorView) -> None:
        snap = view.snapshot
        message = snap.message or ""
        if snap.source_kind == "replay" and self.app.source_status.ended:
            message = (f"REPLAY ENDED: {snap.source} played to its end; showing its last "
                       "snapshot. Press r to play it again.")
        elif snap.source_kind == "replay":
            message = f"REPLAY of a recorded trace ({snap.source}) — not live data."
        elif snap.source_kind == "simulated":
            message = f"SIMULATED devices ({snap.source}) — synthetic data, not real hardware."
        elif snap.source_kind == "none":  # what to do first, then why each backend failed
            message = (f"{NO_DEVICE_TRY} Why: {message}" if message else NO_DEVICE_TRY)
        if snap.errors:
            message += ("  " if message else "") + "; ".join(snap.errors)
        cards_message = self._draw_cards(view)  # one update a tick: each one repaints the line
        update_text(self.query_one("#mon-message", Static),
                    escape(message) if cards_message is None else cards_message)
        self._draw_host(snap)
        self._draw_table(view)
        if self.wide:  # the process table shows from 110×40 only
            self._draw_processes(snap)
        self._draw_diagnoses(view)
        self._draw_cost(view)

    def _draw_host(self, snap: Snapshot) -> None:
        host = snap.host
        if host is None:
            update_text(self.query_one("#mon-top", Static), "")
            return
        cpu = None if host.cpu_pct is None else host.cpu_pct / 100
        mem = (host.mem_used_bytes / host.mem_total_bytes
               if host.mem_used_bytes is not None and host.mem_total_bytes else None)
        ram = ("N/A" if host.mem_total_bytes is None else
               f"{human_bytes(host.mem_used_bytes)} of {human_bytes(host.mem_total_bytes)}")
        parts = (gauge_parts("CPU", cpu, pct(host.cpu_pct), 10, label_width=4) + [("   ", None)]
                 + gauge_parts("RAM", mem, ram, 10, label_width=4))
        if host.load_avg:
            parts += [("   ", None), ("load", "$text-muted"), (f" {host.load_avg[0]:.2f}", None)]
        self.query_one("#mon-top", LiveText).set_lines([styled_line(parts)])

    def _draw_table(self, view: MonitorView) -> None:
        self.query_one("#devices", DeviceTable).show(view.snapshot.devices, view.tick.analyses,
                                                     self.size.width)

    def _draw_cards(self, view: MonitorView) -> str | None:
        """Draw the cards in view; returns the banner that says some devices have no card."""
        container = self.query_one("#cards")
        devices = view.snapshot.devices
        if self.focused_key is not None and not any(d.key == self.focused_key for d in devices):
            self.focused_key = None
            self._apply_focus(redraw=False)
        if self.focused_key is None and not self.wide:
            return None  # compact: the table says it all; cards only for the device opened with Enter
        shown = [d for d in devices if self.focused_key in (None, d.key)][:MAX_CARDS]
        message = None
        if len(devices) > MAX_CARDS and self.focused_key is None:
            message = (f"Showing {MAX_CARDS} of {len(devices)} devices"
                       + (" — the Fleet pane (5) shows them all." if self.app.has_fleet else "."))
        cards = {c.device_key: c for c in container.children  # a CSS query: ~1 ms a tick
                 if isinstance(c, DeviceCard)}
        wanted = [d.key for d in shown]
        if list(cards) != wanted:  # devices came or went: rebuild the cards once
            container.remove_children()
            cards = {d.key: DeviceCard(d.key) for d in shown}
            container.mount_all(cards.values())
            self._grid_columns(len(shown))
        # The cards' scroll canvas in view (virtual_region follows a scroll at once, a screen region
        # only after a layout). A widget refreshed off screen makes Textual re-arrange them all.
        offset, size = container.scroll_offset, container.scrollable_content_region.size
        viewport = Region(offset.x, offset.y, size.width, size.height)
        for dev in shown:
            card = cards[dev.key]
            if card.drawn and not viewport.overlaps(card.virtual_region):
                continue  # scrolled out of view: drawn again when scrolled back (see on_scroll)
            clip = viewport if card.drawn else None  # a card laid out once knows its parts' place
            card.drawn = True
            card.set_class(self.focused_key == dev.key, "-focused")
            card.show(dev, view, detailed=self.focused_key == dev.key, clip=clip)
        return message

    def _draw_processes(self, snap: Snapshot) -> None:
        # The same processes as last tick (compared by value; a source that keeps its process
        # tuples makes it an identity check): nothing to format. Otherwise only a process not
        # seen last tick (a new one, or its memory moved) is formatted again (64 devices: the
        # rows cost ~0.4 ms a tick).
        table = self.query_one("#procs", ProcessTable)
        seen = (table, [(dev.key, dev.index, dev.processes) for dev in snap.devices])
        if seen == self._procs_seen:
            return
        self._procs_seen = seen
        last: dict[tuple[str, int, ProcessInfo], tuple[str, tuple[str, ...]]] = self._proc_rows
        made: dict[tuple[str, int, ProcessInfo], tuple[str, tuple[str, ...]]] = {}
        rows: dict[str, tuple[str, ...]] = {}
        for dev in snap.devices:
            for proc in dev.processes:
                at = (dev.key, dev.index, proc)
                row = last.get(at)
                if row is None:
                    row = (f"{dev.key}:{proc.pid}", (
                        str(proc.pid), f"#{dev.index}",
                        human_bytes(proc.used_gpu_bytes) if proc.used_gpu_bytes is not None else "N/A",
                        proc.user or "", (proc.command or "")[:80]))
                made[at] = row
                rows[row[0]] = row[1]
        self._proc_rows = made
        table.show_rows(rows)

    def _draw_diagnoses(self, view: MonitorView) -> None:
        # The findings are judged over a window of several seconds; their sentences' numbers drift
        # every tick. Re-render when the set of findings changes, else at most every few seconds.
        findings = view.diagnoses  # built when read: once per draw
        focused = self.focused_key
        now = time.monotonic()
        if focused is not None:  # focused on one device: all of its diagnoses, no others
            shown = [d for d in findings if d.device_key == focused]
            more = 0
        else:
            limit = MAX_FINDINGS if self.wide else MAX_FINDINGS_COMPACT
            shown = self._kept_findings(findings, limit, now)
            more = len(findings) - len(shown)
        # Only what is shown counts, as a set: findings of equal rank swap places from one tick
        # to the next (sim:8 at 0.25 s: the shown tuple changed on 34 of 60 draws, the set on 14),
        # and each change re-rendered the panel's wrapped lines. A new order shows within
        # DIAGNOSES_REFRESH_S, as the numbers in the sentences do, and so does the count of the
        # findings left out ("+N more"; on 64 devices it moved on most ticks).
        signature = (focused, frozenset((d.device_key, d.kind, d.severity, d.primary,
                                         d.diagnosis.headline if d.primary else None)
                                        for d in shown),
                     more > 0, bool(view.snapshot.devices))
        if signature == self._diag_signature and now - self._diag_drawn_at < DIAGNOSES_REFRESH_S:
            return
        self._diag_signature, self._diag_drawn_at = signature, now
        self._diag_shown = tuple(_finding_id(d) for d in shown) if focused is None else ()
        # Lines built as (text, style) parts, not markup to parse: a re-render after the findings
        # changed parsed every changed line's markup again (a third of its ~3 ms on sim:8). The
        # words come from diagnosis_lines, as the card's do.
        lines = []
        for diag in shown:
            lines += diagnosis_lines(diag.diagnosis, where=diag.device or diag.device_key,
                                     evidence=focused is not None,
                                     primary=diag.primary)
        if more:
            lines.append(styled_line([(f"+{more} more — Enter on a device shows all of its "
                                       "diagnoses", "$text-muted")]))
        if not lines and not view.snapshot.devices:
            lines = [styled_line([("No devices to diagnose.", "$text-muted")])]
        if not lines:
            lines = [styled_line([("No problems seen", "$success")])]
        self.query_one("#diagnoses-text", LiveText).set_lines(lines, reserve=True)

    def _kept_findings(self, findings: Sequence[Finding], limit: int, now: float) -> list[Finding]:
        """The ``limit`` most important findings, or, until the panel's next refresh, the ones
        it shows while each of them is still found, none left out is more severe than the least
        severe shown, and none is left out while there is room. Findings of one severity are
        ranked by confidence, which moves every tick: with 64 devices, ~36 warnings of near
        equal confidence swapped places in the top six on 6 of 40 draws at 1 s (each a
        re-render of the panel, ~2-3 ms), and the panel reshuffled under the reader's eyes."""
        kept_ids = self._diag_shown
        top = list(findings[:limit])
        if (not kept_ids or now - self._diag_drawn_at >= DIAGNOSES_REFRESH_S
                or (len(kept_ids) < limit and len(findings) > len(kept_ids))):
            return top
        found = {_finding_id(d): d for d in findings}
        if any(i not in found for i in kept_ids):
            return top
        kept = [found[i] for i in kept_ids]
        # a device shown must show its primary of this tick, first (what its row says)
        primaries = {d.device_key: d for d in findings if d.primary}
        seen: set[str] = set()
        for d in kept:
            if d.device_key not in seen:
                seen.add(d.device_key)
                if primaries.get(d.device_key) is not d:
                    return top

        def rank(diag: Finding) -> int:
            return severity_rank(diag.severity)

        least = max(rank(d) for d in kept)
        shown = {id(d) for d in kept}
        if any(rank(d) < least for d in findings if id(d) not in shown):
            return top
        return kept

    def _draw_cost(self, view: MonitorView) -> None:
        cost = view.cost
        if not self.wide:  # only the shown one is drawn (a hidden text has no width to lay out)
            self._draw_cost_line(cost)
            return
        if self.app.instance_error:  # a mistyped --instance: say so instead of pricing it
            text = f"[$warning]{escape(self.app.instance_error)}[/]"
        elif cost is None:
            text = ("[$text-muted]Give --instance TYPE to price this machine.[/]"
                    if not self.app.instance_type else "[$text-muted]Cost not available.[/]")
        else:
            text = "\n".join(f"[$text-muted]{escape(label)}[/] {escape(value)}"
                             for label, value in cost.lines())
        update_text(self.query_one("#cost", Static), text)

    def _draw_cost_line(self, cost: CostState | None) -> None:
        """The small screen's one cost line: rate, spent so far, idle and waiting dollars."""
        if self.app.instance_error:
            text = f"[$warning]cost: {escape(self.app.instance_error)}[/]"
        elif cost is None:
            text = ("[$text-muted]cost: give --instance TYPE to price this machine[/]"
                    if not self.app.instance_type else "[$text-muted]cost not available[/]")
        elif cost.usd_per_hour is None:  # unpriced: say how to price it, in one line
            text = ("[b]cost[/] [$text-muted]instance unknown: give --instance TYPE[/]"
                    + (f" [$text-muted](e.g. {escape(cost.candidates[0])})[/]"
                       if cost.candidates else ""))
        else:
            short = [("rate", f"{usd(cost.usd_per_hour)}/h"), ("spent", usd(cost.usd_so_far)),
                     ("idle", usd(cost.usd_idle)), ("waiting", usd(cost.usd_waiting))]
            if cost.efficiency is not None:
                short.append(("", f"{cost.efficiency:.0%} useful"))
            text = "[b]cost[/] " + "  ".join(f"[$text-muted]{label}[/] {escape(value)}".strip()
                                             for label, value in short)
        update_text(self.query_one("#cost-line", Static), text)

    # ----- actions -----
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "restart_replay":
            return self.app.source_status.ended  # hidden until a replay has ended
        return True

    async def action_restart_replay(self) -> None:
        if self.app.monitor is not None and self.app.source_status.ended:
            await self.app.monitor.restart()

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
        self._apply_focus()

    def action_unfocus_device(self) -> None:
        if self.focused_key is not None:
            self.focused_key = None
            self._apply_focus()

    def _apply_focus(self, redraw: bool = True) -> None:
        focused = self.focused_key is not None
        # the small screen gives an opened card all of its rows: the answer first, then readings
        self.query_one("#devices").display = not (focused and not self.wide)
        self.query_one("#cards").set_class(focused, "-focus")
        self.query_one("#mon-side").set_class(focused, "-focus")
        self._grid_columns()
        link = self.app.monitor
        if link is not None:
            link.set_focus(self.focused_key)
            if redraw:
                link.redraw_now()


def _finding_id(diag: Finding) -> tuple[str, str]:
    return (diag.device_key, diag.kind)


__all__ = ["MonitorScreen", "usd"]
