"""The frame around every pane: the pane bar (click or a number key to switch) and the status line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from fleet_tui.core.redact import redact, redact_spec
from fleet_tui.core.textsafe import clean
from fleet_tui.ui.panes import PaneInfo
from fleet_tui.ui.state import CatalogStatus, SourceStatus

if TYPE_CHECKING:  # for the checker only: the app module imports this one
    from fleet_tui.ui.app import FleetApp


class PaneBar(Horizontal):
    """One clickable label per pane (from the pane registry); the current one is highlighted."""

    DEFAULT_CSS = """
    PaneBar { height: 1; background: $panel; }
    PaneBar > .pane-tab { width: auto; padding: 0 1; color: $text-muted; }
    PaneBar > .pane-tab:hover { background: $boost; color: $text; }
    PaneBar > .pane-tab.-active { background: $primary; color: $text; text-style: bold; }
    PaneBar > #pane-title { width: 1fr; content-align: right middle; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, current: str, panes: tuple[PaneInfo, ...]) -> None:
        super().__init__()
        self._current = current
        self._panes = panes

    def compose(self) -> ComposeResult:
        for pane in self._panes:
            tab = Static(f"{pane.key} {pane.label}", classes="pane-tab", id=f"tab-{pane.mode}")
            tab.set_class(pane.mode == self._current, "-active")
            tab.tooltip = f"Switch to the {pane.label} pane (key {pane.key})"
            yield tab
        yield Static("fleet-tui", id="pane-title")

    def on_click(self, event) -> None:
        widget = event.widget
        if widget is not None and widget.id and widget.id.startswith("tab-"):
            self.app.switch_mode(widget.id.removeprefix("tab-"))


class StatusLine(Static):
    """Source kind badge (LIVE / REPLAY / SIMULATED / FLEET / NO DEVICE), state and catalog state."""

    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    if TYPE_CHECKING:
        @property
        def app(self) -> FleetApp: ...  # the status line shows the FleetApp's state

    def on_mount(self) -> None:
        self.watch(self.app, "source_status", self._refresh_text)
        self.watch(self.app, "catalog_status", self._refresh_text)

    def _refresh_text(self, _value: object = None) -> None:
        self.update(render_status(self.app.source_status, self.app.catalog_status))


def render_status(src: SourceStatus, cat: CatalogStatus) -> str:
    style = {"live": "$success", "replay": "$warning", "simulated": "$warning",
             "fleet": "$primary", "none": "$error"}.get(src.kind, "$text")
    parts = [f"[b reverse {style}] {src.badge} [/]"]
    detail = redact_spec(src.spec or "")  # from the spec's structure: any password character
    if src.kind == "replay" and src.replay_position:
        detail += f" ({src.replay_position})"
    if src.kind != "none" and src.devices:
        detail += f" · {src.devices} device{'s' if src.devices != 1 else ''}"
    if src.kind == "none":
        detail = src.message or "no accelerator found"
    elif src.message and src.kind in ("live", "fleet"):
        detail += f" · {src.message}"
    parts.append(_escape(clean(redact(detail))))
    if src.ended:
        parts.append("[b $warning]ENDED[/] r: restart")
    elif src.kind != "none":
        parts.append("[b $warning]PAUSED[/]" if src.paused else f"every {src.interval_s:g} s")
    if cat.state == "loading":
        parts.append("[$text-muted]catalog loading…[/]")
    elif cat.state == "error":
        parts.append(f"[$error]catalog: {_escape(clean(cat.message))}[/]")
    else:
        parts.append(f"[$text-muted]catalog {cat.instances:,} offers[/]")
    return "  │  ".join(parts)


def _escape(text: str) -> str:
    from textual.markup import escape

    return escape(text)
