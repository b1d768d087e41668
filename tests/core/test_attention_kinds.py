"""Attention as the config says: each layer's kind (full, sliding window, linear/hybrid, latent)
sets the KV bytes per token."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.footprint import kv_bytes_per_token
from fleet_tui.core.modelconfig import load_model_config
from fleet_tui.core.workload import Workload

GPT_OSS_120B = {  # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json (shape keys)
    "model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880, "intermediate_size": 2880,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
    "num_local_experts": 128, "num_experts_per_tok": 4, "sliding_window": 128, "tie_word_embeddings": False,
    "max_position_embeddings": 131072, "attention_bias": True,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _config(tmp_path, cfg: dict):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return load_model_config(p)


def test_layer_types_mark_only_the_sliding_layers_as_local(tmp_path, cat):
    arch = _config(tmp_path, GPT_OSS_120B)
    assert arch.sliding_window == 128 and arch.sliding_window_layers == 18
    assert arch.sliding_window_layers == cat.models["gpt-oss-120b"].sliding_window_layers
    # at 32k tokens: 18 full layers hold every token, 18 local ones 128 of them
    w = Workload(kind="inference", model=arch, prompt_len=32000, gen_len=768)
    per_layer = 2 * 8 * 64 * 2
    assert kv_bytes_per_token(arch, w, 1, 32768) == pytest.approx(per_layer * (18 + 18 * 128 / 32768))


def test_all_sliding_layer_types_are_all_local(tmp_path):
    cfg = dict(GPT_OSS_120B, layer_types=["sliding_attention"] * 36)
    assert _config(tmp_path, cfg).sliding_window_layers == 36


def test_gemma3_pattern_makes_every_sixth_layer_global(tmp_path, cat):
    cfg = {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376, "intermediate_size": 21504,
           "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "vocab_size": 262208,
           "sliding_window": 1024, "sliding_window_pattern": 6}
    arch = _config(tmp_path, cfg)
    assert arch.sliding_window_layers == 52 == cat.models["gemma-3-27b"].sliding_window_layers


def test_hybrid_linear_layers_keep_a_state_not_kv(cat):
    arch = cat.models["qwen3-next-80b-a3b"]
    w = Workload(kind="inference", model=arch, prompt_len=4000, gen_len=96)
    # only the 12 full-attention layers (full_attention_interval 4) keep KV per token
    assert kv_bytes_per_token(arch, w, 1, 4096) == 12 * 2 * 2 * 256 * 2


def test_latent_attention_caches_the_latent(cat):
    arch = cat.models["deepseek-v3"]
    w = Workload(kind="inference", model=arch, prompt_len=1000, gen_len=24)
    # MLA: kv_lora_rank + qk_rope_head_dim values per layer, whole on every rank
    assert kv_bytes_per_token(arch, w, 8, 1024) == 61 * (512 + 64) * 2
