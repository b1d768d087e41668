"""``fleet_tui.core`` must import and run without Textual or Rich (the UI is a client of the core).

Runs in a fresh interpreter so modules imported by other tests cannot hide an import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = r"""
import importlib, pkgutil, sys
import fleet_tui.core as core
names = []
for info in pkgutil.walk_packages(core.__path__, "fleet_tui.core."):
    importlib.import_module(info.name)
    names.append(info.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
print(len(names))
print(",".join(bad))
"""


def test_every_core_module_imports_without_textual_or_rich():
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    count, bad = proc.stdout.strip().split("\n") if "\n" in proc.stdout.strip() else (
        proc.stdout.strip(), "")
    assert int(count) >= 5, "expected the core's modules to be found and imported"
    assert bad == "", f"fleet_tui.core pulled in UI modules: {bad}"


def test_the_check_would_catch_a_ui_import():
    """The same check, fed a module that imports rich, reports it (the test above can fail)."""
    proc = subprocess.run([sys.executable, "-c", "import rich.text, sys; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich')[:1])"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "rich" in proc.stdout
