"""The capability table (core/capabilities.py, catalogs/capabilities.toml): the weight-only kernels
it lists, and a broken table refused with its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_tui.core.capabilities import load_weight_only, weight_only_engines, weight_only_kernel
from fleet_tui.core.errors import UserError
from fleet_tui.core.specs import architecture_precisions


def test_fp8_weights_run_weight_only_on_ampere_under_vllm_and_sglang_only():
    for engine in ("vllm", "sglang"):
        kernel = weight_only_kernel("fp8", "Ampere", engine)
        assert kernel is not None and "Marlin" in kernel.kernel
    assert weight_only_kernel("fp8", "Ampere", "trtllm") is None
    assert weight_only_kernel("fp8", "Ampere", "hf") is None
    assert weight_only_kernel("fp8", "Turing", "sglang") is None  # SGLang: compute capability 8.0-8.8
    assert weight_only_engines("fp8", "Ampere") == ("vllm", "sglang")
    assert weight_only_engines("fp8", "Hopper") == ()  # Hopper multiplies in fp8 itself


def test_a_weight_only_row_names_only_architectures_without_the_units_and_cites_a_source():
    rows = load_weight_only()
    assert rows
    for row in rows:
        assert row.source
        for arch in row.architectures:
            described = architecture_precisions(arch)
            assert described is not None and row.precision in described.lacks, (row.id, arch)


def test_a_broken_weight_only_row_is_refused_with_its_file(tmp_path: Path):
    bad = tmp_path / "capabilities.toml"
    bad.write_text('[[weight_only]]\nid = "x"\nprecision = "fp8"\nengines = ["vllm"]\n'
                   'architectures = ["Ampere"]\nkernel = "k"\nsource = "s"\nspeed = 2\n')
    with pytest.raises(UserError, match="capabilities.toml"):
        load_weight_only(bad)
