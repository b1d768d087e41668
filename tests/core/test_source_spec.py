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
        ("sim", SourceSpec("sim", devices=2)),
        ("sim:8", SourceSpec("sim", devices=8)),
        ("replay:demo", SourceSpec("replay", path="demo")),
        ("replay:/tmp/a.jsonl@10", SourceSpec("replay", path="/tmp/a.jsonl", speed=10.0)),
        ("replay:/tmp/a.jsonl@2.5x", SourceSpec("replay", path="/tmp/a.jsonl", speed=2.5)),
        ("prometheus:http://127.0.0.1:9090", SourceSpec("prometheus", url="http://127.0.0.1:9090")),
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
