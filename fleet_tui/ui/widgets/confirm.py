"""A yes/no modal for a choice that loses data (replacing a file the user already has)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label


class Confirm(ModalScreen[bool]):
    """``y`` answers True; ``n`` or ``escape`` False (the safe answer is the default)."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n", "answer(False)", "No"),
                Binding("escape", "answer(False)", "No")]
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 70; height: auto; border: round $warning; background: $surface;
                         padding: 0 1; }
    Confirm #confirm-keys { color: $text-muted; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question, id="confirm-question", markup=False)  # a path is text
            yield Label("y: yes   n / escape: no", id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
