"""Start-up stays light: what a headless command's process imports, checked in a fresh
interpreter so it cannot regress unnoticed. Speed itself is measured in bench/bench_catalog.py."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

import pytest

from fleet_tui import cli

SIZE = ["size", "--model", "llama-3.1-8b", "--gpu", "H100", "--json"]
_PROBE = (
    "import io, json, sys, contextlib\n"
    "from fleet_tui.cli import main\n"
    "out = io.StringIO()\n"
    "with contextlib.redirect_stdout(out):\n"
    "    try:\n"
    "        rc = main(sys.argv[1:])\n"
    "    except SystemExit as exc:\n"
    "        rc = exc.code\n"
    "heavy = ('pydantic', 'textual', 'rich', 'tomllib', 'fleet_tui.core.monitor', 'fleet_tui.ui',\n"
    "         'shutil')\n"
    "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'loaded': [m for m in heavy if m in sys.modules],\n"
    "                  'modules': sorted(sys.modules)}))\n"
)
#: What a one-device ``size`` runs without: the links table and the collectives (no device talks to
#: another), the layout search (one device has one layout), the training presets, the catalog's
#: filter language, the model-config reader, the ranking, the serving simulator, hmac.
NOT_ON_ONE_DEVICE = ("fleet_tui.core.interconnects", "fleet_tui.core.perf.collectives",
                     "fleet_tui.core.sizing.layout", "fleet_tui.core.frameworks",
                     "fleet_tui.core.catalog.query", "fleet_tui.core.modelconfig", "fleet_tui.core.ranking",
                     "fleet_tui.core.perf.sim_plan", "fleet_tui.core.sizing.overview", "hmac")


def _run(args: list[str], cache: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("args", [SIZE, ["recommend", "--model", "llama-3.1-8b", "--top", "3", "--json"],
                                  ["catalog", "instances", "--limit", "5"]], ids=["size", "recommend", "catalog"])
def test_commands_with_a_compiled_catalog_import_no_pydantic_textual_or_toml(tmp_path, args):
    first = _run(args, str(tmp_path))  # writes the compiled catalog and tables (pydantic validates)
    again = _run(args, str(tmp_path))
    assert first["rc"] == again["rc"] == 0
    assert again["out"] == first["out"]
    assert again["loaded"] == []


def test_size_on_one_device_imports_only_what_it_runs(tmp_path):
    _run(SIZE, str(tmp_path))  # compiles the catalog
    one = set(_run(SIZE, str(tmp_path))["modules"])
    assert one.isdisjoint(NOT_ON_ONE_DEVICE), sorted(one.intersection(NOT_ON_ONE_DEVICE))
    # the same probe sees them when the run needs them: four devices search a layout on links
    four = set(_run(["size", "--model", "llama-3.1-70b", "--gpu", "H100", "--gpus", "4", "--json"],
                    str(tmp_path))["modules"])
    assert {"fleet_tui.core.interconnects", "fleet_tui.core.sizing.layout"} <= four
    training = set(_run(["size", "--model", "llama-3.1-8b", "--workload", "lora", "--seq-len", "512",
                         "--gpu", "H100", "--json"], str(tmp_path))["modules"])
    assert {"fleet_tui.core.frameworks", "fleet_tui.core.perf.collectives"} <= training


def test_version_imports_nothing_heavy_nor_the_commands(tmp_path):
    res = _run(["--version"], str(tmp_path))
    assert res["rc"] == 0 and res["out"].startswith("fleet-tui ")
    assert res["loaded"] == []


def test_command_lists_match_what_each_module_registers():
    for module, names in cli.COMMANDS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == names, module


def test_a_run_builds_only_the_commands_it_names():
    def commands(argv: list[str] | None) -> set[str]:
        parser = cli.build_parser(argv)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return set(sub.choices)

    every = {name for names in cli.COMMANDS.values() for name in names}
    assert commands(SIZE) == {"size"}
    assert commands(["--theme", "x", "record", "--db", "h.db"]) == {"monitor", "analyze", "record", "rightsize"}
    assert commands(["--source", "sim:2"]) == set()  # the app
    assert commands(["--help"]) == every
    assert commands(["sizee"]) == every  # argparse's error lists every choice
    assert commands([]) == set() and commands(None) == every


def test_help_is_as_wide_as_the_terminal_says(monkeypatch, capsys):
    # the parser sizes its help itself (cli._Parser, to keep shutil out of every start)
    for columns in ("60", "140"):
        monkeypatch.setenv("COLUMNS", columns)
        with pytest.raises(SystemExit):
            cli.main(["size", "--help"])
        out = capsys.readouterr().out
        # the flags and their help, which the formatter wraps (the description, group titles and
        # examples are preformatted)
        lines = [x for x in out.splitlines() if x.startswith(("  -", " " * 24))]
        assert max(map(len, lines)) <= int(columns) - 2
        assert max(map(len, lines)) > int(columns) - 30
