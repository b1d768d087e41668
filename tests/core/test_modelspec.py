"""Model shapes: parameter counts from published architectures and offline config.json parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import pytest

from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.modelconfig import load_model_config
from fleet_tui.core.modelspec import ModelArch, active_param_count, arch_for_params, param_count, param_counts
from fleet_tui.core.workload import parse_params

ROOT = REPO
CONFIGS = ROOT / "tests/fixtures/configs"


def _catalog() -> dict[str, ModelArch]:
    with open(ROOT / "catalogs/models.toml", "rb") as fh:
        return {m["id"]: ModelArch(**m) for m in tomllib.load(fh)["model"]}


# Totals the model authors publish (model cards / papers), in billions.
PUBLISHED_B = {
    "llama-3.2-1b": 1.24, "llama-3.2-3b": 3.21, "llama-3.1-8b": 8.03, "llama-3.1-70b": 70.6,
    "llama-3.1-405b": 405.9, "llama-2-7b": 6.74, "llama-2-13b": 13.0, "llama-2-70b": 69.0,
    "mistral-7b": 7.25, "mixtral-8x7b": 46.7, "mixtral-8x22b": 140.6, "qwen2.5-7b": 7.61,
    "qwen2.5-72b": 72.7, "gemma-2-9b": 9.24, "gemma-2-27b": 27.2, "qwen3-235b-a22b": 235.1,
}


def test_catalog_has_every_required_model_and_a_100b_moe():
    cat = _catalog()
    assert set(PUBLISHED_B) <= set(cat)
    assert any(m.is_moe and param_count(m) > 100e9 for m in cat.values())
    for m in cat.values():
        assert m.source.startswith("https://"), m.id


@pytest.mark.parametrize("model_id", sorted(PUBLISHED_B))
def test_derived_param_count_matches_published(model_id):
    m = _catalog()[model_id]
    assert param_count(m) / 1e9 == pytest.approx(PUBLISHED_B[model_id], rel=0.01)


def test_moe_active_params_are_the_routed_share():
    cat = _catalog()
    assert active_param_count(cat["mixtral-8x7b"]) / 1e9 == pytest.approx(12.9, rel=0.01)
    assert active_param_count(cat["mixtral-8x22b"]) / 1e9 == pytest.approx(39.1, rel=0.01)
    assert active_param_count(cat["qwen3-235b-a22b"]) / 1e9 == pytest.approx(22.2, rel=0.01)
    assert active_param_count(cat["llama-3.1-8b"]) == param_count(cat["llama-3.1-8b"])


def test_tied_embeddings_count_the_table_once():
    m = _catalog()["llama-3.2-1b"]
    untied = m.model_copy(update={"tied_embeddings": False})
    assert param_count(untied) - param_count(m) == m.vocab * m.hidden


def test_gqa_shrinks_attention_params():
    m = _catalog()["llama-3.1-8b"]
    mha = m.model_copy(update={"kv_heads": m.heads})
    h, d = m.hidden, m.dim_per_head
    extra = param_counts(mha).attention_per_layer - param_counts(m).attention_per_layer
    assert extra == 2 * h * (m.heads - m.kv_heads) * d


def test_arch_for_params_is_exact_llama_like_and_monotonic():
    prev = None
    for p in (1e8, 1e9, 7e9, 8e9, 70e9, 405e9):
        a = arch_for_params(int(p))
        assert param_count(a) == int(p)
        assert a.heads % a.kv_heads == 0 and a.kv_dim * 4 == a.hidden
        if prev is not None:
            assert (a.layers, a.hidden, a.intermediate) >= (prev.layers, prev.hidden, prev.intermediate)
        prev = a
    a7 = arch_for_params(7_000_000_000)
    assert 3500 <= a7.hidden <= 4600 and 28 <= a7.layers <= 36  # a 7B looks like a 7B


@pytest.mark.parametrize("name,expect", [
    ("llama-3.1-8b.json", dict(layers=32, hidden=4096, kv_heads=8, vocab=128256, tied_embeddings=False)),
    ("qwen2.5-7b.json", dict(layers=28, kv_heads=4, attention_bias=True, sliding_window=None)),
    ("gemma-2-9b.json", dict(head_dim=256, tied_embeddings=True, sliding_window=4096, sliding_window_layers=21)),
    ("mistral-7b-v0.1.json", dict(sliding_window=4096, sliding_window_layers=32)),
    ("mixtral-8x7b.json", dict(experts=8, experts_per_token=2)),
    ("qwen3-235b-a22b.json", dict(experts=128, experts_per_token=8, moe_intermediate=1536, head_dim=128)),
    ("gpt2.json", dict(layers=12, hidden=768, intermediate=3072, gated_mlp=False, tied_embeddings=True)),
])
def test_load_model_config_reads_each_family(name, expect):
    arch = load_model_config(CONFIGS / name)
    for k, v in expect.items():
        assert getattr(arch, k) == v, k


def test_config_matches_the_catalog_entry():
    cat = _catalog()
    for file, mid in (("llama-3.1-8b.json", "llama-3.1-8b"), ("qwen2.5-7b.json", "qwen2.5-7b"),
                      ("gemma-2-9b.json", "gemma-2-9b"), ("mixtral-8x7b.json", "mixtral-8x7b"),
                      ("qwen3-235b-a22b.json", "qwen3-235b-a22b")):
        assert param_count(load_model_config(CONFIGS / file)) == param_count(cat[mid])


def test_config_folder_is_accepted(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text((CONFIGS / "llama-3.1-8b.json").read_text())
    arch = load_model_config(d)
    assert arch.id == "my-model" and arch.layers == 32


def test_missing_keys_are_named_with_the_file():
    with pytest.raises(UserError) as exc:
        load_model_config(CONFIGS / "broken-missing-keys.json")
    msg = str(exc.value)
    assert "broken-missing-keys.json" in msg and "num_attention_heads" in msg and "intermediate_size" in msg


def test_json_syntax_error_names_file_and_line():
    with pytest.raises(UserError, match=r"broken-syntax\.json:5: not valid JSON"):
        load_model_config(CONFIGS / "broken-syntax.json")


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_model_config(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 6, '
                   '"num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 100}')
    with pytest.raises(UserError, match="multiple of kv_heads"):
        load_model_config(bad)


def _config(tmp_path, **override) -> Path:
    cfg = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    cfg.update(override)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_an_endless_file_is_refused_after_a_bounded_read(tmp_path):
    with pytest.raises(UserError, match=r"/dev/zero: not a regular file"):  # never read
        load_model_config("/dev/zero")
    big = tmp_path / "config.json"
    big.write_bytes(b" " * (5 * 2**20))
    with pytest.raises(UserError, match=r"config.json: larger than 4 MiB"):
        load_model_config(big)


def test_a_binary_config_is_not_utf8_text_with_file_and_line(tmp_path):
    p = tmp_path / "weights.bin"
    p.write_bytes(b'{"a": 1,\n"b": "\xff\xfe"}')
    with pytest.raises(UserError, match=r"weights\.bin:2: not UTF-8 text"):
        load_model_config(p)


def test_a_config_shape_outside_the_params_bounds_is_refused_like_params(tmp_path):
    with pytest.raises(FieldError) as exc:
        load_model_config(_config(tmp_path, hidden_size=10_000_000))  # within its own bound
    assert exc.value.field == "model_config"
    assert "between 100M and 100T parameters" in str(exc.value)
    with pytest.raises(FieldError, match="between 100M and 100T parameters"):
        parse_params("1e15")
    tiny = dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                intermediate_size=128, vocab_size=100)
    with pytest.raises(FieldError, match="between 100M and 100T"):
        load_model_config(_config(tmp_path, **tiny))


@pytest.mark.parametrize("value", ["abc", -4, 1.5, float("inf"), 1e30])
def test_a_non_number_shape_key_is_named(tmp_path, value):
    with pytest.raises(UserError, match=r"config\.json: hidden_size .*: must be a whole number "
                       r"from 1 to 10,000,000$"):
        load_model_config(_config(tmp_path, hidden_size=value))


def test_a_nan_max_position_is_named_by_its_config_key(tmp_path):
    with pytest.raises(UserError, match=r"config\.json: max_position_embeddings nan: must be a whole "
                       r"number from 1 to 1,000,000,000$"):
        load_model_config(_config(tmp_path, max_position_embeddings=float("nan")))


@pytest.mark.parametrize("argv, expect", [
    (["--model-config", "/dev/zero"], "/dev/zero: not a regular file"),
    (["--model-config", "BIN"], "BIN:1: not UTF-8 text"),
])
def test_cli_bad_config_files_exit_2_without_a_traceback(tmp_path, capsys, argv, expect):
    from fleet_tui.cli import main

    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(128, 256)))
    argv = [str(binary) if a == "BIN" else a for a in argv]
    assert main(["size", *argv]) == 2
    err = capsys.readouterr().err
    assert expect.replace("BIN", str(binary)) in err and "Traceback" not in err


def test_deepseek_v3_config_reads_as_latent_attention_with_dense_first_layers():
    """DeepSeek-V3's config.json (MLA, 3 dense layers, 256 routed + 1 shared expert) gives the
    paper's 671B total / 37B active and the catalog entry's shape."""
    from fleet_tui.core.catalog import load_catalog

    arch = load_model_config(CONFIGS / "deepseek-v3-excerpt.json")
    assert (arch.kv_lora_rank, arch.qk_rope_head_dim, arch.head_dim, arch.v_head_dim) == (512, 64, 192, 128)
    assert (arch.first_dense_layers, arch.shared_intermediate) == (3, 2048)
    assert 670e9 < arch.param_count() < 672e9
    assert 37e9 < arch.active_param_count() < 38e9
    assert arch.param_count() == load_catalog([]).model("deepseek-v3").param_count()


def test_latent_kv_cache_is_one_576_wide_latent_per_layer_on_every_rank():
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.footprint import kv_bytes_per_token
    from fleet_tui.core.workload import Workload

    arch = load_catalog([]).model("deepseek-r1")
    w = Workload(kind="inference", model=arch, precision="fp8", kv_cache_dtype="fp8", gpus=8, sharding="tensor")
    assert kv_bytes_per_token(arch, w, tp=1) == 61 * 576 == kv_bytes_per_token(arch, w, tp=8)


def test_hybrid_attention_counts_only_full_attention_layers(tmp_path):
    """Qwen3-Next-style configs: layer_types (or full_attention_interval) name the layers with a KV
    cache; the linear-attention ones keep a fixed state and add nothing per token."""
    from fleet_tui.core.footprint import kv_bytes_per_token
    from fleet_tui.core.workload import Workload

    kinds = ["linear_attention"] * 3 + ["full_attention"]
    hybrid = load_model_config(_config(tmp_path, layer_types=kinds * 8))
    assert hybrid.full_attention_layers == 8 and hybrid.kv_layers == 8
    dense = load_model_config(_config(tmp_path, layer_types=None))
    w = Workload(kind="inference", model=dense, kv_cache_dtype="bf16")
    assert kv_bytes_per_token(hybrid, w) * 4 == kv_bytes_per_token(dense, w)
    assert load_model_config(_config(tmp_path, full_attention_interval=4)).full_attention_layers == 8


def test_linear_attention_state_is_held_per_sequence_not_per_token(tmp_path):
    """A Gated DeltaNet layer keeps v_heads x k_dim x v_dim values (+ its conv window) per sequence:
    the memory of a batch grows by that once per sequence, whatever the context."""
    from fleet_tui.core.footprint import sequence_state_bytes
    from fleet_tui.core.workload import Workload

    kinds = ["linear_attention"] * 3 + ["full_attention"]
    arch = load_model_config(_config(tmp_path, layer_types=kinds * 8, linear_num_value_heads=32,
                                     linear_num_key_heads=16, linear_key_head_dim=128,
                                     linear_value_head_dim=128, linear_conv_kernel_dim=4))
    assert arch.linear_state_values == 32 * 128 * 128 + 4 * (2 * 16 * 128 + 32 * 128)
    w = Workload(kind="inference", model=arch, precision="bf16")
    assert sequence_state_bytes(arch, w) == 24 * arch.linear_state_values * 2
    assert sequence_state_bytes(arch, w, tp=2) == sequence_state_bytes(arch, w) / 2
