"""Numbers on the command line: 'nan' and 'inf' are no flag's value, and counts start at 1.

Found by trying the commands: ``analyze --window nan`` looped forever, ``monitor --interval inf``
raised false alerts and then a JSON traceback, ``export --interval nan`` busy-looped,
``rightsize --top -1`` listed all but the last candidate, ``recommend --max-instances 0`` was
quietly replaced by the default."""

from __future__ import annotations

import pytest

from fleet_tui.cli import main

CASES = [
    (["analyze", "demo", "--window", "nan"], "--window"),
    (["analyze", "demo", "--step", "inf"], "--step"),
    (["monitor", "--once", "--source", "sim:2", "--window", "inf"], "--window"),
    (["monitor", "--headless", "--source", "sim:1", "--interval", "inf", "--count", "1"], "--interval"),
    (["monitor", "--headless", "--source", "sim:1", "--count", "0"], "--count"),
    (["export", "--prometheus", "--source", "sim:1", "--interval", "nan"], "--interval"),
    (["fleet", "--source", "prometheus:http://127.0.0.1:9", "--node-price", "nan"], "--node-price"),
    (["fleet", "--source", "prometheus:http://127.0.0.1:9", "--timeout", "-inf"], "--timeout"),
    (["rightsize", "--db", "unused.db", "--top", "-1"], "--top"),
    (["recommend", "--model", "llama-3.1-8b", "--max-instances", "0"], "--max-instances"),
    (["recommend", "--model", "llama-3.1-8b", "--budget", "inf"], "--budget"),
    (["scenarios", "run", "inference_small_p5", "--top", "0"], "--top"),
    (["--interval", "NaN"], "--interval"),
]


def _refused(argv, capsys) -> str:
    """argparse's exit 2 for ``argv``; its message."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_non_finite_and_non_positive_numbers_are_refused_by_name(argv, flag, capsys):
    err = _refused(argv, capsys)
    assert f"argument {flag}" in err and "Traceback" not in err


def test_a_binary_file_given_as_a_trace_is_an_error_with_its_line(tmp_path, capsys):
    bad = tmp_path / "bin.jsonl"
    bad.write_bytes(b'{"kind": "static"}\n\xff\xfe garbage\n')
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: not UTF-8 text" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, typed", [
    # size's --tokens given to recommend was read as a prefix of --tokens-per-s
    (["recommend", "--model", "llama-3.1-8b", "--workload", "training", "--seq-len", "512", "--tokens", "20B"],
     "--tokens 20B"),
    (["size", "--model", "llama-3.1-8b", "--prompt-len", "8", "--gen", "8"], "--gen 8"),
    (["monitor", "--once", "--source", "sim:1", "--inter", "1"], "--inter 1"),
])
def test_a_flag_is_taken_by_its_whole_name_only(argv, typed, capsys):
    err = _refused(argv, capsys)
    assert f"unrecognized arguments: {typed}" in err and "--tokens-per-s" not in err
