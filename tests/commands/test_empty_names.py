"""A name flag given an empty value (``--cloud "$CLOUD"`` with ``CLOUD`` unset) is refused by name,
exit 2: it used to be read as no filter at all, so the answer silently covered every cloud or no
device."""

from __future__ import annotations

import pytest

from tests.cli_run import run

LLAMA = ["--model", "llama-3.1-8b"]


@pytest.mark.parametrize(("argv", "flag"), [
    (["size", *LLAMA, "--gpu", ""], "--gpu"),
    (["size", *LLAMA, "--gpu", "   "], "--gpu"),
    (["recommend", *LLAMA, "--gpu", ""], "--gpu"),
    (["recommend", *LLAMA, "--cloud", ""], "--cloud"),
    (["recommend", *LLAMA, "--region", " "], "--region"),
    (["recommend", *LLAMA, "--vendor", ""], "--vendor"),
    (["recommend", *LLAMA, "--stack", ""], "--stack"),
    (["recommend", *LLAMA, "--current", ""], "--current"),
    (["plan", "--demand", "demand.csv", "--instance", ""], "--instance"),
    (["jobs", "--source", "fleet-replay:demo", "--user", ""], "--user"),
    (["jobs", "--source", "fleet-replay:demo", "--account", " "], "--account"),
])
def test_an_empty_name_is_refused_by_its_flag(argv, flag, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert f"argument {flag}: an empty value" in last and "Traceback" not in err


def test_a_name_with_spaces_around_it_is_the_name(capsys):
    code, out, _ = run(capsys, "size", *LLAMA, "--gpu", " H100 ", "--json")
    assert code == 0 and '"fits": true' in out
