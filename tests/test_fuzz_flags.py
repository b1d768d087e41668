"""The hostile-input probe kept as a test: hypothesis picks a command, one to three of its flags
and hostile values for them (huge and tiny numbers, NaN, paths to FIFOs, /dev/zero, binary and
deeply nested files, names over 255 bytes, escape codes, URLs with passwords...), runs the command
in-process (``tests.hostile_cli``) and asserts exit 0 or 2, no traceback, no password fragment, no
control code printed, within ``TIME_LIMIT_S`` and under ``MEMORY_LIMIT_BYTES`` more address space.

Bounded in CI: ``max_examples`` and a derandomized seed keep the run under ~2 minutes here; set
``FLEET_TUI_FUZZ_EXAMPLES`` for a longer run (``python -m tests.hostile_cli`` sweeps every flag
with every value once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_tui.core.redact import forget_all
from tests import hostile_cli

EXAMPLES = int(os.environ.get("FLEET_TUI_FUZZ_EXAMPLES", "300"))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> hostile_cli.Files:
    return hostile_cli.make_files(Path(tmp_path_factory.mktemp("hostile")))


def _cases(files: hostile_cli.Files):
    bases = hostile_cli.base_argvs(files)
    values = hostile_cli.hostile_values(files)

    @st.composite
    def case(draw) -> list[str]:
        words = draw(st.sampled_from(sorted(bases)))
        actions = [a for a in hostile_cli.command_flags(words)
                   if max(a.option_strings, key=len, default="") not in hostile_cli.SKIP_FLAGS]
        chosen = draw(st.lists(st.sampled_from(actions), min_size=1, max_size=3,
                               unique_by=lambda a: a.dest))
        argv = list(bases[words])
        for action in chosen:
            flag = max(action.option_strings, key=len, default="")
            pool = values
            if flag in hostile_cli.LONG_RUNNING.get(words, ()):
                pool = [v for v in values if v not in hostile_cli.LONG_VALUES]
            argv = hostile_cli.flag_argv(argv, action, draw(st.sampled_from(pool)))
        return [*words, *argv]

    return case()


def test_every_command_survives_hostile_flags(files):
    forget_all()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_cases(files))
    def check(argv: list[str]) -> None:
        outcome = hostile_cli.run_case(argv)
        assert not outcome.problems(), (outcome.problems(), argv, outcome.err[-2000:])

    check()


@pytest.mark.parametrize("argv", [
    ["plan", "--demand", "{demand_huge.txt}", "--on-demand-price", "10"],
    ["plan", "--demand", "{demand_inf.txt}", "--on-demand-price", "10"],
    ["plan", "--demand", "/dev/zero", "--on-demand-price", "10"],
    ["plan", "--demand=", "--on-demand-price", "10"],
    ["plan", "--demand", "{fifo}", "--on-demand-price", "10"],
    ["monitor", "--once", "--source", "sim:1", "--rules", "/dev/zero"],
    ["monitor", "--once", "--source", "sim:1", "--rules", "{fifo}"],
    ["jobs", "--devices", "/dev/zero"],
    ["jobs", "--devices", "{deep.json}"],
    ["queue", "simulate", "/dev/zero", "--nodes", "1", "--gpus-per-node", "8"],
    ["queue", "simulate", "{jobs_nan.json}", "--nodes", "1", "--gpus-per-node", "8"],
    ["queue", "simulate", "{jobs_inf.swf}", "--nodes", "1", "--gpus-per-node", "8"],
    ["queue", "simulate", "{jobs_extra.csv}", "--nodes", "1", "--gpus-per-node", "8"],
    ["queue", "simulate", "{binary.bin}", "--nodes", "1", "--gpus-per-node", "8"],
    ["analyze", "{ns.jsonl}", "--window", "5"],
    ["analyze", "{t1e20.jsonl}", "--window", "5"],
    ["analyze", "{t1e20.jsonl}"],
    ["analyze", "demo", "--window", "1e308"],
    ["analyze", "demo", "--window", "5", "--step", "1e-300"],
    ["analyze", "/dev/zero"],
    ["fleet", "--source", "prometheus:http://127.0.0.1:9/", "--timeout", "1e308"],
    ["fleet", "--source", "prometheus:http://127.0.0.1:9/", "--window", "1e308"],
    ["analyze", "{unreadable.txt}"],
    ["queue", "simulate", "x" * 300, "--nodes", "1", "--gpus-per-node", "8"],
    ["--catalog-dir", "{deepcat}", "recommend", "--model", "llama-3.1-8b", "--top", "1"],
    ["--catalog-dir", "{loopdir}", "size", "--model", "llama-3.1-8b", "--gpu", "H100"],
    ["catalog", "validate", "{loopdir}"],
    ["record", "--db", "{history.db}", "--source", "sim:1", "--duration", "0.3", "--interval", "1e9"],
    ["rightsize", "--db", "{history.db}", "--cloud", f"prometheus:http://u:{hostile_cli.PASSWORD}@h:9"],
    ["catalog", "validate", "{deepcat}"],
])
def test_the_cases_the_probe_found(argv, files):
    """Each case the first probe found (a traceback, a hang, an allocation past 10 GB): now a
    clear error (exit 2) or a result (exit 0), within the time and memory bounds."""
    real = [files.path(a[1:-1]) if a.startswith("{") else a for a in argv]
    outcome = hostile_cli.run_case(real)
    assert not outcome.problems(), (outcome.problems(), outcome.err[-2000:])
    assert outcome.code == 2 or argv[0] == "--catalog-dir", outcome.err
