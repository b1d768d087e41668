"""Shared footprint formulas: bytes and parameter counts that both memory and speed are built on.

Each formula exists once here; :mod:`fleet_tui.core.sizing` (memory, fit, KV capacity) and
:mod:`fleet_tui.core.perf` (weight streaming, KV reads, LoRA FLOPs) call the same functions. The
module sits below both packages, so neither imports the other to reach a formula.

Sources: LoRA adapter size r·(d_in + d_out) per adapted matrix (Hu et al., arXiv:2106.09685); KV
cache 2 (K and V) × layers × kv_heads × head_dim × bytes per token, sliding-window layers capped at
their window; bytes per stored value in :mod:`fleet_tui.core.calibration`.
"""

from __future__ import annotations

import math

from fleet_tui.core import calibration as cal
from fleet_tui.core.modelspec import ModelArch, ParamCounts
from fleet_tui.core.workload import Workload


def activation_bytes(w: Workload) -> int:
    """Bytes of one activation value: 4 in fp32, else 2 (bf16/fp16 compute, also for quantized weights)."""
    return 4 if w.precision == "fp32" else 2


def parallel_split(w: Workload, gpus: int) -> tuple[int, int, int]:
    """(data-parallel replicas, tensor-parallel size, fsdp shard count) for ``gpus``."""
    if gpus <= 1:
        return 1, 1, 1
    if w.sharding == "tensor":
        return 1, gpus, 1
    if w.sharding == "fsdp":
        return gpus, 1, gpus
    return gpus, 1, 1


def lora_params(arch: ModelArch, w: Workload) -> int:
    """LoRA adapter parameters: r·(d_in + d_out) per adapted matrix (Hu et al. arXiv:2106.09685)."""
    h, r = arch.hidden, w.lora_rank
    f = arch.expert_intermediate if arch.is_moe else arch.intermediate
    n_ffn = arch.experts if arch.is_moe else 1  # every expert gets its own adapter
    dims = {
        "q_proj": (h, arch.q_dim, 1), "k_proj": (h, arch.kv_dim, 1), "v_proj": (h, arch.kv_dim, 1),
        "o_proj": (arch.q_dim, h, 1), "gate_proj": (h, f, n_ffn), "up_proj": (h, f, n_ffn),
        "down_proj": (f, h, n_ffn),
    }
    total = 0
    for t in w.lora_targets:
        d_in, d_out, n = dims[t]
        if t == "gate_proj" and not arch.gated_mlp:
            continue
        total += n * r * (d_in + d_out)
    return total * arch.layers


def weight_bytes(w: Workload, pc: ParamCounts) -> float:
    """Bytes of the model's stored weights (whole model, before sharding)."""
    if w.kind == "qlora":
        return pc.decoder * cal.WEIGHT_BYTES["nf4"] + (pc.total - pc.decoder) * 2
    if w.kind in ("training", "finetune"):
        per = 4.0 if (w.master_weights == "fp32" or w.precision == "fp32") else cal.WEIGHT_BYTES[w.precision]
        return pc.total * per
    if w.precision in ("fp32", "bf16", "fp16"):
        return pc.total * cal.WEIGHT_BYTES[w.precision]
    # quantized: decoder linears quantized, embeddings/head/norms stay 16-bit
    return pc.decoder * cal.WEIGHT_BYTES[w.precision] + (pc.total - pc.decoder) * 2


def kv_value_bytes(w: Workload) -> float:
    """Bytes of one cached key/value element: the compute dtype unless ``kv_cache_dtype`` says
    otherwise (fp8/int8 caches store one byte, their per-tensor scales are negligible)."""
    if w.kv_cache_dtype == "auto":
        return activation_bytes(w)
    return cal.KV_CACHE_BYTES[w.kv_cache_dtype]


def kv_bytes_per_token(arch: ModelArch, w: Workload, tp: int = 1, context: int = 0) -> float:
    """KV-cache bytes per token of one sequence at ``context`` tokens, per tensor-parallel rank.

    2 (K and V) × kv_heads (at least one per rank) × head_dim × activation bytes per layer; a
    sliding-window layer holds at most ``sliding_window`` tokens, so at a longer ``context`` its
    share per token shrinks (``context`` 0: full-attention layers only).
    """
    kv_heads = math.ceil(arch.kv_heads / tp)
    per_layer = 2 * kv_heads * arch.dim_per_head * kv_value_bytes(w)
    full_layers = arch.layers - arch.sliding_window_layers
    total = full_layers * per_layer
    if arch.sliding_window_layers and context > 0:
        frac = min(1.0, arch.sliding_window / context)
        total += arch.sliding_window_layers * per_layer * frac
    return total


def forward_transient(arch: ModelArch, tokens: int, act: int, tp: int, seq: int = 0) -> float:
    """Widest live set inside one decoder layer during an inference forward (bytes).

    ``seq`` (tokens per sequence) matters only for eager attention, which materializes the
    score matrix: its 16-bit scores and the fp32 softmax output live together (6 B per score).
    """
    h = arch.hidden
    if arch.is_moe:
        # HF MoE blocks loop over experts: one expert's share of tokens at a time, plus the
        # router logits (fp32) and the fp32 accumulator of the weighted expert outputs.
        tok_e = tokens * arch.experts_per_token / arch.experts
        mlp = tok_e * 3 * arch.expert_intermediate * act + tokens * (2 * h * act + arch.experts * 4 + h * 4)
    else:
        mlp = tokens * (3 * arch.intermediate * act / tp + 2 * h * act)
    attn = tokens * act * (2 * h + (3 * arch.q_dim + 3 * arch.kv_dim) / tp)
    if arch.eager_attention and seq:
        heads = arch.heads / tp
        attn += tokens * heads * seq * (2 + 4) + tokens * 2 * arch.q_dim * act / tp  # + repeat_kv copies
    return max(mlp, attn)
