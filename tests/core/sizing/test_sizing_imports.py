"""Sizing and speed import each other's formulas from one module below both: no cycles (also none
inside functions), no reaching into another module's ``_private`` names."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

CORE = REPO / "fleet_tui" / "core"


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every ``from fleet_tui... import name`` anywhere in the file, functions included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fleet_tui"):
            out += [(node.module, a.name) for a in node.names]
    return out


def _files(package: str) -> list[Path]:
    p = CORE / package
    return sorted(p.rglob("*.py")) if p.is_dir() else [p.with_suffix(".py")]


def test_perf_and_footprint_never_import_sizing():
    for package in ("perf", "footprint", "workload", "modelspec", "calibration"):
        for path in _files(package):
            assert not [m for m, _ in _imports(path) if m.startswith("fleet_tui.core.sizing")], path


def test_no_private_names_cross_modules():
    for package in ("sizing", "perf", "footprint", "workload"):
        for path in _files(package):
            private = [(m, n) for m, n in _imports(path) if n.startswith("_")]
            assert not private, (path, private)
