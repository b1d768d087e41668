"""The ``?`` help screen: every key of the app and of each pane, read from the bindings themselves."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from fleet_tui.core.monitor.sources import SOURCES
from fleet_tui.ui.panes import PANES, PaneInfo

INTRO = """\
# fleet-tui keys

Switch panes with **{keys}**, by clicking the pane bar, or from the command palette (**ctrl+p**).
In a form field, keys type text: press **escape** to leave the field, then use the pane keys.
The status line at the bottom says where monitor data comes from: **LIVE**, **REPLAY** (a recorded
trace), **SIMULATED**, **FLEET** (Prometheus) or **NO DEVICE**.
"""


def _key_label(binding: Binding) -> str:
    return binding.key_display or binding.key.replace("+", "+").replace("question_mark", "?")


def bindings_markdown(sections: list[tuple[str, list[Binding]]],
                      panes: Sequence[PaneInfo] = PANES) -> str:
    """The help text: the intro (pane keys from the pane registry), one table of keys per section."""
    keys = f"{panes[0].key}–{panes[-1].key}" if len(panes) > 1 else panes[0].key if panes else "—"
    lines = ["# fleet-tui keys\n"]
    intro = INTRO.format(keys=keys).split("\n", 2)[2]  # below the title
    for index, (title, bindings) in enumerate(sections):
        if intro and (index > 0 or not title.endswith("(this pane)")):
            lines.append(intro)  # the current pane's keys first, then how the app works
            intro = ""
        rows = [b for b in bindings if b.description]
        if not rows:
            continue
        lines.append(f"\n## {title}\n\n| key | action |\n|---|---|")
        for b in rows:
            # a binding on several keys with one key_display ("plus,equals_sign" shown as +)
            # is one key to the user: listed once
            keys = b.key_display or ", ".join(_key_label(Binding(k.strip(), b.action))
                                              for k in b.key.split(","))
            lines.append(f"| `{keys}` | {b.description} |")
    return "\n".join(lines) + "\n"


def sources_markdown() -> str:
    """Every monitor source, from the source registry (the palette's "Monitor sources")."""
    lines = ["# Monitor sources\n\nStart the app with `fleet-tui --source SOURCE`; without one, "
             "`auto` is used.\n\n| source | reads |\n|---|---|"]
    lines += [f"| `{info.usage}` | {info.help} |" for info in SOURCES.values()]
    return "\n".join(lines) + "\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: round $primary;
                                   background: $surface; padding: 0 1; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self._text, id="help-text")

    def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
