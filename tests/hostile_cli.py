"""Run fleet-tui commands with hostile flag values, in-process, bounded in time and memory.

Used by ``tests/test_fuzz_flags.py`` (hypothesis picks the cases) and runnable on its own to sweep
every flag of every command with every hostile value once:
``python -m tests.hostile_cli [COMMAND ...]`` (prints the cases that fail).

A case passes when the command exits 0 or 2, prints no traceback, leaks no password, and ends
within ``TIME_LIMIT_S`` under an address-space limit of the process' size + ``MEMORY_LIMIT_BYTES``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fleet_tui.cli import build_parser, main

TIME_LIMIT_S = 20.0
MEMORY_LIMIT_BYTES = 1_500_000_000
PASSWORD = "Pw-(q'u\"o<t e\ts/h#a?s@h)"  # every class that broke the redaction once
PASSWORD_PIECES = ("Pw-(q", "o<t e", "s/h#a", "a?s@h")


class Hung(BaseException):
    """The case ran past ``TIME_LIMIT_S`` (raised by the alarm, through any ``except Exception``)."""


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str
    hung: bool = False

    def problems(self) -> list[str]:
        found = []
        if self.hung:
            found.append(f"ran past {TIME_LIMIT_S:g} s")
        if self.code not in (0, 2):
            found.append(f"exit {self.code}")
        text = self.out + self.err
        if "Traceback" in text:
            found.append("traceback")
        if "MemoryError" in text:
            found.append("MemoryError")
        leaked = [p for p in PASSWORD_PIECES if p in text]
        if leaked:
            found.append(f"password piece {leaked[0]!r} shown")
        if "\x1b" in text or "\x07" in text:
            found.append("an escape/control code printed")
        return found


@dataclass(frozen=True)
class Files:
    """Hostile and valid input files, made once per run in ``root``."""

    root: Path

    def path(self, name: str) -> str:
        return str(self.root / name)


def make_files(root: Path) -> Files:
    root.mkdir(parents=True, exist_ok=True)
    (root / "demand.txt").write_text("1\n3\n2\n")
    (root / "demand_huge.txt").write_text("1\n1e9\n")
    (root / "demand_inf.txt").write_text("1\n1e308\n")
    (root / "jobs.csv").write_text("job,user,submit_s,run_s,gpus\n1,a,0,60,4\n2,b,10,30,8\n")
    (root / "jobs_nan.json").write_text(
        '{"jobs": [{"job_id": 1, "time": {"submission": NaN, "start": NaN, "end": 1e400, '
        '"limit": 5}, "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}}]}')
    (root / "jobs_inf.swf").write_text("1 0 -1 inf 4 -1 -1 4 60 -1 1 1 -1 -1 1 -1 -1 -1\n")
    (root / "jobs_extra.csv").write_text("job,user,submit_s,run_s,gpus\n1,a,0,60,4,9,9\n")
    (root / "devices.json").write_text(
        '{"devices": [{"node": "n\\u001b]0;pwned\\u0007", "index": 0, "gpu_util_pct": 50, '
        '"job": "j1\\nforged row", "user": "u"}]}')
    (root / "binary.bin").write_bytes(bytes(range(256)) * 64)
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "long_line.jsonl").write_text('{"kind": "sample", "t": 0, "x": "' + "a" * 200 + '"}\n')
    (root / "ns.jsonl").write_text("".join(
        f'{{"kind": "sample", "t": {1.7e18 + i * 2e8:.0f}, "gpu_util": 50}}\n' for i in range(5)))
    (root / "t1e20.jsonl").write_text('{"kind": "sample", "t": 0, "gpu_util": 5}\n'
                                      '{"kind": "sample", "t": 1e20, "gpu_util": 5}\n')
    (root / "unreadable.txt").write_text("1\n")
    os.chmod(root / "unreadable.txt", 0)
    (root / "dir").mkdir(exist_ok=True)
    loop = root / "loopdir"
    loop.mkdir(exist_ok=True)
    with contextlib.suppress(FileExistsError):
        (loop / "a.toml").symlink_to(loop / "b.toml")
    with contextlib.suppress(FileExistsError):
        (loop / "b.toml").symlink_to(loop / "a.toml")
    deep_cat = root / "deepcat"
    deep_cat.mkdir(exist_ok=True)
    (deep_cat / "deep.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    fifo = root / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return Files(root)


def hostile_values(files: Files) -> list[str]:
    """Values a careless script or an attacker might pass to any flag."""
    return [
        "", "0", "-1", "1e9", "1e308", "-1e308", "nan", "inf", "1e-300", "9" * 400,
        "1000000000", "999999999999",
        "a" * 300, "x/" + "b" * 300, "/dev/zero", files.path("fifo"), files.path("dir"),
        files.path("binary.bin"), files.path("deep.json"), files.path("unreadable.txt"),
        files.path("loopdir"), files.path("deepcat"), files.path("demand_huge.txt"),
        files.path("jobs_nan.json"), files.path("ns.jsonl"), files.path("t1e20.jsonl"),
        "\x1b]0;pwned\x07", "[bold red]x[/]", "%s%n{0}", "../../../../etc/shadow", "-",
        f"prometheus:http://u:{PASSWORD}@127.0.0.1:9/", f"prometheus:u:{PASSWORD}@127.0.0.1:9",
        "prometheus:http://127.0.0.1:9x/", "sim:1000000000", "replay:/dev/zero",
    ]


def base_argvs(files: Files) -> dict[tuple[str, ...], list[str]]:
    """Per command, a valid argv that ends quickly; a fuzzed flag replaces or adds to it."""
    db = files.path("history.db")
    return {
        ("catalog", "instances"): ["--limit", "3"],
        ("catalog", "accelerators"): ["--limit", "3"],
        ("catalog", "models"): ["--limit", "3"],
        ("catalog", "validate"): [],
        ("size",): ["--model", "llama-3.1-8b", "--gpu", "H100"],
        ("recommend",): ["--model", "llama-3.1-8b", "--top", "2"],
        ("scenarios", "list"): [],
        ("scenarios", "run"): ["inference_small_p5", "--top", "2"],
        ("monitor",): ["--once", "--source", "sim:1"],
        ("analyze",): ["demo", "--window", "5"],
        ("record",): ["--db", db, "--duration", "0.3", "--interval", "0.25", "--source", "sim:1"],
        ("rightsize",): ["--db", db],
        ("fleet",): ["--source", "prometheus:http://127.0.0.1:9/", "--timeout", "1"],
        ("jobs",): ["--devices", files.path("devices.json")],
        ("queue", "simulate"): [files.path("jobs.csv"), "--nodes", "2", "--gpus-per-node", "8"],
        ("plan",): ["--demand", files.path("demand.txt"), "--on-demand-price", "10"],
    }


# flags whose large values legitimately mean "run that long" (bounded by flag_number, not by us)
LONG_RUNNING: dict[tuple[str, ...], set[str]] = {("record",): {"--duration"}, ("monitor",): {"--count"}}
# the values that, given to a LONG_RUNNING flag, ask for a run that long
LONG_VALUES = frozenset({"1e9", "1e308", "9" * 400, "1000000000", "999999999999"})
# flags that make a run last (a server, a loop until Ctrl-C)
SKIP_FLAGS = {"--help", "--version", "--headless", "--alerts"}


def command_flags(words: tuple[str, ...]) -> list[argparse.Action]:
    parser = build_parser()
    target = parser
    for word in words:
        sub = next(a for a in target._actions if isinstance(a, argparse._SubParsersAction))
        target = sub.choices[word]
    return [a for a in target._actions
            if not isinstance(a, argparse._SubParsersAction) and a.dest != "help"]


def flag_argv(base: list[str], action: argparse.Action, value: str) -> list[str]:
    """``base`` with the flag of ``action`` set to ``value`` (replaced if ``base`` sets it); a
    positional's value replaces the first positional word of ``base``."""
    if not action.option_strings:
        argv = list(base)
        if argv and not argv[0].startswith("-"):
            argv[0] = value
        else:
            argv.insert(0, value)
        return argv
    flag = max(action.option_strings, key=len)
    argv = list(base)
    if flag in argv:
        i = argv.index(flag)
        del argv[i:i + 2]
    if action.nargs == 0:
        return [*argv, flag]
    return [*argv, f"{flag}={value}"] if value.startswith("-") else [*argv, flag, value]


@contextlib.contextmanager
def bounded() -> Iterator[None]:
    """An alarm at ``TIME_LIMIT_S`` raising ``Hung``, and an address-space limit of the current
    size + ``MEMORY_LIMIT_BYTES`` (so a runaway allocation is a MemoryError, not the OOM killer)."""
    vm = _vm_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + MEMORY_LIMIT_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    def _alarm(_signum: int, _frame: object) -> None:
        raise Hung()

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def _inside(directory: Path) -> Iterator[None]:
    """The working directory set to ``directory`` for the block (contextlib.chdir: 3.11+)."""
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _vm_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_case(argv: list[str], cwd: Path | None = None) -> Outcome:
    """``fleet-tui argv`` in-process, bounded (``bounded``), in ``cwd`` (a fresh temporary
    directory by default: a hostile value taken as a relative path writes nothing elsewhere)."""
    out, err = io.StringIO(), io.StringIO()
    hung = False
    code = 0
    with tempfile.TemporaryDirectory(prefix="fleet-hostile-cwd-") as scratch, \
            _inside(Path(cwd or scratch)), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with bounded():
                code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
        except Hung:
            hung, code = True, -1
        except BaseException as exc:  # noqa: BLE001 - anything main let through is a finding
            import traceback

            err.write("Traceback (escaped main)\n" + "".join(traceback.format_exception(exc)))
            code = 1
    return Outcome(tuple(argv), code, out.getvalue(), err.getvalue(), hung)


def sweep(commands: list[tuple[str, ...]] | None = None) -> list[tuple[Outcome, list[str]]]:
    root = Path(tempfile.mkdtemp(prefix="fleet-hostile-"))
    files = make_files(root)
    failures = []
    for words, base in base_argvs(files).items():
        if commands and words not in commands:
            continue
        for action in command_flags(words):
            flag = max(action.option_strings, key=len, default="")
            if flag in SKIP_FLAGS:
                continue
            for value in hostile_values(files):
                if flag in LONG_RUNNING.get(words, ()) and value in LONG_VALUES:
                    continue
                outcome = run_case([*words, *flag_argv(base, action, value)])
                found = outcome.problems()
                if found:
                    failures.append((outcome, found))
                    print(f"{found}: {list(outcome.argv)!r}\n  " +
                          (outcome.err.strip().splitlines() or [""])[-1][:300], flush=True)
    return failures


if __name__ == "__main__":
    wanted = [tuple(a.split()) for a in sys.argv[1:]] or None
    bad = sweep(wanted)
    print(f"{len(bad)} failing cases")
