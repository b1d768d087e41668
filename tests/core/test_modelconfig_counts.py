"""Expert counts in a config.json are numbers the sizing multiplies by: a word, a fraction or a huge
value is refused naming the key, and a dense model's 0 stays 0."""
from __future__ import annotations

import json

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.modelconfig import load_model_config
from tests.paths import FIXTURES

BASE = json.loads((FIXTURES / "configs" / "mistral-7b-v0.1.json").read_text())


def _write(tmp_path, **keys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**BASE, **keys}))
    return p


@pytest.mark.parametrize("key, value", [("num_local_experts", "x"), ("num_experts_per_tok", 2.5),
                                        ("n_shared_experts", 10**12), ("moe_intermediate_size", -1)])
def test_a_bad_expert_count_names_its_key(tmp_path, key, value):
    extra = {"num_local_experts": 8, "num_experts_per_tok": 2, key: value}
    with pytest.raises(UserError, match=rf"config\.json: {key} .*must be a whole number"):
        load_model_config(_write(tmp_path, **extra))


def test_a_dense_config_with_zero_experts_is_dense(tmp_path):
    arch = load_model_config(_write(tmp_path, num_local_experts=0, num_experts_per_tok=0))
    assert arch.experts == 0
    moe = load_model_config(_write(tmp_path, num_local_experts=8, num_experts_per_tok=2))
    assert moe.experts == 8 and moe.experts_per_token == 2
