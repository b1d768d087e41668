"""The README's usage is what the code does: every documented command line parses with today's
flags, the ones that need nothing outside the repository run and exit 0, and the library example
runs as printed."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from fleet_tui.cli import build_parser, main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)


def _documented_commands() -> list[str]:
    """The ``fleet-tui`` lines of the README's sh blocks, continuations joined, comments dropped,
    each ``[optional part]`` both left out and put in, ``a | b`` alternatives split."""
    commands = []
    for block in _blocks("sh"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("  #")[0].strip()
            if not line.startswith("fleet-tui "):
                continue
            head, *alternatives = [part.strip() for part in line.split(" | ")]
            prefix = " ".join(head.split()[:2])  # "fleet-tui scenarios"
            variants = [head] + [f"{prefix} {alt}" for alt in alternatives]
            for variant in variants:
                commands.append(re.sub(r"\s*\[[^\]]*\]", "", variant))
                if "[" in variant:
                    commands.append(re.sub(r"\[([^\]]*)\]", r"\1", variant))
    return commands


COMMANDS = _documented_commands()
# These need nothing but the repository (no GPU, server, database or input file of the user's).
OFFLINE = ("fleet-tui catalog instances", "fleet-tui catalog accelerators", "fleet-tui catalog models",
           "fleet-tui catalog validate", "fleet-tui size --model ", "fleet-tui recommend ",
           "fleet-tui scenarios ", "fleet-tui analyze ")


def test_the_readme_documents_every_command():
    documented = {c.split()[1] for c in COMMANDS}
    parser = build_parser()
    registered = set(next(a for a in parser._actions if a.dest == "command").choices)
    assert registered <= documented, f"not in the README's usage: {sorted(registered - documented)}"
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_command_parses(command):
    args = build_parser().parse_args(shlex.split(command)[1:])  # argparse exits 2 on a bad flag
    assert getattr(args, "func", None) is not None


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith(OFFLINE)
                                     and "PATH" not in c])
def test_documented_offline_command_runs(command, capsys):
    assert main(shlex.split(command)[1:]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    if "--json" in command:
        json.loads(out)  # one JSON document, nothing else on stdout


def test_library_example_runs():
    (example,) = _blocks("python")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(example, "README.md (library example)", "exec"), {})
    first, *rest = stdout.getvalue().splitlines()
    total, fits = first.split()
    assert int(total) > 0 and fits in ("True", "False")
    assert rest  # the explanation


def _indented_commands() -> list[str]:
    """The README's indented command lines (Set up): 4 spaces, outside fenced blocks."""
    unfenced = re.sub(r"^```.*?^```", "", README, flags=re.S | re.M)
    return [line.strip() for line in unfenced.splitlines() if line.startswith("    ") and line.strip()]


def test_setup_commands_are_the_ones_ci_runs_and_parse():
    lines = _indented_commands()
    test_line = next(line for line in lines if "pytest" in line)
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert test_line in ci.splitlines(), "the README's test command is not the one .ci/run runs"
    app_lines = [line.split("&&")[-1].strip() for line in lines if "fleet-tui" in line]
    assert any("--source replay:demo" in line for line in app_lines)  # try it without a GPU
    for line in app_lines:
        words = shlex.split(line)
        assert words[0].endswith("fleet-tui"), line
        args = build_parser(words[1:]).parse_args(words[1:])
        assert getattr(args, "func", None) is None  # the app itself, no subcommand
