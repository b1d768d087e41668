"""Shared output helpers for headless commands (plain text; no Rich, to keep start-up fast)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from fleet_tui.core.textsafe import clean


def kind_words(kind: str) -> str:
    """A diagnosis kind as the tables print it: ``memory_bandwidth_bound`` -> ``memory bandwidth
    bound``, the words the app shows (JSON keeps the kind itself)."""
    return kind.replace("_", " ")


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)


def print_json(obj: Any, *, stream=None) -> None:
    stream = stream or sys.stdout
    json.dump(obj, stream, default=_default, indent=2, allow_nan=False)
    stream.write("\n")


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned text columns; numbers right-aligned. Every cell through
    ``core.textsafe.clean``: a label from the network cannot move the cursor or split a row."""
    text_rows = [["" if c is None else clean(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def is_num(s: str) -> bool:
        return bool(s) and s.lstrip("-$").replace(",", "").replace(".", "", 1).rstrip("%x").isdigit()

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if is_num(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip()

    lines = [fmt(list(headers)), "  ".join("-" * w for w in widths)]
    lines.extend(fmt(r) for r in text_rows)
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, stream=None) -> None:
    (stream or sys.stdout).write(format_table(headers, rows) + "\n")
