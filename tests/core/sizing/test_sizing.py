"""Sizing components checked against their physics, fit/suggestions, KV capacity and properties."""

from __future__ import annotations

import sys

from tests.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_tui.core import calibration as cal
from fleet_tui.core.modelspec import ModelArch, param_count
from fleet_tui.core.sizing import (
    capacity_bytes,
    check_fit,
    estimate_memory,
    kv_bytes_per_token,
    kv_capacity,
    precision_support,
)
from fleet_tui.core.sizing.overview import size_workload
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

ROOT = REPO
with open(ROOT / "catalogs/models.toml", "rb") as _fh:
    MODELS = {m["id"]: ModelArch(**m) for m in tomllib.load(_fh)["model"]}
L8 = MODELS["llama-3.1-8b"]
L70 = MODELS["llama-3.1-70b"]

H100 = Accelerator(id="H100", vendor="NVIDIA", software_stack="CUDA", memory_gib=80,
                   memory_bandwidth_gbs=3350, architecture="Hopper",
                   peak_tflops={"fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9})
T4 = Accelerator(id="T4", vendor="NVIDIA", software_stack="CUDA", memory_gib=16, memory_bandwidth_gbs=300,
                 architecture="Turing", peak_tflops={"fp32": 8.1, "fp16": 65, "int8": 130, "int4": 260})
L4 = Accelerator(id="L4", vendor="NVIDIA", software_stack="CUDA", memory_gib=24, memory_bandwidth_gbs=300,
                 architecture="Ada Lovelace", peak_tflops={"fp32": 30.3, "bf16": 121, "fp16": 121, "fp8": 242.5})


def mem(w: Workload, gpus: int | None = None):
    return estimate_memory(w, gpus)


def kv_per_token(arch: ModelArch, precision: str = "bf16", tp: int = 1, context: int = 0) -> float:
    """The production formula (the one memory, KV capacity and decode speed call)."""
    return kv_bytes_per_token(arch, Workload(kind="inference", model=arch, precision=precision), tp, context)


def test_kv_bytes_formula():
    # 2 (K,V) × layers × kv_heads × head_dim × bytes: Llama-3.1-8B = 131,072 B/token in bf16
    assert kv_per_token(L8) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_per_token(L8, "fp32") == 2 * 131_072
    assert kv_per_token(L8, "int4") == 131_072  # weight-only quantization: the cache stays 16-bit
    assert kv_per_token(L8, tp=16) == 131_072 // 8  # at least one KV head per rank
    assert kv_per_token(MODELS["llama-2-13b"]) == 819_200  # MHA
    assert kv_per_token(MODELS["qwen2.5-7b"]) == 57_344
    # MoE experts do not add KV: Mixtral-8x7B has Mistral-7B's attention
    assert kv_per_token(MODELS["mixtral-8x7b"]) == kv_per_token(MODELS["mistral-7b"])


def test_kv_bytes_sliding_window_layers_hold_only_their_window():
    arch = L8.model_copy(update={"sliding_window": 1024, "sliding_window_layers": 16})
    per_layer = 2 * 8 * 128 * 2
    assert kv_per_token(arch, context=1024) == 32 * per_layer  # within the window: every layer
    assert kv_per_token(arch, context=4096) == 16 * per_layer + 16 * per_layer * 1024 / 4096
    assert kv_per_token(arch) == 16 * per_layer  # no context given: full-attention layers only


def test_kv_component_scales_with_tokens():
    a = mem(Workload(kind="inference", model=L8, batch=4, prompt_len=1000, gen_len=1000, engine="hf"))
    assert a.breakdown["kv_cache"] == pytest.approx(4 * 2000 * 131_072, rel=1e-6)


def test_sliding_window_caps_local_layers_kv():
    g = MODELS["gemma-2-9b"]
    short = mem(Workload(kind="inference", model=g, seq_len=4096)).breakdown["kv_cache"]
    long = mem(Workload(kind="inference", model=g, seq_len=8192)).breakdown["kv_cache"]
    per_tok_full = 2 * 8 * 256 * 2
    # 4096 tokens: all 42 layers full; 8192: 21 global layers hold 8192, 21 local layers hold 4096
    assert short == pytest.approx(4096 * 42 * per_tok_full)
    assert long == pytest.approx((8192 * 21 + 4096 * 21) * per_tok_full)


def test_eager_attention_models_store_the_score_matrix():
    """With attention = "eager" (often chosen for Gemma-2 training) memory grows with seq²."""
    g = MODELS["gemma-2-9b"].model_copy(update={"attention": "eager"})
    assert g.eager_attention and not MODELS["gemma-2-9b"].eager_attention
    a = mem(Workload(kind="finetune", model=g, seq_len=1024, master_weights="none")).breakdown["activations"]
    b = mem(Workload(kind="finetune", model=g, seq_len=2048, master_weights="none")).breakdown["activations"]
    assert b > 2.5 * a  # linear in tokens plus the quadratic score term
    flash = g.model_copy(update={"attention": "sdpa"})
    c = mem(Workload(kind="finetune", model=flash, seq_len=2048, master_weights="none")).breakdown["activations"]
    assert b - c >= g.layers * 8 * g.heads * 2048 * 2048  # 8 B per score per layer kept for backward


def test_weights_by_precision():
    p = param_count(L8)
    bd = {prec: mem(Workload(kind="inference", model=L8, precision=prec)).breakdown["weights"]
          for prec in ("fp32", "bf16", "fp8", "int8", "int4")}
    assert bd["fp32"] == 4 * p and bd["bf16"] == 2 * p
    assert bd["bf16"] > bd["int8"] > bd["fp8"] * 0.99 and bd["fp8"] > bd["int4"]
    # int4 includes group-128 scales and keeps embeddings/head in 16-bit: above 0.5 B/param
    assert 0.5 * p < bd["int4"] < 0.75 * p  # real 8B AWQ checkpoints are ~5.7 GB


def test_fixed_overheads_are_the_measured_constants():
    bd = mem(Workload(kind="inference", model=L8)).breakdown
    assert bd["driver_reserve"] == cal.DRIVER_RESERVE_BYTES
    assert bd["cuda_context"] == cal.CUDA_CONTEXT_BYTES
    assert sum(bd.values()) == mem(Workload(kind="inference", model=L8)).total_bytes


def test_training_states_per_optimizer():
    base = dict(kind="finetune", model=L8, seq_len=512, master_weights="fp32")
    p = param_count(L8)
    adam = mem(Workload(**base)).breakdown["optimizer_states"]
    assert adam == pytest.approx(8 * p)
    assert mem(Workload(**base, optimizer="adamw8bit")).breakdown["optimizer_states"] == pytest.approx(2 * p)
    assert mem(Workload(**base, optimizer="sgd")).breakdown["optimizer_states"] == pytest.approx(4 * p)
    ada = mem(Workload(**base, optimizer="adafactor")).breakdown["optimizer_states"]
    assert 0 < ada < 0.01 * p * 4  # factored: rows + columns, not a full moment
    pure = mem(Workload(kind="finetune", model=L8, seq_len=512, master_weights="none"))
    assert pure.breakdown["optimizer_states"] == pytest.approx(4 * p)  # bf16 m and v
    assert pure.breakdown["weights"] == pytest.approx(2 * p)


def test_checkpointing_reduces_activations():
    w = Workload(kind="finetune", model=L8, batch=4, seq_len=2048)
    assert mem(w.with_(grad_checkpointing=True)).total_bytes < mem(w).total_bytes


def test_lora_and_qlora_are_smaller_than_full_finetune():
    full = mem(Workload(kind="finetune", model=L70, seq_len=1024)).total_bytes
    lora = mem(Workload(kind="lora", model=L70, seq_len=1024, master_weights="none")).total_bytes
    qlora = mem(Workload(kind="qlora", model=L70, seq_len=1024, master_weights="none")).total_bytes
    assert full > lora > qlora
    # QLoRA: the 70B base takes ~0.52 B/param, the famous "65B on one 48 GB GPU" class
    assert mem(Workload(kind="qlora", model=L70, seq_len=512, grad_checkpointing=True)).total_bytes < 48 * cal.GiB


def test_sharding_divides_what_it_should():
    w = Workload(kind="finetune", model=L70, batch=8, seq_len=2048, grad_checkpointing=True)
    one = mem(w.with_(sharding="fsdp"), 1).breakdown
    eight = mem(w.with_(sharding="fsdp", gpus=8), 8).breakdown
    assert eight["weights"] == pytest.approx(one["weights"] / 8)
    assert eight["optimizer_states"] == pytest.approx(one["optimizer_states"] / 8)
    data = mem(w.with_(sharding="data", gpus=8), 8).breakdown
    assert data["weights"] == pytest.approx(one["weights"])  # replicated
    inf = Workload(kind="inference", model=L70, batch=8, seq_len=2048)
    tp = mem(inf.with_(sharding="tensor", gpus=8), 8).breakdown
    assert tp["weights"] == pytest.approx(mem(inf).breakdown["weights"] / 8)
    assert tp["kv_cache"] == pytest.approx(mem(inf).breakdown["kv_cache"] / 8)  # 8 KV heads, 1 per GPU
    assert tp["comm_buffers"] > 0


def test_fit_and_verified_suggestions():
    w = Workload(kind="inference", model=L70, batch=1, prompt_len=1024, gen_len=256)
    res = check_fit(w, H100)
    assert not res.fits and res.capacity_bytes == capacity_bytes(H100)
    assert res.headroom_bytes < 0
    assert res.suggestions
    changes = {s.change for s in res.suggestions}
    assert "precision" in changes and "gpus" in changes
    for s in res.suggestions:  # each suggestion is verified by re-running the model
        assert s.total_bytes == estimate_memory(s.workload, s.gpus).total_bytes <= res.capacity_bytes
    ok = check_fit(Workload(kind="inference", model=L8, seq_len=2048), H100)
    assert ok.fits and ok.suggestions == [] and ok.headroom_bytes > 0


def test_training_suggestions_include_memory_savers():
    w = Workload(kind="finetune", model=L8, batch=8, seq_len=4096)
    res = check_fit(w, H100)
    assert not res.fits
    assert {s.change.split("+")[-1] for s in res.suggestions} & {"checkpointing", "lora", "qlora", "gpus", "batch"}
    for s in res.suggestions:
        assert s.total_bytes <= res.capacity_bytes


def test_when_only_more_gpus_fit_checkpointing_pairs_are_offered_on_the_gpus_at_hand():
    # LoRA on one L4 at batch 8 x 2048: no single change but buying GPUs fits; checkpointing with a
    # smaller batch does, on the one GPU the user has
    w = Workload(kind="lora", model=L8, batch=8, seq_len=2048)
    res = check_fit(w, L4)
    assert not res.fits
    changes = {s.change for s in res.suggestions}
    assert "gpus" in changes
    on_one = [s for s in res.suggestions if s.gpus == 1]
    assert any(s.change == "checkpointing+batch" for s in on_one)
    for s in res.suggestions:
        assert s.total_bytes <= res.capacity_bytes
        assert check_fit(s.workload, L4, s.gpus).fits

# Ampere GA102 with no published peak (NVIDIA has no A10G datasheet): memory and bandwidth only
A10G = Accelerator(id="A10G", vendor="NVIDIA (AWS-specific SKU)", software_stack="CUDA", memory_gib=24,
                   memory_bandwidth_gbs=600, architecture="Ampere")
# a device nothing is known about but its memory
MYSTERY = Accelerator(id="X1", vendor="Acme", software_stack="other", memory_gib=64)


def test_precision_support_messages():
    ok, msg = precision_support("fp8", T4)
    assert not ok and msg == "T4 (Turing) has no fp8 support; use fp16 or int8"
    ok, msg = precision_support("bf16", T4)
    assert not ok and msg == "T4 (Turing) has no bf16 support; use fp16"
    assert precision_support("int4", T4)[0]  # weight-only kernels
    assert precision_support("fp8", L4)[0]
    res = check_fit(Workload(kind="inference", model=MODELS["llama-3.2-1b"], precision="fp8", engine="hf"), T4)
    assert res.precision_supported is False and "fp8" in res.message
    # vLLM serves fp8 weights on Turing weight-only (FP8 Marlin): allowed, and the fit says so
    res = check_fit(Workload(kind="inference", model=MODELS["llama-3.2-1b"], precision="fp8", engine="vllm"), T4)
    assert res.precision_supported and "weight-only" in res.precision_note and "fp16" in res.precision_note


def test_support_comes_from_the_architecture_not_from_published_peaks():
    assert A10G.peak_tflops == {}
    for p in ("bf16", "fp16", "tf32", "int8"):
        assert A10G.supports(p) is True and precision_support(p, A10G) == (True, "")
    assert A10G.supports("fp8") is False  # Ampere has no fp8 tensor cores
    assert not precision_support("fp8", A10G)[0]
    assert A10G.peak("bf16") is None
    # unknown architecture: allowed, with a note saying support is not documented
    assert MYSTERY.supports("bf16") is None
    ok, note = precision_support("bf16", MYSTERY)
    assert ok and "not documented" in note
    res = check_fit(Workload(kind="inference", model=MODELS["llama-3.2-1b"]), MYSTERY)
    assert res.fits and res.precision_supported and "not documented" in res.precision_note
    # an explicit list in the entry is authoritative
    own = MYSTERY.model_copy(update={"precisions": ("bf16", "int8")})
    assert own.supports("bf16") is True and own.supports("fp8") is False


def test_a10g_bf16_fits_with_a_decode_estimate_and_no_invented_prefill():
    from fleet_tui.core.perf import estimate_throughput, training_run

    w = Workload(kind="inference", model=L8, batch=8, prompt_len=512, gen_len=256)
    res = size_workload(w, A10G)
    assert res.fit.fits and res.fit.precision_supported
    thr = res.throughput
    assert thr.phase == "decode" and thr.tokens_per_s and thr.tokens_per_s > 10
    # memory-bound: 8 sequences per step of ~16 GB of weights at 600 GB/s × efficiency
    step_floor = 16e9 / 600e9
    assert thr.time_per_output_token_s > step_floor
    assert thr.prefill_tokens_per_s is None and thr.time_to_first_token_s is None
    assert any("no published bf16 peak for A10G" in a for a in thr.assumptions)
    fwd = estimate_throughput(Workload(kind="inference", model=L8, batch=1, seq_len=1024), A10G)
    assert fwd.phase == "prefill" and fwd.tokens_per_s is None and "no published bf16 peak" in fwd.unknown
    lora = Workload(kind="lora", model=L8, batch=1, seq_len=1024, grad_checkpointing=True)
    t = estimate_throughput(lora, A10G)
    assert t.tokens_per_s is None and t.mfu is None and t.unknown
    run = training_run(lora, A10G, 1, 10**8)
    assert run.seconds is None and run.gpu_hours is None and run.unknown
    # nothing known at all: no speed anywhere, never 0 tokens/s
    thr = estimate_throughput(w, MYSTERY)
    assert thr.tokens_per_s is None and thr.decode_tokens_per_s is None
    assert "no published memory bandwidth for X1" in thr.unknown


def test_kv_capacity_uses_free_memory():
    w = Workload(kind="inference", model=L8, prompt_len=1024, gen_len=1024)
    kv = kv_capacity(w, H100, 1)
    assert kv.bytes_per_token == 131_072
    free = kv.tokens * kv.bytes_per_token
    assert 40 * cal.GiB < free < 60 * cal.GiB  # 0.9 × 79 GiB − 15 GiB weights − overheads
    assert kv.concurrent_sequences == kv.tokens // 2048
    assert kv_capacity(w.with_(gpus=2, sharding="data"), H100, 2).tokens == 2 * kv.tokens
    assert kv_capacity(Workload(kind="inference", model=L70), L4, 1).tokens == 0  # weights do not fit


def test_size_workload_is_cached_and_complete():
    w = Workload(kind="inference", model=L8, batch=8, prompt_len=512, gen_len=128)
    a = size_workload(w, H100)
    assert size_workload(w, H100) is a
    assert a.fit is not None and a.kv_capacity is not None and a.throughput is not None
    assert a.memory.total_bytes == estimate_memory(w).total_bytes
    bare = size_workload(w)
    assert bare.fit is None and bare.throughput is None


def test_params_only_workload_sizes():
    w = Workload(kind="inference", params=7_000_000_000, precision="bf16")
    assert mem(w).breakdown["weights"] == pytest.approx(14e9, rel=0.01)


# --- properties ------------------------------------------------------------------------------------

KINDS = st.sampled_from(["inference", "finetune", "lora", "qlora"])
MODEL_IDS = st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "qwen2.5-7b"])


def _w(kind, mid, batch, seq, ckpt=False):
    extra = {"master_weights": "none"} if kind in ("lora", "qlora") else {}
    return Workload(kind=kind, model=MODELS[mid], batch=batch, seq_len=seq,
                    grad_checkpointing=ckpt and kind != "inference", **extra)


@settings(max_examples=60, deadline=None)
@given(KINDS, MODEL_IDS, st.integers(1, 64), st.integers(1, 16384), st.booleans())
def test_memory_grows_with_batch_and_sequence(kind, mid, batch, seq, ckpt):
    w = _w(kind, mid, batch, seq, ckpt)
    m = estimate_memory(w).total_bytes
    assert m > 0 and all(v >= 0 for v in estimate_memory(w).breakdown.values())
    assert estimate_memory(w.with_(batch=batch + 1)).total_bytes >= m
    assert estimate_memory(w.with_(seq_len=seq + 1)).total_bytes >= m


@settings(max_examples=40, deadline=None)
@given(KINDS, st.integers(100, 5000), st.integers(1, 8), st.integers(16, 4096))
def test_memory_grows_with_parameters(kind, params_m, batch, seq):
    extra = {"master_weights": "none"} if kind in ("lora", "qlora") else {}
    small = Workload(kind=kind, params=params_m * 10**7, batch=batch, seq_len=seq, **extra)
    big = small.with_(params=int(params_m * 10**7 * 1.5))
    assert estimate_memory(big).total_bytes >= estimate_memory(small).total_bytes > 0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(1, 4096), st.integers(1, 4096))
def test_generation_memory_grows_with_prompt_and_output(batch, prompt, gen):
    w = Workload(kind="inference", model=L8, batch=batch, prompt_len=prompt, gen_len=gen)
    m = estimate_memory(w).total_bytes
    assert estimate_memory(w.with_(gen_len=gen + 64)).total_bytes >= m
    assert estimate_memory(w.with_(prompt_len=prompt + 64)).total_bytes >= m


def test_kv_capacity_matches_published_vllm_pools():
    """vLLM on an H100 logged a 58.11 GiB KV pool for Llama-3.1-8B at utilization 0.95 (54.15 GiB at
    our 0.9), and a 70B fp8 model on one 80 GB GPU serves "up to 4k context"."""
    w = Workload(kind="inference", model=L8, prompt_len=1024, gen_len=1024)
    pool_gib = kv_capacity(w, H100, 1).tokens * 131_072 / cal.GiB
    assert pool_gib == pytest.approx(58.11 - 0.05 * 79.32, rel=0.03)
    w70 = Workload(kind="inference", model=L70, precision="fp8", prompt_len=1024, gen_len=1024)
    assert 500 < kv_capacity(w70, H100, 1).tokens < 8192


@pytest.fixture
def empty_caches():
    """Tests that assert a cache hit start from empty caches: an entry another test left under the
    same device id with another spec (the catalog's H100 vs this file's) is, by design, not reused."""
    from fleet_tui.core import caches

    caches.clear()


def test_suggestions_pair_quantization_with_gpus_and_serialize(empty_caches):
    import dataclasses
    import pickle

    res = check_fit(Workload(kind="inference", model=L70), L4)
    assert not res.fits
    combos = [s for s in res.suggestions if s.change.startswith("gpus+")]
    assert combos and all(s.gpus > 1 and s.workload.sharding == "tensor" for s in combos)
    assert min(s.gpus for s in res.suggestions) < 8  # int4 halves the GPUs plain bf16 needs
    assert type(res.suggestions) is list  # a plain list, searched once on first read
    assert [dataclasses.asdict(s)["change"] for s in res.suggestions] == [s.change for s in res.suggestions]
    assert pickle.loads(pickle.dumps(res)).suggestions == res.suggestions
    assert check_fit(Workload(kind="inference", model=L70), L4) is res  # cached by value


def test_caches_key_devices_by_value_not_by_object(empty_caches):
    small = H100.model_copy(update={"memory_gib": 16})  # the same id, another spec
    w = Workload(kind="inference", model=L8, seq_len=2048)
    assert size_workload(w, H100, 1).fit.fits and not size_workload(w, small, 1).fit.fits
    assert check_fit(w, H100).fits and not check_fit(w, small).fits
    same = H100.model_copy()  # an equal device built again is a cache hit
    assert size_workload(w, same, 1) is size_workload(w, H100, 1)
    assert check_fit(w, same) is check_fit(w, H100)
