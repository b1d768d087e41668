"""Peak memory of long and hostile inputs; prints numbers (no assertions).

    .venv/bin/python bench/bench_hostile.py [--lines N] [--stream-lines N] [--skip-files]

1. ``fleet-tui analyze TRACE --window 10 --json`` and ``fleet-tui analyze TRACE --json`` (phases)
   on raw-capture traces of N/10 and N lines (default N = 10^5; the labelled H200 trace's samples
   repeated with time shifted, ~790 bytes a line, as ``bench_analysis.py --lines`` writes them),
   each in a child process: peak RSS (``getrusage(RUSAGE_CHILDREN)``). Memory that does not grow
   with the trace's length is what ``analyze --help`` promises. Overlapping windows (``--step 5``)
   hold the trace, so they take files up to 32 MB (the 40,000-line case, ~31 MB) and refuse
   longer ones (exit 2).
2. ``--stream-lines N`` (10^7): the ``--window`` path fed N generated lines in this process with
   no file (``RawReadings.line`` then ``analyze_readings``, what ``analyze --window`` runs per
   line): peak RSS after 10^4, 10^5, ... N lines. 10^7 lines would be a 7.9 GB file; generated on
   the fly they cost no disk.
3. Single hostile inputs, each in a child: ``plan --demand`` with one hour of 1e9 and 1e308
   devices, ``/dev/zero`` as a demand profile, a job list and a device list, a trace of one 20 MB
   line: exit status and peak RSS (before the bounds: 1e9 grew past 10 GB and /dev/zero read until
   memory ran out).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fleet_tui" / "demo" / "h200_trace_labelled.jsonl"

_RUSAGE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, ru.ru_maxrss / 1024)
"""


def trace_lines(count: int) -> Iterator[bytes]:
    """The demo trace's static line, then ``count`` samples repeated with time shifted."""
    src = [json.loads(x) for x in DEMO.read_text().splitlines()]
    static, samples = src[0], src[1:]
    span = samples[-1]["t"] + 0.2
    yield (json.dumps(static) + "\n").encode()
    # each sample's line rendered once around its time (json.dumps per line would be most of
    # the cost of a 10^7-line run)
    heads_tails = [json.dumps(dict(s, t="@T@")).encode().split(b'"@T@"') for s in samples]
    times = [s["t"] for s in samples]
    for i in range(count):
        k = i % len(samples)
        head, tail = heads_tails[k]
        yield b"%s%.3f%s\n" % (head, (i // len(samples)) * span + times[k], tail)


def child_rss(argv: list[str]) -> tuple[int, float]:
    """(exit status, peak RSS in MB) of ``fleet-tui argv`` in a child process."""
    out = subprocess.run([sys.executable, "-c", _RUSAGE, sys.executable, "-m", "fleet_tui", *argv],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    code, rss = out.stdout.split()
    return int(code), float(rss)


def bench_files(lines: int) -> None:
    print("== analyze on trace files: peak RSS of the child ==")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted({lines // 10, 40_000, lines}):  # 40,000 lines: ~31 MB, under SORT_MAX_BYTES
            path = Path(tmp) / f"t{n}.jsonl"
            with path.open("wb") as fh:
                fh.writelines(trace_lines(n))
            size_mb = path.stat().st_size / 1e6
            for label, extra in (("--window 10", ["--window", "10"]), ("phases", []),
                                 ("--window 10 --step 5", ["--window", "10", "--step", "5"])):
                t = time.perf_counter()
                code, rss = child_rss(["analyze", str(path), "--json", *extra])
                print(f"  {n:>10,} lines ({size_mb:6.0f} MB) {label:<21} exit {code}  "
                      f"peak RSS {rss:6.0f} MB  wall {time.perf_counter() - t:5.1f} s")
            path.unlink()


def bench_stream(lines: int) -> None:
    from fleet_tui.core.monitor.analysis.readings import RawReadings
    from fleet_tui.core.monitor.analysis.stream import analyze_readings

    print(f"== the --window path fed {lines:,} generated lines in this process (no file) ==")
    reader = RawReadings(DEMO)
    reader.restart()
    checkpoints = {10 ** k for k in range(4, 12)} | {lines}
    seen = 0
    t = time.perf_counter()

    def readings():
        nonlocal seen
        for lineno, raw in enumerate(trace_lines(lines), 1):
            item = reader.line(lineno, raw)
            if item is not None:
                seen += 1
                yield item
            if seen in checkpoints and item is not None:
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"  after {seen:>12,} lines: peak RSS {rss:6.0f} MB "
                      f"({time.perf_counter() - t:6.1f} s)", flush=True)

    windows = sum(1 for _ in analyze_readings(readings(), window_s=10.0,
                                              snapshot_of=reader.snapshot_of))
    print(f"  {windows:,} windows diagnosed")


def bench_single_inputs() -> None:
    print("== single hostile inputs: exit status and peak RSS of the child ==")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "d1e9.txt").write_text("1\n1e9\n")
        (d / "d1e308.txt").write_text("1\n1e308\n")
        with (d / "line.jsonl").open("wb") as fh:
            fh.write(b'{"kind": "sample", "t": 0, "x": "' + b"a" * (20 * 2**20) + b'"}\n')
        cases = [
            ("plan --demand (1e9 devices)", ["plan", "--demand", str(d / "d1e9.txt"),
                                             "--on-demand-price", "10"]),
            ("plan --demand (1e308)", ["plan", "--demand", str(d / "d1e308.txt"),
                                       "--on-demand-price", "10"]),
            ("plan --demand /dev/zero", ["plan", "--demand", "/dev/zero", "--on-demand-price", "10"]),
            ("queue simulate /dev/zero", ["queue", "simulate", "/dev/zero", "--nodes", "1",
                                          "--gpus-per-node", "8"]),
            ("jobs --devices /dev/zero", ["jobs", "--devices", "/dev/zero"]),
            ("analyze (one 20 MB line)", ["analyze", str(d / "line.jsonl")]),
            ("analyze --window 10 (one 20 MB line)", ["analyze", str(d / "line.jsonl"),
                                                     "--window", "10"]),
        ]
        for label, argv in cases:
            code, rss = child_rss(argv)
            print(f"  {label:<38} exit {code}  peak RSS {rss:6.0f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--lines", type=int, default=100_000, help="section 1: the longer trace's lines")
    p.add_argument("--stream-lines", type=int, default=0, help="section 2: lines fed (10^7)")
    p.add_argument("--skip-files", action="store_true", help="leave out section 1")
    args = p.parse_args()
    if not args.skip_files:
        bench_files(args.lines)
    if args.stream_lines:
        bench_stream(args.stream_lines)
    bench_single_inputs()


if __name__ == "__main__":
    main()
