"""Encoder-decoder (T5 family) models as a shape of their own: parameter counts against published
sizes, config.json reading, and the memory and speed of training and inference on them."""

from pathlib import Path

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.footprint import lora_params
from fleet_tui.core.modelspec import load_model_config, param_count, param_counts
from fleet_tui.core.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests/fixtures/configs"


@pytest.fixture(scope="module")
def cat():
    return load_catalog([])


# Published sizes: t5-large 737,668,096 and T5 v1.1 XL (= flan-t5-xl, T0_3B) 2,849,757,184 as
# transformers counts them; mT5-XXL (mt0-xxl) "13B" (12.92B); and the PEFT README's quick tour on
# bigscience/mt0-large with LoRA r=8: "trainable params: 2359296 || all params: 1231940608".
@pytest.mark.parametrize("mid, published", [("t5-large", 737_668_096), ("flan-t5-xl", 2_849_757_184),
                                            ("t0-3b", 2_849_757_184), ("mt0-large", 1_231_940_608 - 2_359_296)])
def test_parameter_counts_equal_the_published_ones(cat, mid, published):
    assert param_count(cat.model(mid)) == published


def test_mt0_xxl_is_the_13b_mt5_xxl(cat):
    assert param_count(cat.model("mt0-xxl")) == pytest.approx(12.92e9, rel=0.002)


def test_peft_default_lora_on_q_and_v_of_every_attention_block_gives_peft_s_count(cat):
    # PEFT targets T5's q and v by default: encoder self-, decoder self- and cross-attention
    w = Workload(kind="lora", model=cat.model("mt0-large"), lora_rank=8, lora_targets=("q_proj", "v_proj"))
    assert lora_params(w.arch, w) == 2_359_296


def test_untied_head_and_gated_ffn_are_what_makes_v1_1_bigger(cat):
    pc = param_counts(cat.model("flan-t5-xl"))
    assert pc.lm_head == pc.embedding == 32128 * 2048
    assert param_counts(cat.model("t5-large")).lm_head == 0
    # the encoder's matmuls are those a source token passes; a target token passes the rest
    assert 0 < pc.encoder_matmul < pc.matmul_per_target_token < pc.matmul_active


@pytest.mark.parametrize("file, mid", [("t0-3b.json", "t0-3b"), ("t5-large.json", "t5-large"),
                                       ("mt0-xxl-excerpt.json", "mt0-xxl")])
def test_a_t5_config_json_reads_as_the_catalog_shape(cat, file, mid):
    arch = load_model_config(CONFIGS / file)
    assert arch.is_encoder_decoder and arch.eager_attention
    assert param_count(arch) == param_count(cat.model(mid))


def test_other_encoder_decoder_configs_are_refused_by_name(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "bart", "is_encoder_decoder": true, "d_model": 1024, "encoder_layers": 12,'
                   ' "decoder_layers": 12, "encoder_attention_heads": 16, "vocab_size": 50265}')
    with pytest.raises(UserError, match="bart.*only the T5 family"):
        load_model_config(cfg)
