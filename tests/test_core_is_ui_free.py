"""``fleet_tui.core`` must import and run without Textual, Rich or the package's front ends (the UI
and the CLI commands are clients of the core, never the other way round).

The check runs in a fresh interpreter so modules imported by other tests cannot hide an import. It
imports every module under the package (walking subpackages; a module that fails to import fails
the test), then lists the forbidden modules present in ``sys.modules``. The second test runs the very
same checker on a throwaway package that imports rich, to prove the first one can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = ("textual", "rich", "fleet_tui.ui", "fleet_tui.commands")

CHECKER = r"""
import importlib, json, pkgutil, sys
package, forbidden = sys.argv[1], sys.argv[2].split(",")
root = importlib.import_module(package)

def fail(name):
    raise SystemExit(f"could not import {name}")

names = [package]
for info in pkgutil.walk_packages(root.__path__, package + ".", onerror=fail):
    importlib.import_module(info.name)
    names.append(info.name)
bad = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))
print(json.dumps({"imported": names, "forbidden": bad}))
"""


def run_checker(package: str, *, extra_path: Path | None = None) -> dict:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", CHECKER, package, ",".join(FORBIDDEN)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_core_module_imports_without_ui_modules():
    result = run_checker("fleet_tui.core")
    imported = set(result["imported"])
    # the walk really reached the leaves, subpackages included
    assert {"fleet_tui.core.catalog", "fleet_tui.core.monitor.engine",
            "fleet_tui.core.monitor.sources.nvml"} <= imported, sorted(imported)
    assert len(imported) >= 40
    assert result["forbidden"] == [], f"fleet_tui.core pulled in: {result['forbidden']}"


def test_the_checker_catches_a_core_module_that_imports_rich_or_the_ui(tmp_path):
    pkg = tmp_path / "fakecore"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "clean.py").write_text("import json\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "leaky.py").write_text("import rich.text\nimport fleet_tui.ui.state\n")
    result = run_checker("fakecore", extra_path=tmp_path)
    assert "fakecore.sub.leaky" in result["imported"]
    assert "rich" in result["forbidden"] and "fleet_tui.ui" in result["forbidden"]


def test_the_checker_fails_on_a_module_that_does_not_import(tmp_path):
    pkg = tmp_path / "brokencore"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text("import no_such_module_anywhere\n")
    proc = subprocess.run([sys.executable, "-c", CHECKER, "brokencore", ",".join(FORBIDDEN)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "no_such_module_anywhere" in proc.stderr
