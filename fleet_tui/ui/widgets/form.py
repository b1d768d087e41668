"""Labelled form fields laid out in a grid (compact inputs: one line each, so 80×24 still fits)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Label


class Field(Vertical):
    """A one-line label above one compact input/select/checkbox."""

    DEFAULT_CSS = """
    Field { height: 2; width: 1fr; padding: 0 1 0 0; }
    Field > Label { height: 1; color: $text-muted; }
    Field > * { width: 1fr; }
    """

    def __init__(self, label: str, widget: Widget, **kwargs) -> None:
        super().__init__(**kwargs)
        self._label = label
        self._widget = widget

    def compose(self) -> ComposeResult:
        yield Label(self._label)
        yield self._widget
