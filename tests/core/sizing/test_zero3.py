"""DeepSpeed ZeRO-3 memory (``--framework deepspeed``): DeepSpeed's live-parameter budget, whole-module
gathering, persistent small parameters and the gradient reduce bucket, for every model shape."""

from __future__ import annotations

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.sizing import estimate_memory
from fleet_tui.core.sizing.zero3 import MAX_LIVE_PARAMETERS, REDUCE_BUCKET_SIZE, largest_module_params
from fleet_tui.core.workload import Workload, parse_workload


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _lora(cat, mid, **kw):
    base = dict(kind="lora", model=cat.model(mid), batch=8, seq_len=64, precision="fp32", master_weights="none",
                lora_rank=8, offload=("optimizer", "params"))
    if cat.model(mid).is_encoder_decoder:
        base.update(target_len=4, lora_targets=("q_proj", "v_proj"))
    return Workload(**{**base, **kw})


@pytest.mark.parametrize("mid", ["llama-3.1-8b", "t0-3b", "mt0-xxl"])
def test_deepspeed_keeps_its_live_budget_gathered_where_fsdp_keeps_two_layers(cat, mid):
    ds = estimate_memory(_lora(cat, mid, framework="deepspeed")).breakdown
    fsdp = estimate_memory(_lora(cat, mid)).breakdown
    pc = param_counts(cat.model(mid))
    live = min(pc.total - pc.norms, MAX_LIVE_PARAMETERS + largest_module_params(cat.model(mid), pc))
    assert ds["weight_copies"] == pytest.approx(live * 4, rel=1e-6)  # fp32 parameters
    assert ds["weight_copies"] > fsdp.get("weights", 0) + fsdp.get("weight_copies", 0)
    # only the persistent small parameters (norms, LoRA adapters) stay resident
    assert ds["weights"] < 0.01 * pc.total * 4


def test_a_huge_untied_head_is_gathered_whole(cat):
    # mT0-XXL and Flan-T5-XXL have the same blocks; mT0's 250k-vocabulary head (1.0B parameters) is
    # one module, fetched in one piece on top of the live budget
    mt0 = estimate_memory(_lora(cat, "mt0-xxl", framework="deepspeed")).breakdown["weight_copies"]
    flan = estimate_memory(_lora(cat, "flan-t5-xxl", framework="deepspeed")).breakdown["weight_copies"]
    head = param_counts(cat.model("mt0-xxl")).lm_head
    assert head > 1e9 and mt0 - flan == pytest.approx(4 * (head - param_counts(cat.model("flan-t5-xxl")).lm_head),
                                                       rel=1e-6)


def test_a_model_below_the_live_budget_is_gathered_entirely(cat):
    pc = param_counts(cat.model("t5-large"))
    assert pc.total < MAX_LIVE_PARAMETERS
    got = estimate_memory(_lora(cat, "t5-large", framework="deepspeed")).breakdown["weight_copies"]
    assert got == pytest.approx((pc.total - pc.norms) * 4, rel=1e-6)


def test_the_gradient_bucket_is_in_the_trainable_dtype_and_only_under_deepspeed(cat):
    lora = estimate_memory(_lora(cat, "llama-3.1-8b", framework="deepspeed")).breakdown
    assert lora["comm_buffers"] == REDUCE_BUCKET_SIZE * 4  # PEFT keeps adapters in fp32; one GPU: no NCCL
    full = estimate_memory(Workload(kind="finetune", model=cat.model("llama-3.1-8b"), batch=1, seq_len=512,
                                    framework="deepspeed", offload=("optimizer", "params"))).breakdown
    assert full["comm_buffers"] == REDUCE_BUCKET_SIZE * 2  # bf16 parameters and gradients
    assert "comm_buffers" not in estimate_memory(_lora(cat, "llama-3.1-8b")).breakdown


def test_zero3_without_offload_on_several_gpus_uses_the_same_budget(cat):
    w = Workload(kind="finetune", model=cat.model("llama-3.1-8b"), batch=8, seq_len=1024, gpus=8, sharding="fsdp",
                 framework="deepspeed")
    ds = estimate_memory(w)
    fsdp = estimate_memory(w.derive(framework="hf"))
    pc = param_counts(cat.model("llama-3.1-8b"))
    assert ds.breakdown["weight_copies"] == pytest.approx((MAX_LIVE_PARAMETERS + pc.lm_head) * 2, rel=1e-6)
    assert ds.breakdown["weights"] == fsdp.breakdown["weights"]  # the partition itself is the same
    assert ds.breakdown["weight_copies"] > fsdp.breakdown["weight_copies"]
    assert any("stage3_max_live_parameters" in a for a in ds.assumptions)


def test_the_parser_accepts_deepspeed_for_decoder_only_and_t5_models(cat):
    t5 = parse_workload({"workload": "lora", "model": "t0-3b", "seq_len": 64, "target_len": 4, "framework": "deepspeed",
                         "offload": "optimizer,params"}, cat)
    assert t5.framework == "deepspeed" and t5.offload == ("optimizer", "params")
    assert parse_workload({"workload": "lora", "model": "llama-3.1-8b", "seq_len": 512,
                           "framework": "deepspeed"}, cat).framework == "deepspeed"
