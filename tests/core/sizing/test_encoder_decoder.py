"""Encoder-decoder (T5 family) models as a shape of their own: parameter counts against published
sizes, config.json reading, and the memory and speed of training and inference on them."""


import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.footprint import lora_params
from fleet_tui.core.modelconfig import load_model_config
from fleet_tui.core.modelspec import param_count, param_counts
from fleet_tui.core.workload import Workload
from tests.paths import REPO

ROOT = REPO
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


# --- memory ---------------------------------------------------------------------------------------

def _w(cat, mid="flan-t5-xl", **kw):
    return Workload(model=cat.model(mid), **kw)


def _peak(w) -> int:
    from fleet_tui.core.sizing import estimate_memory

    return estimate_memory(w).total_bytes


@pytest.mark.parametrize("kind", ["finetune", "lora"])
def test_training_memory_grows_with_the_source_and_with_the_target(cat, kind):
    base = dict(kind=kind, batch=8, grad_checkpointing=False)
    sources = [_peak(_w(cat, seq_len=s, target_len=64, **base)) for s in (128, 256, 512, 1024)]
    targets = [_peak(_w(cat, seq_len=256, target_len=t, **base)) for t in (16, 64, 256, 512)]
    assert sources == sorted(sources) and len(set(sources)) == 4
    assert targets == sorted(targets) and len(set(targets)) == 4


def test_generation_kv_cache_is_the_decoder_s_self_and_cross_attention(cat):
    from fleet_tui.core.sizing import estimate_memory

    arch = cat.model("flan-t5-xl")
    per_token = 2 * arch.decoder_layers * arch.kv_dim * 2  # K and V, every decoder layer, bf16
    # long generations peak at the end: the cross-attention K/V of the source + the self-attention
    # K/V of every generated token
    for prompt, gen in ((64, 2048), (128, 4096)):
        mem = estimate_memory(_w(cat, kind="inference", batch=4, prompt_len=prompt, gen_len=gen))
        assert mem.phase == "end of generation"
        assert mem.breakdown["kv_cache"] == pytest.approx(4 * (prompt + gen) * per_token, rel=1e-9)
    # long sources peak in the encoder pass, with the cross-attention K/V already cached
    mem = estimate_memory(_w(cat, kind="inference", batch=4, prompt_len=2048, gen_len=16))
    assert mem.phase == "prompt forward (prefill)"
    assert mem.breakdown["kv_cache"] == pytest.approx(4 * 2048 * per_token, rel=1e-9)


def test_lora_needs_less_than_full_fine_tuning_and_checkpointing_less_than_none(cat):
    shape = dict(batch=8, seq_len=512, target_len=128)
    full, lora = _peak(_w(cat, kind="finetune", **shape)), _peak(_w(cat, kind="lora", **shape))
    assert lora < full
    assert _peak(_w(cat, kind="finetune", grad_checkpointing=True, **shape)) < full
    assert _peak(_w(cat, kind="lora", offload=("optimizer", "params"), **shape)) < lora


def test_encoder_decoder_memory_states_its_lengths(cat):
    from fleet_tui.core.sizing import estimate_memory

    notes = " ".join(estimate_memory(_w(cat, kind="lora", seq_len=512)).assumptions)
    assert "encoder over 512 source tokens, decoder over 512 target tokens" in notes
    assert "no {target_len} given" in notes


# --- speed ----------------------------------------------------------------------------------------

def test_training_speed_counts_source_and_target_tokens_and_the_decoder_costs_more_per_token(cat):
    from fleet_tui.core.perf import estimate_throughput

    h100 = cat.accelerator("H100")
    # the same 544 tokens per sequence, split the other way round
    short_target = estimate_throughput(_w(cat, kind="finetune", batch=8, seq_len=512, target_len=32), h100)
    long_target = estimate_throughput(_w(cat, kind="finetune", batch=8, seq_len=32, target_len=512), h100)
    assert short_target.tokens_per_s > 0 and long_target.tokens_per_s > 0
    # a target token passes the decoder (self + cross attention + FFN) and the head: more FLOPs
    # than a source token, so a step with more target tokens takes longer
    assert long_target.step_s > short_target.step_s


def test_generation_has_prefill_and_decode_speeds(cat):
    from fleet_tui.core.perf import estimate_throughput

    t = estimate_throughput(_w(cat, kind="inference", engine="hf", batch=8, prompt_len=512, gen_len=128),
                            cat.accelerator("H100"))
    assert t.phase == "decode" and t.decode_tokens_per_s > 0 and t.prefill_tokens_per_s > t.decode_tokens_per_s


# --- front ends -----------------------------------------------------------------------------------

def _size(capsys, *argv):
    from fleet_tui.cli import main

    rc = main(["size", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_sizes_a_t5_model_with_source_and_target(capsys):
    import json

    rc, out, err = _size(capsys, "--model", "t0-3b", "--workload", "lora", "--seq-len", "64", "--target-len", "4",
                         "--batch", "8", "--gpu", "A100-80GB", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["workload"]["target_len"] == 4 and d["fits"] is True
    assert d["throughput"]["phase"] == "training" and d["throughput"]["tokens_per_s"] > 0
    rc, out, err = _size(capsys, "--model", "flan-t5-xl", "--prompt-len", "512", "--gen-len", "64", "--gpu", "H100")
    assert rc == 0, err
    assert "Flan-T5-XL (2.85B parameters): inference" in out and "engine: hf" in out


@pytest.mark.parametrize("argv, flag, says", [
    (("--model", "flan-t5-xl", "--engine", "vllm", "--prompt-len", "512", "--gen-len", "64"), "--engine",
     "does not serve encoder-decoder"),
    (("--model", "flan-t5-xl", "--workload", "lora", "--framework", "unsloth", "--seq-len", "512"), "--framework",
     "no encoder-decoder models"),
    (("--model", "llama-3.1-8b", "--seq-len", "512", "--target-len", "64"), "--target-len", "decoder-only"),
    (("--model", "flan-t5-xl", "--prompt-len", "512", "--gen-len", "64", "--target-len", "8"), "--target-len",
     "--gen-len"),
])
def test_cli_refuses_what_an_encoder_decoder_cannot_do_naming_the_flag(capsys, argv, flag, says):
    rc, out, err = _size(capsys, *argv)
    assert rc == 2 and flag in err and says in err


def test_core_refuses_target_len_for_a_decoder_only_model(cat):
    with pytest.raises(ValueError, match="target_len"):
        Workload(kind="lora", model=cat.model("llama-3.1-8b"), seq_len=512, target_len=64)
    with pytest.raises(FieldError, match="target_len"):
        from fleet_tui.core.workload import parse_workload
        parse_workload({"model": "llama-3.1-8b", "seq_len": 512, "target_len": 64}, cat)



def test_the_default_engine_follows_the_model_shape_in_the_api_and_the_parser_alike(cat):
    from fleet_tui.core.sizing import kv_capacity
    from fleet_tui.core.workload import parse_workload

    built = Workload(kind="inference", model=cat.model("flan-t5-xl"), prompt_len=512, gen_len=64)
    parsed = parse_workload({"model": "flan-t5-xl", "prompt_len": 512, "gen_len": 64}, cat)
    assert built.engine == parsed.engine == "hf"  # vLLM does not serve T5
    assert built.derive(batch=4).engine == "hf"
    assert Workload(kind="inference", model=cat.model("llama-3.1-8b"), prompt_len=512, gen_len=64).engine == "vllm"
    assert Workload(kind="inference", params=7_000_000_000, prompt_len=512, gen_len=64).engine == "vllm"
    with pytest.raises(ValueError, match="engine vllm does not serve encoder-decoder"):
        Workload(kind="inference", model=cat.model("flan-t5-xl"), engine="vllm", prompt_len=512, gen_len=64)
    # hf keeps no KV pool: the capacity shown is a serving engine's that runs T5 (not vLLM's)
    assert kv_capacity(built, cat.accelerator("A100-80GB")).tokens > 0

# --- the published measurements -------------------------------------------------------------------

def test_the_peft_t5_rows_are_expressed_and_the_full_fine_tune_oom_is_predicted(cat):
    from tests.bench.test_validation import vr

    rows = {r.id: r for r in vr.finetune_results() if r.id.startswith(("peft-readme-t0", "peft-readme-mt0"))}
    assert {"peft-readme-t0-3b-full", "peft-readme-t0-3b-lora", "peft-readme-t0-3b-lora-ds-offload",
            "peft-readme-mt0-xxl-lora", "peft-readme-mt0-xxl-lora-ds-offload"} <= set(rows)
    assert all(r.predicted is not None for r in rows.values() if r.id != "peft-readme-mt0-xxl-full-oom")
    bounds = {row["id"]: (est, bound) for row, est, bound in vr.finetune_bounds()}
    est, bound = bounds["peft-readme-mt0-xxl-full-oom"]
    assert est > bound  # 'OOM GPU' on an A100 80GB
