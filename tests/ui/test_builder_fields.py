"""The builder reads its form with the CLI's parser and shows the core's errors with its own labels."""

from __future__ import annotations

import pytest

from fleet_tui.core.catalog import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_builder_and_cli_read_the_same_workload(catalog):
    from fleet_tui.cli import build_parser
    from fleet_tui.commands._workload_args import workload_from_args
    from fleet_tui.ui.builder import build_workload

    form = {"b-kind": "qlora", "b-model": "llama-3.1-8b", "b-precision": "int4", "b-batch": "2",
            "b-seq": "1024", "b-gen": "256", "b-gpus": "1", "b-sharding": "data", "b-optimizer": "adamw",
            "b-lora-rank": "8", "b-ckpt": True}
    args = build_parser().parse_args(["size", "--model", "llama-3.1-8b", "--workload", "qlora",
                                      "--precision", "int4", "--batch", "2", "--seq-len", "1024",
                                      "--sharding", "data", "--optimizer", "adamw", "--lora-rank", "8",
                                      "--grad-checkpointing"])
    assert build_workload(catalog, form) == workload_from_args(args, catalog)


def test_builder_shows_core_errors_with_its_labels(catalog):
    from fleet_tui.ui.builder import compute

    form = {"b-kind": "inference", "b-params": "lots", "b-batch": "1", "b-gpus": "1"}
    assert compute(catalog, form).error.startswith("params 'lots': not a parameter count")
    form = {"b-kind": "inference", "b-config": "/nonexistent/config.json"}
    assert compute(catalog, form).error.startswith("config.json path /nonexistent/config.json: no such file")
    form = {"b-kind": "inference", "b-params": "50M"}  # the CLI's bounds: at least 100M
    assert "between 100M and 100T" in compute(catalog, form).error
