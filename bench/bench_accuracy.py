"""Accuracy of sizing and speed against the 23 runs measured on a real H200: the per-run tables.

Run: .venv/bin/python bench/bench_accuracy.py
Memory is compared with NVML's used bytes (at the peak; weights-only runs after loading), speed
with the measured tokens/s of prefill and training runs. Decode runs were Hugging Face eager
(launch-bound) and are shown beside the optimized-engine estimate, not scored. The limits are
asserted, quietly, by tests/core/sizing/test_sizing_accuracy.py, which builds these same rows.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.core.sizing.test_sizing_accuracy import memory_rows, memory_table, speed_rows, speed_table  # noqa: E402


def main() -> None:
    mem = memory_rows()
    errors = [abs(e) for *_, e in mem]
    print("memory vs NVML on the H200:")
    print(memory_table(mem))
    print(f"median |error| {statistics.median(errors):.1f} %, max {max(errors):.1f} % over "
          f"{len(errors)} runs (limits: median 10 %, max 25 %)")
    print()
    speed = speed_rows()
    prefill = [abs(e) for _, phase, _, _, e, _ in speed if e is not None and phase == "prefill"]
    train = [abs(e) for _, phase, _, _, e, _ in speed if e is not None and phase == "training"]
    print("tokens/s on the H200:")
    print(speed_table(speed))
    print(f"prefill median {statistics.median(prefill):.1f} % max {max(prefill):.1f} %; "
          f"training median {statistics.median(train):.1f} % max {max(train):.1f} % "
          "(limits: median 15 %, max 25 %)")


if __name__ == "__main__":
    main()
