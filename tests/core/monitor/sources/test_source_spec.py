"""--source parsing and dispatch."""

from __future__ import annotations

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.sources import SourceSpec, open_source, parse_source_spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("auto", SourceSpec("auto")),
        ("NVML", SourceSpec("nvml")),
        ("hpu", SourceSpec("hpu")),
        ("neuron", SourceSpec("neuron")),
        ("sim", SourceSpec("sim", {"n": 2})),
        ("sim:8", SourceSpec("sim", {"n": 8})),
        ("replay:demo", SourceSpec("replay", {"path": "demo", "speed": 1.0})),
        ("replay:/tmp/a.jsonl@10", SourceSpec("replay", {"path": "/tmp/a.jsonl", "speed": 10.0})),
        ("replay:/tmp/a.jsonl@2.5x", SourceSpec("replay", {"path": "/tmp/a.jsonl", "speed": 2.5})),
        ("prometheus:http://127.0.0.1:9090", SourceSpec("prometheus", {"url": "http://127.0.0.1:9090"})),
    ],
)
def test_valid_specs(spec, expected):
    assert parse_source_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "empty"),
        ("sim:0", "1-64"),
        ("sim:65", "1-64"),
        ("sim:x", "whole number"),
        ("replay:", "needs a file"),
        ("replay:a.jsonl@fast", "speed"),
        ("replay:a.jsonl@0", "speed"),
        ("prometheus:localhost:9090", "http://"),
        ("nvlm", "did you mean 'nvml'"),
        ("nvml:0", "unknown source"),
    ],
)
def test_bad_specs_name_the_allowed_forms(spec, words):
    with pytest.raises(UserError) as err:
        parse_source_spec(spec)
    msg = str(err.value)
    assert words in msg and "Allowed:" in msg and "sim:N" in msg


def test_open_source_builds_the_right_class_without_opening():
    assert type(open_source("sim:3")).__name__ == "SimSource"
    assert type(open_source("nvml")).__name__ == "NvmlSource"
    assert type(open_source("replay:demo")).__name__ == "ReplaySource"


def test_missing_replay_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        open_source(f"replay:{tmp_path / 'nope.jsonl'}")


# ----- the registry -------------------------------------------------------------------------------

def test_every_registered_opener_imports():
    from fleet_tui.core.monitor.sources import SOURCES, load_opener

    for info in SOURCES.values():
        for path in filter(None, (info.opener, info.probe_opener)):
            assert callable(load_opener(path)), (info.name, path)


def test_help_forms_and_probe_order_come_from_the_registry():
    from fleet_tui.core.monitor.sources import allowed_forms, probe_order, source_help

    assert source_help() == ("where live readings come from: auto (default), nvml, hpu, neuron, amd, "
                             "sim[:N], replay:PATH, fleet-replay:demo, prometheus:URL")
    assert allowed_forms() == ("auto, nvml, hpu, neuron, amd, sim, sim:N (N = 1-64), replay:PATH, "
                               "replay:PATH@SPEED, replay:demo, fleet-replay:demo, fleet-replay:PATH[@SPEED], "
                               "prometheus:URL")
    assert [i.name for i in probe_order()] == ["nvml", "hpu", "neuron", "amd"]


def test_a_new_source_is_one_registry_line(monkeypatch):
    """Registering a SourceInfo is all it takes: parsing, errors, auto and open_source follow."""
    from fleet_tui.core.monitor import sources
    from fleet_tui.core.monitor.sources import SOURCES, SourceInfo, allowed_forms, probe_order

    monkeypatch.setitem(SOURCES, "fake", SourceInfo(
        "fake", "fake", "fake", "a test double", "fleet_tui.core.monitor.sources.sim:SimSource",
        probe=9))
    assert parse_source_spec("fake") == SourceSpec("fake")
    assert "fake" in allowed_forms() and probe_order()[-1].name == "fake"
    assert type(sources.open_source("fake")).__name__ == "SimSource"
    with pytest.raises(UserError, match="did you mean 'fake'"):
        parse_source_spec("fakr")
