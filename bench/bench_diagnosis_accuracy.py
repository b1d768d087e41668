"""Score the diagnosis on labelled traces: is each phase's primary the labelled behaviour?

    .venv/bin/python bench/bench_diagnosis_accuracy.py [--tune FILE ...] [--holdout FILE ...]

Two scores per labelled behaviour of each trace:

* **phases**: ``fleet-tui analyze``'s phases (change points); each phase takes the label most of its
  samples carry and is right when its primary is one of the label's expected kinds. Every phase
  whose label has an expectation is scored.
* **windows**: 5 s windows starting every second that lie inside one labelled stretch (1 s settle
  time at each end: NVML averages utilization over up to 1 s), analysed as the live engine does
  (the window cut at the detector's change points); right when the primary is expected.

* **changes**: the live engine's ticks in the first 3 s after a change between two labelled
  behaviours whose primary neither label expects (a third kind, shown while the window mixes two
  behaviours); fewer is better.

* **oom**: the live engine's ticks at which the device is, in hindsight, within a minute of full
  memory (rising now and on, without a 10 s pause, to >= 95 % of the device within 60 s) and how
  many carry a critical memory risk (all should).

* **risks**: for each label whose ``labels`` line names risks that must (``risks``) or must not
  (``no_risks``) be reported, right when a required risk is reported in at least one of the
  label's phases and a forbidden one in none (a leak needs a few seconds of rises to show).

Expectations: a trace written by ``scripts/capture_corpus.py`` carries them in its ``labels`` line;
the bundled H200 trace's behaviours are mapped in ``H200_EXPECTED`` (its ``sizing:*`` phases are
real training/inference with mixed signals and no single label, so they are not scored).

Sets: ``--tune`` traces were looked at while writing the rules and thresholds (default: the bundled
H200 trace and ``tests/fixtures/traces/tune/*.jsonl``); ``--holdout`` traces were not (default:
``tests/fixtures/traces/holdout/*.jsonl``).
The two are reported separately; only the holdout figure says how well the rules generalize.
``--synthetic`` traces (default: ``tests/fixtures/traces/synthetic/*.jsonl``, written by
``scripts/synth_corpus.py`` from the physics its docstring states) cover cases no recording does
yet; they are reported apart and are not measurements.
``--resample HZ`` adds the tune traces decimated to HZ (what a 1 Hz monitor sees): the same data,
so a robustness check of the sampling rate, not a held-out score.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleet_tui.core.monitor.analysis.stream import analyze_stream  # noqa: E402
from fleet_tui.core.monitor.engine import MonitorEngine  # noqa: E402
from fleet_tui.core.monitor.trace import iter_trace, resolve_trace_path  # noqa: E402

H200_EXPECTED = {
    "idle": ("idle",), "compute_bound": ("healthy_compute",),
    "hbm_bandwidth_bound": ("memory_bandwidth_bound",), "input_starved": ("input_starved",),
    "launch_bound": ("launch_bound",), "host_to_device_pcie": ("host_transfer_bound",),
    "memory_capacity_full": ("memory_capacity_pressure",), "idle_cooldown": ("idle",),
}
WINDOW_S, STEP_S, SETTLE_S = 5.0, 1.0, 1.0


def labels_of(path: str) -> dict[str, dict]:
    """The trace's ``labels`` line (label -> expected, risks, no_risks), or {}."""
    with resolve_trace_path(path).open() as fh:
        for i, line in enumerate(fh):
            if i > 3:
                break
            data = json.loads(line)
            if data.get("kind") == "labels":
                return data["labels"]
    return {}


def expectations(path: str) -> dict[str, tuple[str, ...]]:
    """label -> acceptable primaries, from the trace's ``labels`` line or the H200 table."""
    labels = labels_of(path)
    if labels:
        return {k: tuple(v["expected"]) for k, v in labels.items()}
    return dict(H200_EXPECTED)


def score_risks(path: str, analyses: list | None = None) -> dict[str, tuple[bool, str, str]]:
    """label -> (right, the rule as +required -forbidden, what was reported) for the labels
    with required or forbidden risks; ``analyses``: the trace's phases, if already made."""
    labels = labels_of(path)
    want = {k: (v.get("risks", ()), v.get("no_risks", ()))
            for k, v in labels.items() if v.get("risks") or v.get("no_risks")}
    seen: dict[str, set[str]] = defaultdict(set)
    for a in analyze_stream(iter_trace(path)) if analyses is None else analyses:
        if a.phase in want:
            seen[a.phase] |= set(a.kinds())
    out = {}
    for label, (must, must_not) in want.items():
        got = seen.get(label, set())
        right = set(must) <= got and not (set(must_not) & got)
        rule = " ".join([f"+{x}" for x in must] + [f"-{x}" for x in must_not])
        out[label] = (right, rule, ", ".join(sorted((set(must) | set(must_not)) & got)) or "none")
    return out


def score_phases(path: str, expected: dict, analyses: list | None = None
                 ) -> dict[str, list[int]]:
    """label -> [phases, right]; ``analyses``: the trace's phases, if already made."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for a in analyze_stream(iter_trace(path)) if analyses is None else analyses:
        if a.phase in expected:
            out[a.phase][0] += 1
            out[a.phase][1] += a.primary in expected[a.phase]
    return out


def live_ticks(snaps):
    """(snapshot, tick) of each reading replayed through the live engine, as the monitor runs."""
    eng = MonitorEngine(None, interval_s=0.25, window_s=WINDOW_S, min_interval_s=0.1,
                        usd_per_hour=1.0, alert_rules=[])
    for s in snaps:
        yield s, eng.process(s)


def score_windows(path: str, expected: dict) -> dict[str, list[int]]:
    """Windows as the live engine sees them: replay through MonitorEngine at the trace's rate and
    score the analysis at each whole second whose last 5 s lie inside one labelled stretch."""
    snaps = list(iter_trace(path))
    spans: list[list] = []  # [label, start, end]
    for s in snaps:
        label = s.devices[0].phase
        if spans and spans[-1][0] == label:
            spans[-1][2] = s.timestamp
        else:
            spans.append([label, s.timestamp, s.timestamp])
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    next_t = snaps[0].timestamp + WINDOW_S if snaps else 0.0
    for s, tick in live_ticks(snaps):
        if s.timestamp + 1e-9 < next_t:
            continue
        next_t += STEP_S
        t = s.timestamp
        for label, lo, hi in spans:
            if label in expected and lo + SETTLE_S <= t - WINDOW_S and t <= hi - SETTLE_S:
                a = next(iter(tick.analyses.values()))
                out[label][0] += 1
                out[label][1] += a.primary in expected[label]
    return out


CHANGE_S = 3.0
OOM_AHEAD_S, FULL_FRAC, RISING_FRAC, FLAT_S = 60.0, 0.95, 0.01, 10.0
OOM_KINDS = ("memory_growth", "memory_capacity_pressure")


def _fills_within(mem: list, i: int) -> bool:
    """From reading ``i`` memory keeps rising (no 10 s without a rise, no fall of >= 1 % of the
    device) until it reaches >= 95 % of the device, within 60 s."""
    t0, last, total = mem[i][0], mem[i][1], mem[i][2]
    last_rise = t0
    for t, m, _ in mem[i:]:
        if t > t0 + OOM_AHEAD_S or t - last_rise > FLAT_S or m < last - RISING_FRAC * total:
            return False
        if m >= FULL_FRAC * total:
            return True
        if m > last:
            last_rise = t
        last = m
    return False


def score_false_oom(path: str) -> tuple[int, int, str]:
    """(ticks with a critical memory_growth, those at which memory does not, in hindsight, reach
    >= 95 % of the device within 60 s, their labels): out-of-memory alarms that did not come
    true (a job's start that stopped, or a leak stopped before the end: the labels tell)."""
    snaps = list(iter_trace(path))
    mem = [(s.timestamp, s.devices[0].mem_used_bytes or 0, s.devices[0].mem_total_bytes or 0)
           for s in snaps]
    alarms = false = 0
    where: dict[str, int] = defaultdict(int)
    for i, (s, tick) in enumerate(live_ticks(snaps)):
        a = next(iter(tick.analyses.values()))
        if not any(d.kind == "memory_growth" and d.severity == "critical" for d in a.diagnoses):
            continue
        alarms += 1
        t0, total = mem[i][0], mem[i][2]
        if not any(m >= FULL_FRAC * total for t, m, _ in mem[i:] if t <= t0 + OOM_AHEAD_S):
            false += 1
            where[str(s.devices[0].phase)] += 1
    return alarms, false, " ".join(f"{k}:{v}" for k, v in sorted(where.items()))


def score_oom(path: str) -> tuple[int, int]:
    """(ticks, ticks with a critical memory risk): the live engine's ticks at which, in
    hindsight, the device is within a minute of full memory: its memory rose by >= 1 % of the
    device over the last second and keeps rising (no 10 s pause, no release) to >= 95 % of the
    device within the next 60 s. Every such tick should carry a critical out-of-memory risk."""
    snaps = list(iter_trace(path))
    mem = [(s.timestamp, s.devices[0].mem_used_bytes or 0, s.devices[0].mem_total_bytes or 0)
           for s in snaps]
    ticks = hit = 0
    j = 0
    for i, (_s, tick) in enumerate(live_ticks(snaps)):
        t, used, total = mem[i]
        if not total:
            continue
        while j < i and mem[j][0] < t - 1.0:
            j += 1
        if used - mem[j][1] < RISING_FRAC * total or not _fills_within(mem, i):
            continue
        ticks += 1
        a = next(iter(tick.analyses.values()))
        hit += any(d.kind in OOM_KINDS and d.severity == "critical" for d in a.diagnoses)
    return ticks, hit


def score_changes(path: str, expected: dict) -> tuple[int, int]:
    """(ticks, ticks with a third kind): the live engine's ticks in the first ``CHANGE_S``
    seconds after a change between two labelled behaviours, and those whose primary is expected
    by neither label (what an expert sees at once: input_starved flashing as a job starts)."""
    label, since, before = None, None, ()
    ticks = third = 0
    for s, tick in live_ticks(iter_trace(path)):
        now = s.devices[0].phase
        if now != label:
            if label is not None:
                since, before = s.timestamp, expected.get(label, ())
            label = now
        if since is None or s.timestamp - since > CHANGE_S or not before or now not in expected:
            continue
        primary = next(iter(tick.analyses.values())).primary
        ticks += 1
        third += primary not in expected[now] and primary not in before
    return ticks, third


def report(name: str, paths: list[str]) -> tuple[int, int, int, int]:
    tot = [0, 0, 0, 0]
    print(f"== {name} ==")
    if not paths:
        print("  (no traces)")
        return tuple(tot)
    print(f"  {'trace':28s} {'label':24s} {'expected':34s} {'phases':>9s} {'windows':>9s}")
    risk_rows, change_rows, oom_rows = [], [], []
    for path in paths:
        exp = expectations(path)
        analyses = list(analyze_stream(iter_trace(path)))  # one analysis: phases and risks
        ph, win = score_phases(path, exp, analyses), score_windows(path, exp)
        risk_rows += [(Path(path).name, label, r)
                      for label, r in score_risks(path, analyses).items()]
        change_rows.append((Path(path).name, *score_changes(path, exp)))
        oom_rows.append((Path(path).name, *score_oom(path), *score_false_oom(path)))
        for label in exp:
            if label not in ph and label not in win:
                continue
            p, w = ph.get(label, [0, 0]), win.get(label, [0, 0])
            tot = [tot[0] + p[1], tot[1] + p[0], tot[2] + w[1], tot[3] + w[0]]
            print(f"  {Path(path).name[:28]:28s} {label[:24]:24s} {'|'.join(exp[label])[:34]:34s}"
                  f" {p[1]:>4d}/{p[0]:<4d} {w[1]:>4d}/{w[0]:<4d}")
    pr = tot[0] / tot[1] if tot[1] else float("nan")
    wr = tot[2] / tot[3] if tot[3] else float("nan")
    print(f"  total: phases {tot[0]}/{tot[1]} right ({pr:.0%}), windows {tot[2]}/{tot[3]} "
          f"right ({wr:.0%})")
    n, bad = sum(r[1] for r in change_rows), sum(r[2] for r in change_rows)
    print(f"  changes: live ticks within {CHANGE_S:g} s after a labelled change showing a kind "
          f"neither label expects: {bad}/{n} ({bad / n if n else 0:.0%}); "
          + ", ".join(f"{name[:20]} {b}/{t}" for name, t, b in change_rows))
    n, ok = sum(r[1] for r in oom_rows), sum(r[2] for r in oom_rows)
    print(f"  oom: live ticks within a minute of full memory (rising on to >= 95 % within 60 s) "
          f"with a critical memory risk: {ok}/{n}; "
          + ", ".join(f"{name[:20]} {h}/{t}" for name, t, h, _, _, _ in oom_rows if t))
    n, bad = sum(r[3] for r in oom_rows), sum(r[4] for r in oom_rows)
    print(f"  oom alarms not come true: live ticks with a critical memory_growth whose device does "
          f"not reach >= 95 % within 60 s: {bad}/{n}")
    for name, _, _, a, f, where in oom_rows:
        if f:
            print(f"    {name[:28]:28s} {f}/{a} during {where}")
    if risk_rows:
        print(f"  risks: {sum(r[0] for _, _, r in risk_rows)}/{len(risk_rows)} labels right")
        for name, label, (right, rule, shown) in risk_rows:
            print(f"    {name[:28]:28s} {label[:24]:24s} want {rule:24s} reported: {shown:20s} "
                  f"{'right' if right else 'WRONG'}")
    return tuple(tot)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tune", nargs="*", default=None)
    p.add_argument("--holdout", nargs="*", default=None)
    p.add_argument("--synthetic", nargs="*", default=None,
                   help="SYNTHETIC labelled traces (default: tests/fixtures/traces/synthetic/)")
    p.add_argument("--resample", type=float, default=1.0,
                   help="also score the tune traces decimated to this rate (0: off)")
    args = p.parse_args()
    tune = args.tune
    if tune is None:
        tune = ["demo"] + sorted(str(x) for x in (ROOT / "tests" / "fixtures" / "traces" /
                                                  "tune").glob("*.jsonl"))
    holdout = args.holdout
    if holdout is None:
        holdout = sorted(str(x) for x in (ROOT / "tests" / "fixtures" / "traces" /
                                          "holdout").glob("*.jsonl"))
    report("tune (looked at while writing the rules)", tune)
    report("holdout (never used for tuning)", holdout)
    synthetic = args.synthetic
    if synthetic is None:
        synthetic = sorted(str(x) for x in (ROOT / "tests" / "fixtures" / "traces" /
                                            "synthetic").glob("*.jsonl"))
    report("SYNTHETIC (scripts/synth_corpus.py: modelled physics, not measurements)", synthetic)
    if args.resample:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            paths = [decimate(t, args.resample, Path(tmp)) for t in tune]
            report(f"tune traces at {args.resample:g} Hz (same data: sampling robustness only)",
                   paths)


def decimate(path: str, hz: float, folder: Path) -> str:
    """The trace with one sample per 1/hz seconds (static and labels lines kept)."""
    src = resolve_trace_path(path)
    out = folder / f"{src.stem}_{hz:g}hz.jsonl"
    step, last = 1.0 / hz, None
    with src.open() as fh, out.open("w") as w:
        for line in fh:
            data = json.loads(line)
            if data.get("kind") == "sample":
                if last is not None and data["t"] < last + step - 1e-6:
                    continue
                last = data["t"]
            w.write(line)
    return str(out)


if __name__ == "__main__":
    main()
