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


def test_builder_fixes_name_the_forms_fields_and_following_them_works(catalog):
    """A layout fix said "(devices 4 tp 4)": the form has no tp. It names the form's fields
    (devices, sharding) — and setting them as it says makes the workload start."""
    import re

    from fleet_tui.ui.builder import compute

    form = {"b-kind": "inference", "b-model": "llama-3.1-70b", "b-precision": "bf16", "b-batch": "1",
            "b-seq": "2048", "b-gen": "256", "b-gpus": "1", "b-sharding": "auto", "b-accel": "H100"}
    result = compute(catalog, form)
    assert result.report is not None and not result.report.verdict.ok
    more = [line for line in result.markup.splitlines() if "× H100 as" in line]
    assert more and all(not re.search(r"\b(tp|pp|zero|cp|vpp|micro_batch)\b", line) for line in more)
    m = re.search(r"\(devices (\d+) sharding (\w+)\)", more[0])
    assert m, more[0]
    followed = compute(catalog, form | {"b-gpus": m.group(1), "b-sharding": m.group(2)})
    assert followed.report is not None and followed.report.verdict.ok
    assert "accelerator B200" in result.markup  # the accelerator fix names the form's field too
