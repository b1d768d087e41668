"""Error of the tool on the issue-9 validation set, per row and per file, tune and holdout apart.

    .venv/bin/python bench/bench_validation.py          # summary
    .venv/bin/python bench/bench_validation.py --rows   # every row

Rows come from tests/fixtures/validation/*.toml (serving: serving.toml + serving_amd.toml); the
harness that maps them to workloads is bench/validation_rows.py (shared with
tests/bench/test_validation.py). Constants were fitted on the tune rows only; the holdout figures are
the honest ones.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation_rows as vr  # noqa: E402


def main(argv: list[str]) -> int:
    results = vr.serving_results() + vr.serving_latency_results() + vr.kv_results() + vr.finetune_results()
    if "--rows" in argv:
        for r in results:
            err = f"{r.error:+7.1%}" if r.error is not None else "   n/a "
            pred = f"{r.predicted:12.1f}" if r.predicted is not None else " " * 12
            print(f"{r.split:7s} {r.kind:10s} {err} {r.measured:12.1f} {pred}  {r.id}  {r.reason}")
    print(f"{'file/kind':24s} {'split':8s} {'rows':>5s} {'median':>8s} {'max':>8s} {'n/a':>4s}")
    for file, kind in (("serving", "throughput"), ("serving", "latency"), ("kv_capacity", "kv"),
                       ("finetune_memory", "memory")):
        for split in ("tune", "holdout"):
            n, med, mx, na = vr.summary([r for r in results if r.file == file], split, kind)
            med_s = f"{med:8.1%}" if med is not None else "     n/a"
            mx_s = f"{mx:8.1%}" if mx is not None else "     n/a"
            print(f"{file + '/' + kind:24s} {split:8s} {n:5d} {med_s} {mx_s} {na:4d}")
    # the serving rows of engine releases the profiles no longer describe (validation_rows.SUPERSEDED_RELEASES):
    # in the figures above, and apart here
    old = {r["id"] for r in vr.serving_rows() if vr.superseded(r)}
    by_file = {name: {r["id"] for r in vr.rows(name, "measurement")} for name in vr.SERVING_FILES}
    parts = [("superseded releases", lambda r: r.id in old), ("current releases", lambda r: r.id not in old)]
    parts += [(f"{name} only", lambda r, ids=ids: r.id in ids) for name, ids in by_file.items()]
    for label, keep in parts:
        for split in ("tune", "holdout"):
            n, med, mx, na = vr.summary([r for r in results if r.file == "serving" and keep(r)], split, "throughput")
            if n:
                print(f"  throughput, {label:30s} {split:8s} {n:5d} {med:8.1%} {mx:8.1%} {na:4d}")
    for name, ids in by_file.items():  # latency rows per file too (only some files have them)
        for split in ("tune", "holdout"):
            n, med, mx, na = vr.summary([r for r in results if r.file == "serving" and r.id in ids], split, "latency")
            if n:
                print(f"  latency, {name + ' only':32s} {split:8s} {n:5d} {med:8.1%} {mx:8.1%} {na:4d}")
    latency_ids = {r.id for r in results if r.file == "serving_latency"}
    for name, ids in {**by_file, "serving_latency.toml": latency_ids}.items():
        for split in ("tune", "holdout"):
            for kind in ("throughput", "latency"):
                n, med, mx, na_ = vr.summary([r for r in results if r.file.startswith("serving") and r.id in ids],
                                             split, kind)
                if n and name == "serving_latency.toml":
                    print(f"  {kind}, {name + ' only':30s} {split:8s} {n:5d} {med:8.1%} {mx:8.1%} {na_:4d}")
    if "--markdown" in argv:
        print(markdown(results, old, by_file))
    na = [r for r in results if r.predicted is None]
    for r in na:
        print(f"inexpressible ({r.split}): {r.id}: {r.reason}")
    return 0


def _cell(sel: list, split: str) -> str:
    errs = [abs(r.error) for r in sel if r.split == split and r.error is not None]
    if not errs:
        return "– | –"
    return f"{statistics.median(errs):.0%} | {max(errs):.0%}"


def markdown(results: list, old: set[str], by_file: dict[str, set[str]]) -> str:
    """The docs/serving.md accuracy table: one line per set and kind (current engine releases)."""
    lines = ["| set | kind | rows (tune/holdout) | tune median | tune max | holdout median | holdout max | "
             "inexpressible |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    sets = [(name, "serving", ids) for name, ids in by_file.items()]
    sets.append(("serving_latency.toml", "serving_latency", {r.id for r in results if r.file == "serving_latency"}))
    sets.append(("kv_capacity.toml", "kv_capacity", {r.id for r in results if r.file == "kv_capacity"}))
    for name, file, ids in sets:
        for kind in ("throughput", "latency", "kv"):
            sel = [r for r in results if r.file == file and r.id in ids and r.kind == kind and r.id not in old]
            if not sel:
                continue
            n_t = sum(r.split == "tune" for r in sel)
            na = sum(r.predicted is None for r in sel)
            lines.append(f"| {name} | {kind} | {n_t}/{len(sel) - n_t} | {_cell(sel, 'tune').replace(' | ', ' | ')} | "
                         f"{_cell(sel, 'holdout')} | {na} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
