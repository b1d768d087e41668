"""Text from outside (network labels, HTTP error bodies, file contents) made safe to print.

A Prometheus label such as ``Hostname="node\\x1b]0;pwned\\x07"`` would, printed raw, retitle the
user's terminal; a label with a newline would split a table row in two. Every front end (CLI
tables and messages, the TUI's cells, notifications and titles) passes remote text through
``clean`` first: control characters (C0, DEL, C1), and the Unicode line/paragraph separators and
bidirectional overrides that reorder what is shown, become ``?``; a tab or newline becomes one
space. Long text is cut to ``max_chars`` with an ellipsis. The TUI then shows it as Rich ``Text``,
never as markup, so ``[bold]`` in a label is shown as typed. JSON output and ``/metrics`` need none
of this (their encoders escape), so they keep the text as received.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import TextIO

REPLACEMENT = "?"
# C0 controls but tab/newline/CR (those become a space), DEL, C1, and the Unicode characters that
# move or reorder text: LINE/PARAGRAPH SEPARATOR, bidi embeddings/overrides/isolates, BOM
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_SPACES = re.compile("[\t\n\r]+")
# a cell or label longer than this is cut: nothing the network sends may make a row unbounded
MAX_CHARS = 512


def clean(text: object, *, max_chars: int = MAX_CHARS) -> str:
    """``text`` (any object, as ``str``) with no character that can move the cursor, change the
    terminal's state or break a line; at most ``max_chars`` characters (see module doc)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) > max_chars:
        s = s[: max_chars - 1] + "…"
    if s.isprintable():
        return s
    return _UNSAFE.sub(REPLACEMENT, _SPACES.sub(" ", s))


def clean_lines(text: object, *, max_chars: int = 64 * MAX_CHARS) -> str:
    """As ``clean`` but newlines kept (a multi-line message, an error with its problems listed)."""
    s = text if isinstance(text, str) else str(text)
    return "\n".join(clean(line, max_chars=max_chars) for line in s.split("\n"))


# in a stream, tab and newline stay (lines and tables are made of them); CR would let a line
# overwrite what was printed before it, so it goes with the rest
_STREAM_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class SafeStream(io.TextIOBase):
    """A text stream (``sys.stdout``) that writes no control character but tab and newline: the
    CLI wraps its output in one, so no message, table or warning built from remote text can
    reach the terminal as an escape sequence, whichever ``print`` made it. JSON is unchanged
    (its encoder already writes control characters as ``\\u001b``). ``masks=True`` (a command
    line that held a secret) also masks every secret seen, in whatever the command prints."""

    def __init__(self, raw: TextIO, *, masks: bool = False):
        super().__init__()
        self.raw = raw
        self._mask: Callable[[str], str] | None = None
        if masks:  # also through core.redact.redact: secrets seen are never written (imported
            from fleet_tui.core.redact import (
                redact,  # only then: urllib costs ~3 ms of a start)
            )

            self._mask = redact

    def write(self, text: str) -> int:
        shown = text if text.isprintable() else _STREAM_UNSAFE.sub(REPLACEMENT, text)
        self.raw.write(shown if self._mask is None else self._mask(shown))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)
