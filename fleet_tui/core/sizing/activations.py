"""Per-layer tensors that a decoder keeps alive: saved activations for backward, attention masks,
and the factored optimizer state; the formulas behind :mod:`.memory`'s activation terms.

Saved activations are counted tensor by tensor for a Llama-style block under SDPA/flash attention
(no sequence² score matrix: those kernels keep only the log-sum-exp; Korthikanti et al. 2022,
arXiv:2205.05198, with selective recompute). Eager attention adds the score matrices it stores.
Validated as part of the memory estimate (see :mod:`fleet_tui.core.sizing`).

A T5 block (encoder-decoder models) is counted the same way from transformers' T5 modules, which
differ from a Llama block in what they keep: eager attention (fp32 softmax output, dropout mask and
dropped-out probabilities per score), dropout masks after every sub-layer and inside the FFN,
RMSNorm without a separate cast, ReLU or the tanh-approximated GELU (``gelu_new``: its input, tanh
output, 0.5·x and 1 + tanh are saved), and in the decoder a cross-attention whose keys and values are
projected from the encoder output per source token. Summed over both stacks by
:func:`stack_activations`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from fleet_tui.core.footprint import activation_bytes, stack_lengths
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
        return base + sum(lora_input_bytes(arch, w).values()) + moe_extra + post
    if w.precision == "fp32":
        return 24 * h + 12 * q + 8 * kv + (8 + 8 * gate) * f + 2 * moe_extra + post
    if autocast_fp32(w):
        # AMP: fp32 residual stream and norms (x, normed: 4h + 4h each), per-linear bf16 casts of
        # the normed input (q,k,v: 3 × 2h; gate/up: 2 × 2h), bf16 q/k/v/out + contiguous out copy,
        # MLP gate, act, up, product (bf16).
        return 26 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post
    # pure 16-bit: norms keep an fp32 copy (4h) + normalized 16-bit (2h) + output (2h)
    return 16 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post


def lora_input_bytes(arch: ModelArch, w: Workload) -> dict[str, float]:
    """Bytes per token each adapted module keeps: an fp32 copy of its input (PEFT up-casts adapters
    to fp32 by default; torchtune keeps them in bf16, half of that)."""
    h, gate = arch.hidden, 1 if arch.gated_mlp else 0
    f = arch.experts_per_token * arch.expert_intermediate if arch.is_moe else arch.intermediate
    cast = {"q_proj": 4 * h, "k_proj": 4 * h, "v_proj": 4 * h, "o_proj": 4 * arch.q_dim,
            "gate_proj": 4 * h * gate, "up_proj": 4 * h, "down_proj": 4 * f}
    scale = 0.5 if w.framework == "torchtune" else 1.0
    return {t: scale * cast[t] for t in set(w.lora_targets)}


def residual_bytes(w: Workload) -> int:
    """Bytes of one value of the residual stream: the weights' dtype, fp32 under AMP (fp32 master
    weights, autocast matmuls) and in fp32; else the 16-bit compute dtype."""
    amp = autocast_fp32(w) and w.precision != "fp32" and not w.is_adapter
    return 4 if (amp or w.precision == "fp32") else activation_bytes(w)


@functools.cache
def _runs_amp(framework: str) -> bool:
    """Whether ``framework``'s preset is PyTorch AMP (the presets load on the first training run)."""
    from fleet_tui.core.frameworks import preset

    return preset(framework).precision == "amp"


def autocast_fp32(w: Workload) -> bool:
    """Whether the forward runs on fp32 parameters under autocast (PyTorch AMP: fp32 residual
    stream and norms). FSDP/FSDP2 and Megatron mixed precision keep fp32 master weights too, but
    compute on 16-bit copies (``param_dtype=bf16``): their activations are 16-bit. So does
    Transformers under FSDP: Accelerate's FSDP plugin sets ``MixedPrecision(param_dtype=bf16)`` for
    ``--bf16`` (DeepSpeed ZeRO-3 keeps fp32 parameters under autocast)."""
    if w.master_weights != "fp32" or not _runs_amp(w.framework):
        return False
    fsdp = w.gpus > 1 and (w.zero == 3 or (w.zero is None and w.sharding == "fsdp"))
    return not (fsdp and w.framework == "hf")


class T5BlockBytes(NamedTuple):
    """What one T5 block saves for backward (no recompute)."""

    per_token: float  # per token of the block's own stream
    per_source_token: float  # decoder: the cross-attention's keys and values, per encoder token


def t5_block_act_per_token(arch: ModelArch, w: Workload, ctx: int, cross_ctx: int = 0) -> T5BlockBytes:
    """Bytes a T5 encoder block (``cross_ctx`` 0) or decoder block saves, tensor by tensor.

    ``a`` is the matmul output width (fp32 4 B, else 2), ``r`` the residual stream's (fp32 weights,
    also under AMP: 4 B). Per attention over ``n`` keys: the norm input (r·h), q and k for the scores,
    the fp32 softmax output, a 1-byte dropout mask and the dropped-out probabilities per score
    (heads·n·(5 + a)), v, the sub-layer's dropout mask (h). The FFN: norm input, ReLU output (a·f)
    or gelu_new's four tensors plus the gated product's two (6a·f), the dropout mask (f), the
    sub-layer mask (h). Trainable weights add their linears' inputs (the normed input, attention
    output, FFN hidden; AMP's 16-bit casts of them); adapters add :func:`lora_input_bytes`.
    """
    h, q, kv, f, heads = arch.hidden, arch.q_dim, arch.kv_dim, arch.intermediate, arch.heads
    amp = w.master_weights == "fp32" and w.precision != "fp32" and not w.is_adapter
    a, r = (4 if w.precision == "fp32" else 2), residual_bytes(w)
    train = not w.is_adapter
    cast = 2 if amp else 0  # AMP: each linear's input cast to 16-bit is saved with it

    def attention(keys: int) -> float:
        return r * h + a * (q + 2 * kv) + heads * keys * (5 + a) + h \
            + (r * h + a * q + cast * (3 * h + q) if train else 0)

    act = 6 * a * f if arch.gated_mlp else a * f
    ffn = r * h + act + f + h + ((r * h + a * f + cast * (arch.mlp_matrices - 1) * h + cast * f) if train else 0)
    lora = lora_input_bytes(arch, w) if w.is_adapter else {}
    attn_lora = sum(v for t, v in lora.items() if t in ("q_proj", "k_proj", "v_proj", "o_proj"))
    ffn_lora = sum(lora.values()) - attn_lora
    per_token = attention(ctx) + ffn + attn_lora + ffn_lora
    per_source = 0.0
    if cross_ctx:
        # cross-attention: q (and o) per decoder token; k, v (and their adapters' inputs) per source token
        kv_lora = lora.get("k_proj", 0.0) + lora.get("v_proj", 0.0)
        per_token += attention(cross_ctx) - a * 2 * kv + attn_lora - kv_lora - (cast * 2 * h if train else 0)
        per_source = a * 2 * kv + kv_lora + (cast * 2 * h if train else 0)
    return T5BlockBytes(per_token, per_source)


def attention_mask_bytes(arch: ModelArch, w: Workload, batch: int, src: int, tgt: int) -> float:
    """Masks built once per forward and shared by the layers: :func:`eager_mask_bytes`, or for an
    encoder-decoder model T5's position bias plus mask, broadcast to batch × heads × queries × keys
    once per stack's self-attention and once for the cross-attention (in the weights' dtype).
    ``src``, ``tgt``: :func:`~fleet_tui.core.footprint.stack_lengths` (an encoder pass alone: tgt 0)."""
    if not arch.is_encoder_decoder:
        return eager_mask_bytes(arch, batch, tgt, activation_bytes(w))
    return batch * arch.heads * (src * src + tgt * tgt + tgt * src) * residual_bytes(w)


class StackActivations(NamedTuple):
    """Saved activations of one micro-batch over every layer (one tensor rank, before fused-kernel
    factors), and what recompute and the loss need of them."""

    saved: float  # bytes every layer saves for backward without recompute
    layer_inputs: float  # values of every layer's input: what activation checkpointing keeps
    widest_layer: float  # bytes one layer saves (recompute: live once more in backward)
    masks: float  # attention masks / position biases built once and shared by the layers
    head_tokens: int  # tokens whose logits the loss takes


def stack_activations(arch: ModelArch, w: Workload, micro: int, seq: int) -> StackActivations:
    """:class:`StackActivations` of ``micro`` sequences of ``seq`` tokens: a decoder-only model's
    layers over ``seq``; an encoder-decoder's encoder over the source and decoder over the target
    (each decoder layer also keeps its cross-attention keys and values over the source, and the
    encoder output stays alive for all of them)."""
    src, tgt = stack_lengths(w, seq)
    if not arch.is_encoder_decoder:
        per = train_act_per_token_layer(arch, w, seq)
        tokens = micro * seq
        return StackActivations(arch.layers * tokens * per, arch.layers * tokens * arch.hidden, tokens * per,
                                eager_mask_bytes(arch, micro, seq, activation_bytes(w)), tokens)
    enc = t5_block_act_per_token(arch, w, src)
    dec = t5_block_act_per_token(arch, w, tgt, cross_ctx=src)
    enc_layer = micro * src * enc.per_token
    dec_layer = micro * (tgt * dec.per_token + src * dec.per_source_token)
    h = arch.hidden
    inputs = micro * (arch.layers * src * h + arch.decoder_layers * tgt * h + src * h)
    masks = attention_mask_bytes(arch, w, micro, src, tgt)
    saved = arch.layers * enc_layer + arch.decoder_layers * dec_layer + micro * src * h * residual_bytes(w)
    return StackActivations(saved, inputs, max(enc_layer, dec_layer), masks, micro * tgt)


def attention_note(arch: ModelArch) -> str:
    if arch.eager_attention:
        return "eager attention: the sequence × sequence scores (16-bit and fp32 softmax) are stored"
    return "attention by SDPA/flash kernels: no sequence² score matrix is stored"
