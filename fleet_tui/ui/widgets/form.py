"""Labelled form fields laid out in a grid (compact inputs: one line each, so 80×24 still fits)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Label


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

    # A class rather than :focus-within, whose descendants' styles were not refreshed when focus
    # moved between fields (the label stayed unmarked).
    def on_descendant_focus(self) -> None:
        self.add_class("-focused")

    def on_descendant_blur(self) -> None:
        self.remove_class("-focused")


class Check(Checkbox):
    """A checkbox that reads checked or not without colour: ``✔`` when checked, blank when not.
    Textual's draws the same ``X`` in both states and tells them apart by colour alone, which is
    lost under NO_COLOR, on 16-colour terminals and in the light theme."""

    @property
    def BUTTON_INNER(self) -> str:  # noqa: N802 - the name ToggleButton reads
        return "✔" if self.value else " "
