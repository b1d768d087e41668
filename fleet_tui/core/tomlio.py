"""TOML reading with problems reported as ``file:line: field: message``.

``tomllib`` gives a line and column for syntax errors but forgets where each value came from, so
entries are located afterwards in the text: the n-th ``[[table]]`` header (or, for an inline array
``table = [ {...}, ... ]``, the n-th line opening ``{``), then ``key =`` inside that entry.

Every ``[[table]]`` of entries is checked by :func:`validate_table` against its record class (pydantic
validates it: :mod:`fleet_tui.core.records`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet_tui.core.fsutil import InputFileError, read_bytes_capped
from fleet_tui.core.limits import int_limit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_SYNTAX_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


def problem(path: Path | str, line: int | None, field_name: str, message: str) -> str:
    """One problem in the house format ``file:line: field: message``."""
    where = f"{path}:{line}" if line else f"{path}"
    return f"{where}: {field_name}: {message}" if field_name else f"{where}: {message}"


@dataclass
class TomlDoc:
    """A parsed TOML file plus what is needed to point at a line of it."""

    path: Path
    text: str
    data: dict[str, Any]
    _lines: list[str] = field(default_factory=list, repr=False)
    _starts: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._lines = self.text.splitlines()

    def entry_starts(self, table: str) -> list[int]:
        """1-based line numbers where each element of array ``table`` starts."""
        if table in self._starts:
            return self._starts[table]
        header = re.compile(r"^\s*\[\[\s*" + re.escape(table) + r"\s*\]\]\s*(#.*)?$")
        starts = [i + 1 for i, line in enumerate(self._lines) if header.match(line)]
        if not starts:  # inline array form: table = [ {..}, {..} ]
            opener = re.compile(r"^\s*" + re.escape(table) + r"\s*=\s*\[")
            inside = False
            for i, line in enumerate(self._lines):
                if not inside:
                    m = opener.match(line)
                    if m:
                        inside = True
                        rest = line[m.end():]
                        if rest.lstrip().startswith("{"):
                            starts.append(i + 1)
                    continue
                s = line.lstrip()
                if s.startswith("{"):
                    starts.append(i + 1)
                elif s.startswith("]"):
                    inside = False
        self._starts[table] = starts
        return starts

    def line_of(self, table: str | None, index: int | None = None, key: str | None = None) -> int | None:
        """Best line for ``table[index].key`` (or a top-level ``key`` when table is None)."""
        if table is None:
            return self._find_key(key, 0, len(self._lines)) if key else None
        starts = self.entry_starts(table)
        if index is None or index >= len(starts):
            for i, line in enumerate(self._lines):
                if re.match(r"^\s*\[{1,2}\s*" + re.escape(table) + r"\b", line):
                    return i + 1
            return None
        start = starts[index]
        if key is None:
            return start
        line = self._lines[start - 1]
        if "{" in line and re.search(r"[{,]\s*" + re.escape(key) + r"\s*=", line):
            return start  # inline table: the whole entry is on this line
        end = starts[index + 1] - 1 if index + 1 < len(starts) else len(self._lines)
        # a later [[other]] or [table] header also ends the entry
        for j in range(start, end):
            if re.match(r"^\s*\[\[?\s*(?!" + re.escape(table) + r"\s*\.)", self._lines[j]):
                end = j
                break
        parts = key.split(".")
        found = self._find_key(parts[0], start, end)
        if found and len(parts) > 1:  # a key inside a sub-table or inline table of the entry
            line = self._lines[found - 1]
            if not re.search(r"[{,]\s*\"?" + re.escape(parts[1]) + r"\"?\s*=", line):
                found = self._find_key(parts[1], found, end) or found
        return found or start

    def _find_key(self, key: str, start: int, end: int) -> int | None:
        pat = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=|^\s*\[\s*[\w.]*\b" + re.escape(key) + r"\s*\]")
        for j in range(start, end):
            if pat.match(self._lines[j]):
                return j + 1
        return None


def read_toml(path: Path) -> tuple[TomlDoc | None, list[str]]:
    """Parse ``path``; on failure return ``(None, [problem])`` naming the line and column."""
    try:
        raw = read_bytes_capped(path, "catalog file", max_bytes=int_limit("catalog_file_bytes"))
    except InputFileError as exc:
        why = str(exc).removeprefix(f"{path}: ")
        return None, [problem(path, None, "", why.replace("cannot read the catalog file", "cannot read file"))]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [problem(path, None, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    try:
        data = tomllib.loads(text)
    except RecursionError:
        return None, [problem(path, None, "syntax", "TOML nested too deeply")]
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _SYNTAX_LINE.search(msg)
        line = int(m.group(1)) if m else getattr(exc, "lineno", None)
        msg = _SYNTAX_LINE.sub("", msg).strip()
        col = f" (column {m.group(2)})" if m else ""
        return None, [problem(path, line, "syntax", f"TOML syntax error: {msg}{col}")]
    return TomlDoc(path, text, data), []


def pydantic_problems(doc: TomlDoc, table: str, index: int, exc: Any, model: Any = None) -> list[str]:
    """Turn a pydantic ``ValidationError`` for ``table[index]`` into located problems."""
    import difflib

    known = list(getattr(model, "model_fields", {}) or {})
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if str(p) != "[key]"]
        field_name = ".".join(loc) if loc else table
        key = ".".join(loc[:2]) if loc else None
        line = doc.line_of(table, index, key)
        kind = err.get("type", "")
        if kind in ("extra_forbidden", "unexpected_keyword_argument"):  # a model's, a dataclass's
            bad = loc[-1] if loc else "?"
            near = difflib.get_close_matches(bad, known, n=1) if len(loc) == 1 else []
            msg = f"unknown key '{bad}'" + (f"; did you mean '{near[0]}'?" if near else "")
        elif kind in ("missing", "missing_argument", "missing_keyword_only_argument"):
            msg = "required field is missing"
        else:
            msg = err.get("msg", "invalid value")
            if "input" in err and kind not in ("model_type",):
                msg += f" (got {err['input']!r})"
        out.append(problem(doc.path, line, f"{table}[{index}].{field_name}" if loc else f"{table}[{index}]", msg))
    return out


def validate_table(doc: TomlDoc, table: str, model: type) -> tuple[list[tuple[int, Any]], list[str]]:
    """Validate every ``[[table]]`` entry of ``doc`` with ``model`` (a record class or a pydantic model).

    Returns ``(entries, problems)``: ``entries`` are ``(index, object)`` for the entries that passed
    (their index locates them with ``doc.line_of(table, index)``); a second entry with an ``id``
    already seen (case-insensitive) is a problem, not an entry. Callers that must load nothing from
    a broken file check ``problems``.
    """
    from pydantic import ValidationError

    path = doc.path
    problems: list[str] = []
    raw = doc.data.get(table, [])
    if not isinstance(raw, list):
        return [], [problem(path, doc.line_of(table), table, f"must be an array of tables ([[{table}]])")]
    entries: list[tuple[int, Any]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(problem(path, doc.line_of(table, i), f"{table}[{i}]", "must be a table"))
            continue
        try:
            obj = model.model_validate(item)
        except ValidationError as exc:
            problems.extend(pydantic_problems(doc, table, i, exc, model))
            continue
        ident = getattr(obj, "id", None)
        if ident is not None:
            k = str(ident).lower()
            if k in seen:
                problems.append(problem(path, doc.line_of(table, i, "id"), f"{table}[{i}].id",
                                        f"duplicate id '{ident}' (first defined at line "
                                        f"{doc.line_of(table, seen[k], 'id')})"))
                continue
            seen[k] = i
        entries.append((i, obj))
    return entries, problems
