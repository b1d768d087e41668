"""Per-layer tensors that a decoder keeps alive: saved activations for backward, attention masks,
and the factored optimizer state; the formulas behind :mod:`.memory`'s activation terms.

Saved activations are counted tensor by tensor for a Llama-style block under SDPA/flash attention
(no sequence² score matrix: those kernels keep only the log-sum-exp; Korthikanti et al. 2022,
arXiv:2205.05198, with selective recompute). Eager attention adds the score matrices it stores.
Validated as part of the memory estimate (see :mod:`fleet_tui.core.sizing`).
"""

from __future__ import annotations

from fleet_tui.core.modelspec import ModelArch, ParamCounts
from fleet_tui.core.workload import Workload


def adafactor_state_elems(arch: ModelArch, pc: ParamCounts) -> int:
    """Factored second moment: rows + columns per weight matrix (vectors keep a full moment)."""
    h = arch.hidden
    f = arch.expert_intermediate if arch.is_moe else arch.intermediate
    n_ffn = (arch.experts if arch.is_moe else 1)
    attn = (h + arch.q_dim) * 2 + (h + arch.kv_dim) * 2
    mlp = n_ffn * arch.mlp_matrices * (h + f)
    emb = (arch.vocab + h) * (1 if arch.tied_embeddings else 2)
    return arch.attention_blocks * attn + arch.ffn_blocks * mlp + emb + pc.norms


def eager_mask_bytes(arch: ModelArch, batch: int, seq: int, act: int) -> float:
    """Attention masks Hugging Face materializes (batch × seq × seq each).

    Eager attention adds a 16-bit mask (plus one for sliding-window layers); SDPA needs an explicit
    boolean mask only for sliding-window layers once the sequence is longer than the window
    (otherwise it runs the causal kernel without a mask).
    """
    windowed = arch.sliding_window_layers and arch.sliding_window and seq > arch.sliding_window
    if arch.eager_attention:
        return (2 if windowed else 1) * batch * seq * seq * act
    return batch * seq * seq * 1.0 if windowed else 0.0


def train_act_per_token_layer(arch: ModelArch, w: Workload, seq: int = 0) -> float:
    """Bytes one decoder layer saves for backward per token (no recompute), Llama-style block.

    Counted tensor by tensor (see the module docstring); h = hidden, q = heads·head_dim,
    kv = kv_heads·head_dim, f = FFN width per token (MoE: experts_per_token × expert width).
    """
    h, q, kv = arch.hidden, arch.q_dim, arch.kv_dim
    if arch.is_moe:
        f = arch.experts_per_token * arch.expert_intermediate
        # per routed token: the gathered input (2h) and the weighted expert output (2h); router
        # softmax probabilities (fp32) per expert
        moe_extra = arch.experts_per_token * 4 * h + arch.experts * 8
    else:
        f = arch.intermediate
        moe_extra = 0
    gate = 1 if arch.gated_mlp else 0
    # Gemma-2/3 post-attention and post-MLP norms (computed in fp32): the fp32 input and the fp32
    # normalized tensor each (frozen weight: only the input)
    post = (2 * (4 if w.kind in ("lora", "qlora") else 8) * h) if arch.post_norms else 0
    if arch.eager_attention and seq:
        # eager attention keeps the scores: tanh output (16-bit), fp32 softmax output, 16-bit probs
        # (8 B per score = 8 · heads · seq per token), and K/V repeated to every head
        post += 8 * arch.heads * seq + 4 * (q - kv) * (2 if w.precision == "fp32" else 1)
    if w.kind in ("lora", "qlora"):
        # frozen 16-bit base: norms keep their fp32 input (4h each), SDPA keeps q,k,v,out, the MLP
        # keeps gate, act, up (frozen linears save nothing); each LoRA module keeps an fp32 copy of
        # its input (PEFT up-casts adapters to fp32 by default).
        base = 8 * h + 4 * q + 4 * kv + (4 + 2 * gate) * f
        cast = {"q_proj": 4 * h, "k_proj": 4 * h, "v_proj": 4 * h, "o_proj": 4 * q,
                "gate_proj": 4 * h * gate, "up_proj": 4 * h, "down_proj": 4 * f}
        # torchtune keeps adapters in bf16: the input copy is 16-bit (half of PEFT's fp32 copy)
        scale = 0.5 if w.framework == "torchtune" else 1.0
        return base + scale * sum(cast[t] for t in set(w.lora_targets)) + moe_extra + post
    if w.precision == "fp32":
        return 24 * h + 12 * q + 8 * kv + (8 + 8 * gate) * f + 2 * moe_extra + post
    if w.master_weights == "fp32":
        # AMP: fp32 residual stream and norms (x, normed: 4h + 4h each), per-linear bf16 casts of
        # the normed input (q,k,v: 3 × 2h; gate/up: 2 × 2h), bf16 q/k/v/out + contiguous out copy,
        # MLP gate, act, up, product (bf16).
        return 26 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post
    # pure 16-bit: norms keep an fp32 copy (4h) + normalized 16-bit (2h) + output (2h)
    return 16 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post


def attention_note(arch: ModelArch) -> str:
    if arch.eager_attention:
        return "eager attention: the sequence × sequence scores (16-bit and fp32 softmax) are stored"
    return "attention by SDPA/flash kernels: no sequence² score matrix is stored"
