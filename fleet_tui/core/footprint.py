"""Shared footprint formulas: bytes and parameter counts that both memory and speed are built on.

Each formula exists once here; :mod:`fleet_tui.core.sizing` (memory, fit, KV capacity) and
:mod:`fleet_tui.core.perf` (weight streaming, KV reads, LoRA FLOPs) call the same functions. The
module sits below both packages, so neither imports the other to reach a formula.

Sources: LoRA adapter size r·(d_in + d_out) per adapted matrix (Hu et al., arXiv:2106.09685); KV
cache 2 (K and V) × layers × kv_heads × head_dim × bytes per token, sliding-window layers capped at
their window, multi-head latent attention (DeepSeek-V2 paper, arXiv:2405.04434 §2.1) one latent of
kv_lora_rank + qk_rope_head_dim values per token and layer, hybrid models only their full-attention
layers; bytes per stored value in :mod:`fleet_tui.core.calibration`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from fleet_tui.core import calibration as cal
from fleet_tui.core.modelspec import ModelArch, ParamCounts
from fleet_tui.core.workload import Workload


def activation_bytes(w: Workload) -> int:
    """Bytes of one activation value: 4 in fp32, else 2 (bf16/fp16 compute, also for quantized weights)."""
    return 4 if w.precision == "fp32" else 2


class Layout(NamedTuple):
    """How ``tp × pp × dp`` devices share one workload, and how far ZeRO shards the model state.

    * ``tp`` tensor-parallel ranks split every weight matrix, activation and KV head (Megatron);
    * ``pp`` pipeline stages each hold ``layers / pp`` layers (1F1B schedule);
    * ``dp`` data-parallel ranks each take ``batch / dp`` sequences, run as micro-batches of
      ``micro_batch`` sequences with gradient accumulation;
    * ``zero`` stage (Rajbhandari et al., arXiv:1910.02054): 1 shards optimizer states over the
      ``dp`` ranks, 2 also gradients, 3 (= FSDP full sharding) also the weights.

    ``idle`` counts devices left without work (a global batch smaller than the data-parallel
    ranks: a rank needs at least one micro-batch).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    micro_batch: int = 1  # sequences per forward/backward on one data-parallel rank
    idle: int = 0
    cp: int = 1  # context-parallel ranks: each sequence split over them (ring attention)
    vpp: int = 1  # model chunks per pipeline rank (interleaved 1F1B)

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def model_split(self) -> int:
        """Devices one copy of the model is cut into (tensor × pipeline)."""
        return self.tp * self.pp

    # ZeRO/FSDP and Megatron's distributed optimizer shard over the data- and context-parallel ranks
    # (every CP rank holds the same weights: torchtitan's dp_shard_cp mesh, Megatron's dp-cp group)
    @property
    def weight_shards(self) -> int:
        return self.dp * self.cp if self.zero >= 3 else 1

    @property
    def grad_shards(self) -> int:
        return self.dp * self.cp if self.zero >= 2 else 1

    @property
    def optimizer_shards(self) -> int:
        return self.dp * self.cp if self.zero >= 1 else 1

    def label(self) -> str:
        """``TP8 × PP4 × DP8, ZeRO-1`` (axes of size 1 left out), ``DP2, 2 idle`` with devices
        left without work."""
        axes = [f"{n}{k}" for n, k in (("TP", self.tp), ("PP", self.pp), ("CP", self.cp), ("DP", self.dp)) if k > 1]
        # "2 GPUs (1 device)" read as a contradiction: say which devices have no work
        text = " × ".join(axes) or ("1 busy" if self.idle else "1 device")
        if self.vpp > 1:
            text += f" (interleaved, {self.vpp} chunks per stage)"
        if self.zero and self.dp > 1:
            text += " FSDP (ZeRO-3)" if self.zero == 3 else f", ZeRO-{self.zero}"
        if self.idle:
            text += f", {self.idle} idle"
        return text


def layout_is_set(w: Workload) -> bool:
    """Whether the workload names its own layout (``tp``, ``pp`` or ``zero``): then it is kept."""
    return w.tp is not None or w.pp is not None or w.zero is not None


def parallel_layout(w: Workload, gpus: int) -> Layout:
    """The layout ``w`` runs on ``gpus`` devices: its own ``tp``/``pp``/``zero`` where set, else
    what its ``sharding`` names (``data``: replicas, ``tensor``: all devices split each layer,
    ``fsdp``: ZeRO-3 data parallel). Data-parallel ranks never exceed global batch / micro-batch;
    the devices left over are ``idle``."""
    gpus = max(1, int(gpus))
    if w.tp is None and w.pp is None and w.zero is None:
        if gpus <= 1:
            tp, pp, zero = 1, 1, 0
        elif w.sharding == "tensor":
            tp, pp, zero = gpus, 1, 0
        else:
            tp, pp, zero = 1, 1, (3 if w.sharding == "fsdp" else 0)
    else:
        tp, pp = w.tp or 1, w.pp or 1
        zero = w.zero if w.zero is not None else (3 if w.sharding == "fsdp" else 0)
    return make_layout(gpus, tp, pp, zero, w.micro_batch, w.batch, w.is_training, w.cp, w.vpp)


def make_layout(gpus: int, tp: int, pp: int, zero: int, micro_batch: int | None, batch: int,
                training: bool, cp: int = 1, vpp: int = 1) -> Layout:
    """The :class:`Layout` of ``tp × pp`` model splits on ``gpus`` devices for a global ``batch``:
    data-parallel ranks fill the rest, at most global batch / micro-batch (training, or whenever
    a micro-batch is set); the devices left over are ``idle``."""
    dp = max(1, gpus // (tp * pp * cp))
    micro = micro_batch or 0
    if training or micro_batch:
        # every rank needs at least one micro-batch of the global batch
        dp = max(1, min(dp, batch // max(1, micro or 1)))
    per_rank = math.ceil(batch / dp)
    micro = min(micro, per_rank) if micro else per_rank
    return Layout(tp=tp, pp=pp, dp=dp, zero=zero if dp * cp > 1 else 0, micro_batch=max(1, micro),
                  idle=gpus - tp * pp * cp * dp, cp=cp, vpp=vpp if pp > 1 else 1)


def parallel_split(w: Workload, gpus: int) -> tuple[int, int, int]:
    """(data-parallel replicas, tensor-parallel size, fsdp shard count) for ``gpus``."""
    lay = parallel_layout(w, gpus)
    return lay.dp, lay.tp, lay.weight_shards


def stack_lengths(w: Workload, seq: int) -> tuple[int, int]:
    """(source, target) tokens per sequence of a training step or forward pass over ``seq`` tokens:
    an encoder-decoder model's encoder reads ``seq`` and its decoder writes ``target_len`` (default
    ``seq``); a decoder-only model has no source."""
    if w.arch.is_encoder_decoder:
        return seq, w.target_len or seq
    return 0, seq


def lora_params(arch: ModelArch, w: Workload) -> int:
    """LoRA adapter parameters: r·(d_in + d_out) per adapted matrix (Hu et al. arXiv:2106.09685).

    Every attention block gets the attention adapters (a T5 decoder layer has two: PEFT's module
    names match its cross-attention q/k/v/o too), every feed-forward block the FFN ones (T5's
    wi_0/wi_1/wo answer to gate/up/down)."""
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
        blocks = arch.attention_blocks if t in ("q_proj", "k_proj", "v_proj", "o_proj") else arch.ffn_blocks
        total += blocks * n * r * (d_in + d_out)
    return total


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


def kv_bytes_per_token(arch: ModelArch, w: Workload, tp: int = 1, context: float = 0) -> float:
    """KV-cache bytes per token of one sequence at ``context`` tokens, per tensor-parallel rank.

    2 (K and V) × kv_heads (at least one per rank) × head_dim × activation bytes per layer (MLA:
    the latent, kv_lora_rank + qk_rope_head_dim values, whole on every rank); a sliding-window
    layer holds at most ``sliding_window`` tokens, so at a longer ``context`` its share per token
    shrinks (``context`` 0: full-attention layers only); a hybrid model's linear-attention layers
    keep a fixed-size state instead, counted nowhere per token.
    """
    kv_heads = math.ceil(arch.kv_heads / tp)
    per_layer = 2 * kv_heads * arch.dim_per_head * kv_value_bytes(w)
    if arch.kv_lora_rank:  # MLA: one latent per token, the same on every tensor rank
        per_layer = (arch.kv_lora_rank + arch.qk_rope_head_dim) * kv_value_bytes(w)
    total = arch.kv_layers * per_layer
    if arch.sliding_window_layers and arch.sliding_window is not None and context > 0:
        frac = min(1.0, arch.sliding_window / context)
        total += arch.sliding_window_layers * per_layer * frac
    return total


def sequence_state_bytes(arch: ModelArch, w: Workload, tp: int = 1) -> float:
    """Fixed-size state one sequence keeps in a hybrid model's linear-attention layers, per tensor
    rank (it does not grow with the context; 0 for a model without such layers)."""
    linear_layers = arch.layers - (arch.full_attention_layers or arch.layers)
    return linear_layers * arch.linear_state_values * activation_bytes(w) / tp


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
