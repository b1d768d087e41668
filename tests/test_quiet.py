"""`pytest -q` stays quiet: tests assert with messages instead of printing tables (the tables are in
bench/, which the README quotes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_test_writes_past_pytests_capture():
    loud = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
            if p.name != "test_quiet.py" and "capsys.disabled()" in p.read_text(encoding="utf-8")]
    assert not loud, f"these tests print past the capture (move the output to bench/): {loud}"


def test_the_accuracy_tests_print_nothing_but_the_result_line():
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          "tests/core/sizing/test_sizing_accuracy.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert run.returncode == 0, run.stdout
    assert len(lines) == 2 and "passed" in lines[-1], "\n".join(lines)


def test_the_accuracy_tables_are_in_bench():
    run = subprocess.run([sys.executable, str(ROOT / "bench/bench_accuracy.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "memory vs NVML on the H200:" in run.stdout and "tokens/s on the H200:" in run.stdout
    assert run.stdout.count(" measured ") >= 23 + 19
