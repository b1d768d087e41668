"""Error of the training-speed model on published runs (tests/fixtures/validation/training_speed.toml),
tune and holdout apart, and by scale, fabric and device family.

    .venv/bin/python bench/bench_training.py          # summary
    .venv/bin/python bench/bench_training.py --rows   # every row
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import training_rows as tr  # noqa: E402


def _line(label: str, rs: list) -> str:
    n, med, within, mx = tr.summary(rs)
    if med is None:
        return f"{label:34s} {n:4d}      n/a"
    return f"{label:34s} {n:4d} {med:8.1%} {within:8.0%} {mx:8.1%}"


def main(argv: list[str]) -> int:
    rs = tr.results()
    if "--rows" in argv:
        for r in sorted(rs, key=lambda r: (r.split, r.id)):
            err = f"{r.error:+7.1%}" if r.error is not None else "   n/a "
            pred = f"{r.predicted:10.3f}" if r.predicted is not None else " " * 10
            print(f"{r.split:7s} {err} {r.measured:10.3f} {pred}  {r.gpus:6d}x {r.accelerator:9s} "
                  f"{r.layout:34s} {r.id}")
    print(f"{'rows':34s} {'n':>4s} {'median':>8s} {'<=25%':>8s} {'max':>8s}")
    for split in ("tune", "holdout"):
        print(_line(split, [r for r in rs if r.split == split]))
    for label, keep in (("1 device", lambda r: r.gpus == 1), ("2-8 devices", lambda r: 1 < r.gpus <= 8),
                        ("9-128 devices", lambda r: 8 < r.gpus <= 128), ("512+ devices", lambda r: r.gpus >= 512)):
        print(_line(f"  {label}", [r for r in rs if keep(r)]))
    for fam in sorted({r.accelerator for r in rs}):
        print(_line(f"  {fam}", [r for r in rs if r.accelerator == fam]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
