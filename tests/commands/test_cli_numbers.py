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
    assert f"unrecognized arguments: {typed}" in err and "argument --tokens-per-s" not in err


@pytest.mark.parametrize("argv, command, hint", [
    (["size", "--model", "llama-3.1-8b", "--batchsize", "3"], "size", "--batchsize: did you mean --batch?"),
    (["size", "--model", "llama-3.1-8b", "--modle-config", "x.json"], "size",
     "--modle-config: did you mean --model-config?"),
    (["recommend", "--model", "llama-3.1-8b", "--tokens", "20B"], "recommend", "--training-tokens"),
    (["monitor", "--once", "--source", "sim:1", "--intervall", "1"], "monitor", "did you mean --interval?"),
    (["catalog", "instances", "--jsn"], "catalog instances", "--jsn: did you mean --json?"),
])
def test_an_unknown_flag_is_refused_by_its_command_with_the_nearest_flags(argv, command, hint, capsys):
    err = _refused(argv, capsys)
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"usage: fleet-tui {command} ")  # the command's usage, not the top level's
    assert lines[-1].startswith(f"fleet-tui {command}: error: unrecognized arguments: ")
    assert hint in lines[-1] and f"'fleet-tui {command} --help'" in lines[-1]


def test_a_stray_word_is_refused_without_a_guess(capsys):
    err = _refused(["size", "--model", "llama-3.1-8b", "H100"], capsys)
    assert err.strip().splitlines()[-1] == ("fleet-tui size: error: unrecognized arguments: H100; "
                                            "'fleet-tui size --help' lists what it takes")


def test_refused_words_do_not_show_secrets(capsys):
    err = _refused(["fleet", "--prometheus", "http://ops:hunter2@127.0.0.1:9/?access_token=t0k",
                    "--password=s3cret", "--api-key", "k3y"], capsys)
    assert "unrecognized arguments: --prometheus http://127.0.0.1:9/?access_token=***" in err
    assert "--password=*** --api-key ***" in err
    assert not any(s in err for s in ("hunter2", "t0k", "s3cret", "k3y"))


def test_a_count_bound_is_printed_as_people_read_it(capsys):
    err = _refused(["queue", "simulate", "ok.csv", "--nodes", "2", "--gpus-per-node", "0"], capsys)
    assert "--gpus-per-node: 0: must be a whole number from 1 to 1,000,000,000,000" in err
    assert "e+" not in err


def test_a_huge_price_bound_is_printed_as_people_read_it(capsys):
    err = _refused(["fleet", "--source", "prometheus:http://127.0.0.1:9", "--node-price", "1e13"],
                   capsys)
    assert "must be from -1,000,000,000,000 to 1,000,000,000,000" in err and "e+" not in err


def test_an_out_of_range_length_is_echoed_as_typed(capsys):
    assert main(["size", "--model", "llama-3.1-8b", "--gpu", "H100", "--prompt-len", "100",
                 "--gen-len", "1e30"]) == 2
    err = capsys.readouterr().err
    assert "--gen-len 1e30: out of range (allowed: 1 to 10,000,000)" in err
    assert "19884624838656" not in err
