"""A config.json whose ``layer_types`` does not list one kind per layer cannot say which layers are
sliding: it is refused naming the key (transformers' own configs check the length), instead of
counting the sliding layers of a short list as if it covered the model."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.modelconfig import load_model_config

BASE = {"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
        "intermediate_size": 11008, "sliding_window": 4096}


def _write(tmp_path, **extra):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE | extra), encoding="utf-8")
    return path


def test_one_kind_per_layer_is_read(tmp_path):
    kinds = ["sliding_attention", "full_attention"] * 16
    arch = load_model_config(_write(tmp_path, layer_types=kinds))
    assert arch.layers == 32


def test_a_short_layer_types_list_is_refused_by_name(tmp_path):
    with pytest.raises(UserError, match=r"config\.json:\d+: layer_types lists 2 kind\(s\) but "
                       r"num_hidden_layers is 32"):
        load_model_config(_write(tmp_path, layer_types=["sliding_attention", "full_attention"]))
