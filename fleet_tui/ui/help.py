"""The ``?`` help screen: a compact two-column key list, the current pane's keys first.

Keys come from the bindings themselves, plus the few keys a pane's widgets handle without a
binding (a table's arrows and Enter: ``WIDGET_KEYS``). Each key is one line of a column, so the
current pane and the keys that work everywhere fit an 80×24 terminal's first screen; the other
panes follow below (scroll).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from fleet_tui.core.monitor.sources import SOURCES

# Keys a pane's widgets answer without a Binding of the pane (so the bindings cannot list them),
# by pane mode: shown first, as they are what the pane is used with.
WIDGET_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "catalog": (("↑ ↓", "choose an offer"), ("enter", "the offer in full")),
    "builder": (("↑ ↓", "scroll the results"),),
    "monitor": (("↑ ↓", "choose a device"), ("enter", "the device's card")),
    "recommend": (("↑ ↓", "choose an offer"),),
    "fleet": (("↑ ↓", "choose a node"),),
    "jobs": (("↑ ↓", "choose a job"),),
}
KEY_NAMES = {"slash": "/", "escape": "esc", "question_mark": "?", "plus": "+", "minus": "-",
             "equals_sign": "=", "pagedown": "PgDn", "pageup": "PgUp"}
TITLE = "fleet-tui keys"
NOTE = ("Status line: LIVE, REPLAY, SIMULATED, FLEET or NO DEVICE says where the data comes from. "
        "In a form field keys type text: esc leaves the field.")
GAP = 3  # spaces between the two columns


class HelpSection(NamedTuple):
    title: str
    keys: tuple[tuple[str, str], ...]  # (key as shown, what it does)


def key_label(binding: Binding) -> str:
    """``plus,equals_sign`` with key_display ``+`` -> ``+``; ``slash`` -> ``/``."""
    if binding.key_display:
        return binding.key_display
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in binding.key.split(","))


def binding_keys(bindings: Sequence[Binding]) -> tuple[tuple[str, str], ...]:
    """(keys, description) per described binding; bindings with one description are one line
    (``enter d  Drill into node``)."""
    merged: dict[str, list[str]] = {}
    for b in bindings:
        if b.description:
            label = key_label(b)
            keys = merged.setdefault(b.description, [])
            if label not in keys:
                keys.append(label)
    return tuple((" ".join(keys), description) for description, keys in merged.items())


def pane_section(mode: str, title: str, bindings: Sequence[Binding]) -> HelpSection:
    return HelpSection(title, WIDGET_KEYS.get(mode, ()) + binding_keys(bindings))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line]


def format_help(sections: Sequence[HelpSection], width: int = 76, note_after: int = 2) -> str:
    """The help as plain lines no wider than ``width``: per section a title and its keys in two
    columns (key, then what it does), filled row by row; the note after the first
    ``note_after`` sections (the current pane's and the keys that work everywhere)."""
    lines = [TITLE + "? or esc closes".rjust(max(width - len(TITLE), 0))]
    for index, section in enumerate(sections):
        if index == note_after:
            lines += [*_wrap(NOTE, width), ""]
        lines.append(section.title)
        key_w = min(max((len(k) for k, _ in section.keys), default=1), 14)
        col_w = max((width - GAP) // 2, key_w + 8)
        step = 2 if 2 * col_w + GAP <= width else 1
        cells = [_clip(f"  {k:<{key_w}}  {what}", col_w) for k, what in section.keys]
        for i in range(0, len(cells), step):
            lines.append((" " * GAP).join(c.ljust(col_w) for c in cells[i:i + step]).rstrip())
    if len(sections) <= note_after:
        lines += _wrap(NOTE, width)
    return "\n".join(lines) + "\n"


def sources_markdown() -> str:
    """Every monitor source, from the source registry (the palette's "Monitor sources")."""
    lines = ["# Monitor sources\n\nStart the app with `fleet-tui --source SOURCE`; without one, "
             "`auto` is used.\n\n| source | reads |\n|---|---|"]
    lines += [f"| `{info.usage}` | {info.help} |" for info in SOURCES.values()]
    return "\n".join(lines) + "\n"


class HelpText(Static):
    """The key list, laid out again for the width it gets."""

    def __init__(self, sections: Sequence[HelpSection]) -> None:
        super().__init__(format_help(sections), id="help-text", markup=False)
        self.sections = tuple(sections)

    def on_resize(self, event: Resize) -> None:
        self.update(format_help(self.sections, max(event.size.width, 20)))


class HelpScreen(ModalScreen[None]):
    """The key list (``sections``) or a Markdown page (the monitor sources)."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100%; max-width: 100; height: 100%; max-height: 40;
                                   border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen #help-text { width: 100%; }
    """

    def __init__(self, content: Sequence[HelpSection] | str) -> None:
        super().__init__()
        self._content = content

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            if isinstance(self._content, str):
                yield Markdown(self._content, id="help-markdown")
            else:
                yield HelpText(self._content)

    def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
