"""Functions fit a screen: none in ``fleet_tui/`` runs over 80 lines unless its signature says why
in one line (``def f(...):  # long: <why>``), so a long function is a choice someone explained."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import REPO

MAX_LINES = 80
_REASON = re.compile(r"#\s*long:\s*\S")


def long_functions(root: Path) -> list[str]:
    """``path:line name (N lines)`` of every function over MAX_LINES lines whose signature gives no
    ``# long:`` reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length <= MAX_LINES:
                continue
            signature = lines[node.lineno - 1:node.body[0].lineno - 1] or [lines[node.lineno - 1]]
            if not any(_REASON.search(line) for line in signature):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_every_long_function_says_why():
    assert long_functions(REPO / "fleet_tui") == []


def test_a_long_function_without_a_reason_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (pkg / "m.py").write_text(
        "def fits():\n    return 1\n\n\n"
        f"def too_long(a,\n             b):\n{body}\n\n"
        f"def explained(a,\n              b):  # long: a table read whole\n{body}\n\n"
        f"def no_reason_given():  # long:\n{body}")
    found = long_functions(pkg)
    assert [f.split(" ", 1)[1] for f in found] == ["too_long (82 lines)", "no_reason_given (81 lines)"]
    assert found[0].startswith("pkg/m.py:5 ")
