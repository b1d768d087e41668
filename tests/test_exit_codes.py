"""Exit status as documented, for every command: 0 ok, 2 bad input or no device (one sentence on
stderr naming the flag, file or source, never a traceback), 1 a failure.

One table: each command's no-device (or unreachable source), bad-input and success paths, run
through the real entry point. "No device" is made certain on any machine: NVML answers "library
not found" (the fake module on the real structures) and PATH holds no hl-smi, neuron-monitor or
amd-smi."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pynvml as real
import pytest

from fleet_tui.cli import build_parser
from tests.cli_run import run
from tests.fakes.fake_pynvml import FakeNvml

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROM = f"prometheus:http://127.0.0.1:{_free_port()}"  # nothing listens there
JOBS = "job,user,submit_s,run_s,gpus\n1,alice,0,3600,8\n2,bob,60,1800,16\n"
DEMAND = "hour,devices\n0,8\n1,16\n2,24\n"

# (command line, exit status, words stderr must hold); {tmp} is the test's folder, made first
# with jobs.csv, demand.csv and sim.db (a recorded simulator history).
TABLE = [
    # no device here (or a source that cannot be read)
    ("monitor --once", 2, "no accelerator found"),
    ("monitor --once --json", 2, "--source sim:8"),
    ("monitor --headless --count 2", 2, "no accelerator found"),
    ("monitor --alerts --count 2", 2, "no device to watch"),
    ("record --db {tmp}/none.db --duration 1", 2, "no accelerator found"),
    ("--source nvml monitor --once", 2, "--source nvml"),
    ("record --db {tmp}/none.db --source nvml --duration 1", 2, "--source nvml"),
    (f"monitor --once --source {PROM}", 2, "unreachable"),
    (f"fleet --source {PROM} --timeout 2", 2, "unreachable"),
    (f"jobs --source {PROM} --timeout 2", 2, "unreachable"),
    (f"jobs report 4242 --source {PROM} --timeout 2", 2, "unreachable"),
    # bad input
    ("catalog instances --filter zz=1", 2, "--filter"),
    ("catalog validate {tmp}/missing.toml", 2, "missing.toml"),
    ("size --model no-such-model --gpu H100", 2, "no-such-model"),
    ("size --model llama-3.1-8b --gpu no-such-gpu", 2, "no-such-gpu"),
    ("size --model llama-3.1-8b --batchsize 3", 2, "--batch"),
    ("recommend --model llama-3.1-8b --batch 0", 2, "--batch"),
    ("size --model llama-3.1-8b --gpu H100 --prompt-len 100 --gen-len 100 --rate 1e12", 2,
     "--rate '1e12': at most 1,000,000 requests/s"),
    ("recommend --model llama-3.1-8b --prompt-len 100 --gen-len 100 --tokens-per-s 1e10", 2,
     "--tokens-per-s"),
    ("recommend --model llama-3.1-8b --gpu no-such-gpu", 2, "--gpu 'no-such-gpu'"),
    ("scenarios run no-such-scenario", 2, "no-such-scenario"),
    ("monitor --once --source sim:2 --interval 0.01", 2, "--interval"),
    ("monitor --once --source bogus", 2, "--source"),
    ("analyze {tmp}/missing.jsonl", 2, "missing.jsonl"),
    ("record --db {tmp}/x.db --source sim:2 --duration -1", 2, "--duration"),
    ("rightsize --db {tmp}/missing.db", 2, "no such history database"),
    ("plan --db {tmp}/missing.db --instance p5.48xlarge", 2, "no such history database"),
    ("plan --demand {tmp}/demand.csv --instance no-such-instance", 2, "no-such-instance"),
    ("queue simulate {tmp}/missing.csv --nodes 2 --gpus-per-node 8", 2, "missing.csv"),
    ("export --prometheus --port 70000 --source sim:1", 2, "--port"),
    # success
    ("catalog models", 0, ""),
    ("size --model llama-3.1-8b --gpu H100 --json", 0, ""),
    ("recommend --model llama-3.1-8b --top 3", 0, ""),
    ("scenarios list", 0, ""),
    ("analyze demo --window 5 --json", 0, ""),
    ("monitor --once --source sim:2", 0, ""),
    ("monitor --headless --count 2 --interval 0.25 --source sim:2 --json", 0, ""),
    ("monitor --alerts --count 2 --interval 0.25 --source sim:2", 0, ""),
    ("record --db {tmp}/new.db --source sim:2 --interval 0.1 --duration 0.5", 0, ""),
    ("rightsize --db {tmp}/sim.db --instance p5.48xlarge", 0, ""),
    ("plan --demand {tmp}/demand.csv --instance p5.48xlarge --json", 0, ""),
    ("plan --db {tmp}/sim.db --instance p5.48xlarge", 0, ""),
    ("queue simulate {tmp}/jobs.csv --nodes 2 --gpus-per-node 8 --policy fifo --json", 0, ""),
]
# fleet, jobs and export succeed against a real Prometheus: tests/fleet and the README test.


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    where = tmp_path_factory.mktemp("exit-codes")
    (where / "jobs.csv").write_text(JOBS)
    (where / "demand.csv").write_text(DEMAND)
    from fleet_tui.cli import main

    assert main(["record", "--db", str(where / "sim.db"), "--source", "sim:2", "--interval", "0.1",
                 "--duration", "1"]) == 0
    return where


@pytest.fixture
def no_device_here(monkeypatch, tmp_path):
    fake = FakeNvml.h200(devices=1, init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not importable
    monkeypatch.setenv("PATH", str(tmp_path))  # no hl-smi, neuron-monitor or amd-smi
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.mark.parametrize(("line", "status", "words"), TABLE, ids=[row[0] for row in TABLE])
def test_exit_status(line, status, words, folder, no_device_here, capsys):
    import shlex

    code, out, err = run(capsys, *shlex.split(line.format(tmp=folder)))
    assert code == status, f"fleet-tui {line}: exit {code}\n{err}"
    assert "Traceback" not in err
    if status == 2:
        assert err.strip(), "an error says why"
        assert words in err, err
    else:
        assert out.strip() or err.strip() or "--alerts" in line  # alerts: none may fire


def test_the_table_covers_every_command():
    parser = build_parser()
    commands = set(next(a for a in parser._actions if a.dest == "command").choices)
    seen = {word for line, _, _ in TABLE for word in line.split() if word in commands}
    assert commands <= seen, sorted(commands - seen)
    for kind in (0, 2):
        assert {line.split()[0] for line, status, _ in TABLE if status == kind} >= {
            "monitor", "record", "plan"}


def test_a_bug_exits_1_and_says_so(monkeypatch, capsys):
    """The third status: a fault of fleet-tui's own (here a core function that breaks) is exit 1
    with the traceback and a sentence saying it is a bug, not the user's input."""
    import fleet_tui.core.scenarios as scenarios

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the core")

    monkeypatch.setattr(scenarios, "load_scenarios", broken)
    code, out, err = run(capsys, "scenarios", "list")
    assert code == 1
    assert "RuntimeError: a bug in the core" in err and "bug in fleet-tui" in err
