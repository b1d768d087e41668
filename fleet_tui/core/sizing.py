"""Per-GPU memory of a workload, whether it fits an accelerator, and what to change when it does not.

Method
------
The estimate reproduces what ``nvidia-smi``/NVML shows at the peak of a PyTorch + Hugging Face run:

``NVML used = driver reserve + CUDA context + lazily loaded kernels + allocator reserved pool``

and the reserved pool = the allocated peak + caching-allocator slack. The allocated peak is the
largest of a few *phases*, each a sum of named components (all per GPU):

* inference, one forward over ``batch × seq_len`` (HF ``model(ids, use_cache=True)``): weights +
  KV cache of every layer + the larger of (logits for every position in 16-bit + the final hidden
  state) and (the widest layer transient: MLP gate/up/product, or attention q/k/v/rotary) + cuBLAS
  workspace;
* generation (HF ``generate`` with a dynamic cache, last-position logits only): the prompt forward,
  or the full cache at the end plus one layer's cache being re-concatenated;
* training: the start of backward (weights + optimizer states + saved activations + the loss'
  logits path + AMP's 16-bit weight copies) vs the optimizer step (weights + gradients + optimizer
  states). Saved activations per layer per token are counted tensor by tensor for a Llama-style
  block under SDPA/flash attention — *no s² attention term*, as flash/memory-efficient kernels keep
  only the log-sum-exp (Korthikanti et al. 2022 with selective recompute; arXiv:2205.05198). With
  activation checkpointing only each layer's input is kept.

Sharding: ``data`` replicates everything and splits the global batch; ``fsdp`` (ZeRO-3) also divides
weights, gradients and optimizer states by the GPU count and adds the gathered weights of two layers;
``tensor`` divides weights, activations, logits (vocab-parallel) and KV heads (at least one per GPU).
More than one GPU adds NCCL buffers (and DDP's gradient buckets for ``data`` training).

Constants with physical meaning and their sources are in :mod:`fleet_tui.core.calibration`.

Measured error
--------------
Against the 23 H200 runs in ``tests/fixtures/h200/sizing_truth.json`` (weights-only, prefill,
generation, AMP and pure-bf16 full training with and without recompute, LoRA) the median absolute
error of the NVML peak is 1.0 % and the maximum 4.7 % (``tests/core/test_sizing_accuracy.py``
prints the table). Calibration is a handful of constants (driver reserve and CUDA context as
measured, lazily loaded kernels, three allocator-slack fractions by allocation pattern), not per-row
factors. Known gaps: the Llama-2-7B fp32-master recompute run keeps ~10 GB more in the allocator
pool than any transient explains (we under-predict it by 2 %); attention implementations that
materialize the score matrix (eager attention) are not modelled; nor is multi-head latent attention.

Speed of the function: results are cached per (workload, gpus) — ``Workload`` is frozen and
hashable — so ranking a whole catalog costs one estimate per GPU count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from fleet_tui.core import calibration as cal
from fleet_tui.core.modelspec import ModelArch, ParamCounts, param_counts
from fleet_tui.core.workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from fleet_tui.core.perf import Throughput
    from fleet_tui.core.specs import Accelerator

COMPONENT_ORDER = (
    "weights", "weight_copies", "gradients", "optimizer_states", "activations", "logits",
    "kv_cache", "workspace", "comm_buffers", "allocator_slack", "runtime_kernels", "cuda_context",
    "driver_reserve",
)
COMPONENT_HELP = {
    "weights": "model parameters as stored (quantized formats include their scales)",
    "weight_copies": "16-bit weight copies: AMP autocast cache, FSDP gathered layers, QLoRA dequant",
    "gradients": "parameter gradients (trainable parameters only)",
    "optimizer_states": "optimizer moments (AdamW m and v, 8-bit states, momentum, factored v)",
    "activations": "tensors kept for backward (training) or live layer transients (inference)",
    "logits": "vocabulary-sized outputs; training adds the fp32 loss path",
    "kv_cache": "attention keys and values of every layer (GQA-aware; MoE experts do not add KV)",
    "workspace": "cuBLAS workspace and other kernel scratch",
    "comm_buffers": "NCCL buffers and DDP gradient buckets (more than one GPU)",
    "allocator_slack": "PyTorch caching allocator: freed blocks kept reserved (fragmentation)",
    "runtime_kernels": "kernel images and library handles loaded while running",
    "cuda_context": "the process' CUDA context",
    "driver_reserve": "memory the driver holds before any process starts",
}


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Peak device memory per GPU, as NVML would report it, split by component (bytes)."""

    total_bytes: int
    breakdown: dict[str, int]
    per_gpu: bool = True
    phase: str = ""  # which moment of the run is the peak
    gpus: int = 1
    assumptions: tuple[str, ...] = ()

    @property
    def total_gib(self) -> float:
        return self.total_bytes / cal.GiB


@dataclass(frozen=True, slots=True)
class FitSuggestion:
    description: str
    workload: Workload
    total_bytes: int
    gpus: int
    change: str = ""  # short key: "precision", "checkpointing", "optimizer", "gpus", "batch", "lora"...


@dataclass(frozen=True, slots=True)
class FitResult:
    fits: bool
    memory: MemoryBreakdown
    capacity_bytes: int
    headroom_bytes: int
    accelerator: str = ""
    gpus: int = 1
    suggestions: list[FitSuggestion] = field(default_factory=list)
    precision_supported: bool = True  # False only when the device is known not to run it
    message: str = ""
    precision_note: str = ""  # set when support is undocumented (allowed, but say so)


@dataclass(frozen=True, slots=True)
class KVCapacity:
    tokens: int  # KV-cache tokens the free memory of one replica holds
    concurrent_sequences: int  # sequences of (prompt + generated) tokens that fit at once
    free_bytes: int = 0
    bytes_per_token: int = 0
    sequence_tokens: int = 0


@dataclass(frozen=True, slots=True)
class SizingResult:
    workload: Workload
    memory: MemoryBreakdown
    fit: FitResult | None
    kv_capacity: KVCapacity | None
    throughput: "Throughput | None"
    accelerator: str | None = None
    gpus: int = 1


#: Sequence length assumed for a training workload given without one.
DEFAULT_TRAIN_SEQ_LEN = 2048


# --- small helpers -------------------------------------------------------------------------------

def _act_bytes(w: Workload) -> int:
    return 4 if w.precision == "fp32" else 2


def _split(w: Workload, gpus: int) -> tuple[int, int, int]:
    """(data-parallel replicas, tensor-parallel size, fsdp shard count) for ``gpus``."""
    if gpus <= 1:
        return 1, 1, 1
    if w.sharding == "tensor":
        return 1, gpus, 1
    if w.sharding == "fsdp":
        return gpus, 1, gpus
    return gpus, 1, 1


def _lora_params(arch: ModelArch, w: Workload) -> int:
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


def _adafactor_state_elems(arch: ModelArch, pc: ParamCounts) -> int:
    """Factored second moment: rows + columns per weight matrix (vectors keep a full moment)."""
    h, L = arch.hidden, arch.layers
    f = arch.expert_intermediate if arch.is_moe else arch.intermediate
    n_ffn = (arch.experts if arch.is_moe else 1)
    attn = (h + arch.q_dim) * 2 + (h + arch.kv_dim) * 2
    mlp = n_ffn * arch.mlp_matrices * (h + f)
    emb = (arch.vocab + h) * (1 if arch.tied_embeddings else 2)
    return L * (attn + mlp) + emb + pc.norms


def _weight_bytes(w: Workload, pc: ParamCounts) -> float:
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


def _kv_bytes_per_token(arch: ModelArch, w: Workload, tp: int, context: int) -> float:
    """KV bytes per token of one sequence at ``context`` tokens (sliding-window layers cap)."""
    kv_heads = math.ceil(arch.kv_heads / tp)
    per_layer = 2 * kv_heads * arch.dim_per_head * _act_bytes(w)
    full_layers = arch.layers - arch.sliding_window_layers
    total = full_layers * per_layer
    if arch.sliding_window_layers and context > 0:
        frac = min(1.0, arch.sliding_window / context)
        total += arch.sliding_window_layers * per_layer * frac
    return total


def kv_bytes_per_token(arch: ModelArch, precision: str = "bf16", tp: int = 1) -> int:
    """2 (K and V) × layers × kv_heads × head_dim × bytes — one token, full-attention layers."""
    b = 4 if precision == "fp32" else 2
    return 2 * arch.layers * math.ceil(arch.kv_heads / tp) * arch.dim_per_head * b


def _forward_transient(arch: ModelArch, tokens: int, act: int, tp: int, seq: int = 0) -> float:
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


def _eager_mask_bytes(arch: ModelArch, batch: int, seq: int, act: int) -> float:
    """Attention masks Hugging Face materializes (batch × seq × seq each).

    Eager attention adds a 16-bit mask (plus one for sliding-window layers); SDPA needs an explicit
    boolean mask only for sliding-window layers once the sequence is longer than the window
    (otherwise it runs the causal kernel without a mask).
    """
    windowed = arch.sliding_window_layers and arch.sliding_window and seq > arch.sliding_window
    if arch.eager_attention:
        return (2 if windowed else 1) * batch * seq * seq * act
    return batch * seq * seq * 1.0 if windowed else 0.0


def _train_act_per_token_layer(arch: ModelArch, w: Workload, seq: int = 0) -> float:
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
        return base + sum(cast[t] for t in set(w.lora_targets)) + moe_extra + post
    if w.precision == "fp32":
        return 24 * h + 12 * q + 8 * kv + (8 + 8 * gate) * f + 2 * moe_extra + post
    if w.master_weights == "fp32":
        # AMP: fp32 residual stream and norms (x, normed: 4h + 4h each), per-linear bf16 casts of
        # the normed input (q,k,v: 3 × 2h; gate/up: 2 × 2h), bf16 q/k/v/out + contiguous out copy,
        # MLP gate, act, up, product (bf16).
        return 26 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post
    # pure 16-bit: norms keep an fp32 copy (4h) + normalized 16-bit (2h) + output (2h)
    return 16 * h + 6 * q + 4 * kv + (4 + 4 * gate) * f + moe_extra + post


def _attention_note(arch: ModelArch) -> str:
    if arch.eager_attention:
        return "eager attention: the sequence × sequence scores (16-bit and fp32 softmax) are stored"
    return "attention by SDPA/flash kernels: no sequence² score matrix is stored"


@dataclass(frozen=True, slots=True)
class _Phase:
    name: str
    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())


# --- the estimate --------------------------------------------------------------------------------

def estimate_memory(workload: Workload, gpus: int | None = None) -> MemoryBreakdown:
    """Peak memory per GPU of ``workload`` on ``gpus`` devices (default ``workload.gpus``)."""
    return _estimate(workload, int(gpus or workload.gpus))


@lru_cache(maxsize=4096)
def _estimate(w: Workload, gpus: int) -> MemoryBreakdown:
    arch = w.arch
    pc = param_counts(arch)
    dp, tp, shard = _split(w, gpus)
    act = _act_bytes(w)
    assumptions: list[str] = []
    weights = _weight_bytes(w, pc) / (tp * shard)
    fixed = {
        "driver_reserve": cal.DRIVER_RESERVE_BYTES,
        "cuda_context": cal.CUDA_CONTEXT_BYTES,
        "runtime_kernels": cal.RUNTIME_KERNELS_TRAINING_BYTES if w.is_training else cal.RUNTIME_KERNELS_INFERENCE_BYTES,
    }
    # independent inference replicas do not talk to each other; everything else does
    comm = cal.COMM_BUFFERS_BYTES if gpus > 1 and (w.is_training or tp > 1 or shard > 1) else 0
    b_gpu = math.ceil(w.batch / dp)
    if gpus > 1 and w.batch < dp:
        assumptions.append(f"batch {w.batch} < {dp} data-parallel replicas: each GPU still holds one sequence")
    slack_frac = cal.ALLOCATOR_SLACK_FORWARD
    persistent_keys: tuple[str, ...] = ("weights",)
    h, V = arch.hidden, arch.vocab
    fsdp_gather = 0.0
    if shard > 1:
        # two layers' parameters gathered in 16-bit (the current one and the prefetched next)
        layer_params = pc.attention_per_layer + pc.mlp_per_layer
        fsdp_gather = 2 * layer_params * 2 + (pc.embedding if w.is_training else 0) * 2 / shard
    phases: list[_Phase] = []

    if not w.is_training:
        ws = cal.CUBLAS_WORKSPACE_BYTES
        if w.is_generation:
            ctx = w.prompt_len + w.gen_len
            prompt_tok = b_gpu * w.prompt_len
            kv_prompt = b_gpu * w.prompt_len * _kv_bytes_per_token(arch, w, tp, w.prompt_len)
            kv_end = b_gpu * ctx * _kv_bytes_per_token(arch, w, tp, ctx)
            last_logits = b_gpu * V * (act + 4) / tp  # last position, plus the fp32 copy generate takes
            phases.append(_Phase("prompt forward (prefill)", {
                "weights": weights, "weight_copies": fsdp_gather, "kv_cache": kv_prompt,
                "activations": _forward_transient(arch, prompt_tok, act, tp, w.prompt_len)
                + _eager_mask_bytes(arch, b_gpu, w.prompt_len, act),
                "logits": last_logits, "workspace": ws}))
            phases.append(_Phase("end of generation", {
                "weights": weights, "weight_copies": fsdp_gather, "kv_cache": kv_end,
                # dynamic cache: torch.cat re-allocates one layer's K and V per step
                "activations": kv_end / arch.layers + b_gpu * h * act * 4,
                "logits": last_logits, "workspace": ws}))
            assumptions.append("generation memory as Hugging Face generate with a dynamic KV cache; "
                               "serving engines pre-allocate a KV pool instead (see kv capacity)")
        elif w.seq_len is not None:
            tokens = b_gpu * w.seq_len
            kv = b_gpu * w.seq_len * _kv_bytes_per_token(arch, w, tp, w.seq_len)
            # soft-capping (Gemma-2) divides, tanh's and multiplies: two logits-sized tensors live
            capped = 2 if arch.logit_softcap else 1
            logits = tokens * (capped * V * act / tp + h * act)
            phases.append(_Phase("forward pass (output logits)", {
                "weights": weights, "weight_copies": fsdp_gather, "kv_cache": kv,
                "activations": _eager_mask_bytes(arch, b_gpu, w.seq_len, act),
                "logits": logits, "workspace": ws}))
            phases.append(_Phase("forward pass (widest layer)", {
                "weights": weights, "weight_copies": fsdp_gather, "kv_cache": kv,
                "activations": _forward_transient(arch, tokens, act, tp, w.seq_len)
                + _eager_mask_bytes(arch, b_gpu, w.seq_len, act), "workspace": ws}))
            assumptions.append("one forward pass returning logits at every position (16-bit), "
                               "KV cache kept (use_cache=True)")
        else:
            phases.append(_Phase("model loaded", {"weights": weights, "weight_copies": fsdp_gather}))
            slack_frac = 0.0
            if arch.tied_embeddings and w.precision in ("bf16", "fp16", "fp32"):
                # Hugging Face builds the output head, then ties it to the embedding: the freed
                # vocab × hidden block stays in the caching allocator's pool (measured on both
                # tied models of the H200 set; later allocations reuse it)
                tied_block = arch.vocab * h * act / (tp * shard)
                phases[-1].parts["allocator_slack"] = tied_block
                assumptions.append("model built by Hugging Face: the untied output head it allocates "
                                   "before tying stays cached until reused")
        assumptions.append(_attention_note(arch))
    else:
        trainable = _lora_params(arch, w) if w.is_adapter else pc.total
        if w.is_adapter:
            adapters = trainable / tp
            weights += adapters * 4  # PEFT keeps adapters in fp32 by default
            grads = adapters * 4
            if w.optimizer == "adafactor":  # factored: (rows + cols) per r × d matrix ≈ 4 B · d
                opt = adapters * 4.0 / w.lora_rank
            else:
                opt = adapters * cal.OPTIMIZER_BYTES_FP32[w.optimizer]
            assumptions.append(f"LoRA r={w.lora_rank} on {','.join(w.lora_targets)}: "
                               f"{trainable / 1e6:.1f}M trainable parameters in fp32 (PEFT default)")
            if w.kind == "qlora":
                # de-quantized copy of the largest weight matrix being multiplied
                fsdp_gather += max(h * arch.intermediate, h * arch.q_dim) * act
                assumptions.append("QLoRA base in NF4 with double quantization (4.127 bits/param)")
        else:
            per_shard = trainable / (tp * shard)
            amp = w.master_weights == "fp32" and w.precision != "fp32"
            grad_b = 4.0 if (amp or w.precision == "fp32") else float(act)
            grads = per_shard * grad_b
            if w.optimizer == "adafactor":
                opt = _adafactor_state_elems(arch, pc) * 4.0 / (tp * shard)
            else:
                table = cal.OPTIMIZER_BYTES_FP32 if grad_b == 4.0 else cal.OPTIMIZER_BYTES_BF16
                opt = per_shard * table[w.optimizer]
            if amp:
                assumptions.append("mixed precision (PyTorch AMP): fp32 parameters, gradients and "
                                   "optimizer states; forward under autocast")
            elif w.precision != "fp32":
                assumptions.append(f"pure {w.precision}: parameters, gradients and optimizer states "
                                   f"in {w.precision}")
        seq_len = w.seq_len or DEFAULT_TRAIN_SEQ_LEN
        if w.seq_len is None:
            assumptions.append(f"no --seq-len given: {DEFAULT_TRAIN_SEQ_LEN}-token sequences assumed")
        tokens = b_gpu * seq_len
        amp = (w.master_weights == "fp32" and w.precision not in ("fp32",) and not w.is_adapter)
        per_layer = _train_act_per_token_layer(arch, w, seq_len) / tp
        res_bytes = 4 if (amp or w.precision == "fp32") else act
        head_in = tokens * h * (10 if amp else 8) / tp  # final norm + output-head input
        if w.grad_checkpointing:
            acts = arch.layers * tokens * h * res_bytes / tp + head_in
            # backward recomputes one layer at a time: its activations live once more
            recompute = per_layer * tokens
            slack_frac = cal.ALLOCATOR_SLACK_RECOMPUTE
        else:
            acts = arch.layers * tokens * per_layer + head_in + _eager_mask_bytes(arch, b_gpu, seq_len, act)
            recompute = 0.0
            slack_frac = cal.ALLOCATOR_SLACK_TRAINING
        # soft-capped logits (Gemma-2): tanh keeps its 16-bit output (+2 B), and backward forms a
        # 16-bit gradient through the cap (+2 B)
        cap_fwd, cap_bwd = (2 * act, 4 * act) if arch.logit_softcap else (0, 0)
        logits_bwd = tokens * V * (cal.LOSS_BYTES_PER_VOCAB_TOKEN + cap_bwd) / tp
        logits_fwd = tokens * V * (cal.LOSS_FORWARD_BYTES_PER_VOCAB_TOKEN + cap_fwd) / tp
        head_params = pc.lm_head or pc.embedding
        if amp:
            cast_all = 2.0 * pc.matmul_total / (tp * shard) if shard == 1 else 0.0
            cast_bwd = cast_all if not w.grad_checkpointing else 2.0 * head_params / (tp * shard)
        else:
            cast_all = cast_bwd = 0.0
        ddp = grads if (w.sharding == "data" and gpus > 1 and not w.is_adapter) else 0.0
        base = {"weights": weights, "optimizer_states": opt}
        phases.append(_Phase("forward end", {**base, "weight_copies": cast_all + fsdp_gather,
                                             "activations": acts, "logits": logits_fwd}))
        phases.append(_Phase("backward start (loss)", {**base, "weight_copies": cast_bwd + fsdp_gather,
                                                       "activations": acts, "logits": logits_bwd}))
        if recompute:
            # midway through backward: about half the gradients exist, half the layer inputs are
            # freed, and one layer's activations and their gradients are live
            phases.append(_Phase("backward (recomputing a layer)", {
                **base, "weight_copies": fsdp_gather, "gradients": grads * 0.5,
                "activations": acts * 0.5 + 2 * recompute}))
        phases.append(_Phase("optimizer step", {**base, "gradients": grads, "weight_copies": 0.0}))
        comm += ddp
        persistent_keys = ("weights", "optimizer_states", "gradients")
        if w.grad_checkpointing:
            assumptions.append("activation checkpointing: each decoder layer's input kept, the layer "
                               "recomputed in backward (Hugging Face gradient_checkpointing_enable)")
        assumptions.append(_attention_note(arch))
        assumptions.append("loss as Hugging Face computes it: logits up-cast to fp32 for cross-entropy")

    peak = max(phases, key=lambda p: p.total)
    transient = max(p.total - sum(p.parts.get(k, 0.0) for k in persistent_keys) for p in phases)
    slack = slack_frac * transient
    parts: dict[str, float] = {k: 0.0 for k in COMPONENT_ORDER}
    for k, v in peak.parts.items():
        parts[k] += v
    parts["allocator_slack"] += slack
    parts["comm_buffers"] = comm
    parts.update(fixed)
    if gpus > 1:
        assumptions.append(f"{gpus} GPUs, {w.sharding} sharding"
                           + (f": global batch {w.batch} split {dp} ways" if dp > 1 else ""))
    breakdown = {k: int(round(parts[k])) for k in COMPONENT_ORDER if parts[k] > 0}
    return MemoryBreakdown(total_bytes=sum(breakdown.values()), breakdown=breakdown, per_gpu=True,
                           phase=peak.name, gpus=gpus, assumptions=tuple(dict.fromkeys(assumptions)))


# --- fit -----------------------------------------------------------------------------------------

def capacity_bytes(accelerator: "Accelerator") -> int:
    """Device memory a process can use: nominal size less what NVML never reports (~1 %)."""
    return int(accelerator.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION)


def precision_support(precision: str, accelerator: "Accelerator") -> tuple[bool, str]:
    """(allowed, message). Refused only when the device is *known* not to run ``precision``.

    ``Accelerator.supports`` decides from the architecture (not from which peaks happen to be
    published): unknown support is allowed, and the message then says so (a note, not an error).
    int8/int4 are weight-only formats that run on any CUDA/ROCm GPU.
    """
    name = accelerator.id
    known = accelerator.supports(precision)
    if precision in ("int8", "int4"):
        if known or accelerator.software_stack in ("CUDA", "ROCm"):
            return True, ""
        if known is None:
            return True, (f"{name}: {precision} support is not documented for its architecture "
                          f"({accelerator.architecture or 'unknown'}); assumed to run")
        return False, (f"{name} has no {precision} kernels in its software stack "
                       f"({accelerator.software_stack}); use bf16 or fp16")
    if precision == "fp32" or known:
        return True, ""
    if known is None:
        return True, (f"{name}: {precision} support is not documented for its architecture "
                      f"({accelerator.architecture or 'unknown'}); assumed to run")
    arch = f" ({accelerator.architecture})" if accelerator.architecture else ""
    alternatives = [p for p in ("bf16", "fp16") if p != precision and accelerator.supports(p)]
    if precision == "fp8" and accelerator.software_stack in ("CUDA", "ROCm"):
        alternatives.append("int8")
    alt = " or ".join(alternatives) or "fp32"
    return False, f"{name}{arch} has no {precision} support; use {alt}"


def _candidates(w: Workload, gpus: int, acc: "Accelerator") -> list[tuple[str, str, Workload, int]]:
    """Single changes, least disruptive first: (change key, description, workload, gpus)."""
    out: list[tuple[str, str, Workload, int]] = []
    if w.is_training:
        if not w.grad_checkpointing:
            out.append(("checkpointing", "turn on activation checkpointing (--grad-checkpointing; "
                        "~25-30 % slower steps)", w.derive(grad_checkpointing=True), gpus))
        if w.optimizer == "adamw":
            out.append(("optimizer", "use 8-bit AdamW (--optimizer adamw8bit)",
                        w.derive(optimizer="adamw8bit"), gpus))
        if not w.is_adapter and w.master_weights == "fp32" and w.precision in ("bf16", "fp16"):
            out.append(("master_weights", f"train in pure {w.precision} without fp32 master weights "
                        "(--master-weights none)", w.derive(master_weights="none"), gpus))
        if w.kind in ("training", "finetune"):
            out.append(("lora", "fine-tune LoRA adapters instead of all weights (--workload lora)",
                        w.derive(kind="lora", master_weights="none"), gpus))
        if w.kind in ("training", "finetune", "lora"):
            out.append(("qlora", "QLoRA: 4-bit base + LoRA adapters (--workload qlora)",
                        w.derive(kind="qlora", master_weights="none",
                                precision=w.precision if w.precision in ("bf16", "fp16") else "bf16"), gpus))
        for n in (2, 4, 8, 16, 32, 64, 128, 256):
            if n > gpus:
                out.append(("gpus", f"shard across {n} GPUs with FSDP/ZeRO-3 (--gpus {n} --sharding fsdp)",
                            w.derive(sharding="fsdp", gpus=n), n))
    else:
        order = [p for p in ("fp8", "int8", "int4") if p != w.precision]
        if w.precision == "fp32":
            order = [p for p in ("bf16", "fp16") if acc.supports(p)][:1] + order
        for p in order:
            if _bytes_rank(p) < _bytes_rank(w.precision) and precision_support(p, acc)[0]:
                label = {"fp8": "fp8 weights", "int8": "int8 weight quantization",
                         "int4": "int4 weight quantization (GPTQ/AWQ)"}.get(p, f"{p} weights")
                out.append(("precision", f"use {label} (--precision {p})", w.derive(precision=p), gpus))
        for n in (2, 4, 8, 16):
            if n > gpus:
                out.append(("gpus", f"tensor-parallel across {n} GPUs (--gpus {n} --sharding tensor)",
                            w.derive(sharding="tensor", gpus=n), n))
    b = w.batch // 2
    while b >= 1:
        out.append(("batch", f"reduce the batch to {b} (--batch {b})", w.derive(batch=b), gpus))
        b //= 2
    if w.seq_len and w.seq_len > 512:
        s = w.seq_len // 2
        while s >= 256:
            out.append(("seq_len", f"shorten sequences to {s} tokens (--seq-len {s})", w.derive(seq_len=s), gpus))
            s //= 2
    return out


def _bytes_rank(p: str) -> float:
    return cal.WEIGHT_BYTES.get(p, 2.0)


def _suggest(w: Workload, gpus: int, acc: "Accelerator", cap: int, limit: int = 6) -> list[FitSuggestion]:
    cands = _candidates(w, gpus, acc)
    found: list[FitSuggestion] = []
    seen: set[str] = set()

    def consider(change: str, desc: str, w2: Workload, n: int) -> bool:
        if change in seen:
            return False
        try:
            total = estimate_memory(w2, n).total_bytes
        except ValueError:
            return False
        if total <= cap:
            seen.add(change)
            found.append(FitSuggestion(desc, w2, total, n, change))
            return True
        return False

    for change, desc, w2, n in cands:  # first fitting option of each kind (smallest change)
        consider(change, desc, w2, n)
    # No single change fits, or only buying more GPUs does: pair checkpointing with the others
    # (checkpointing + a smaller batch often fits the hardware the user already has).
    if w.is_training and all(f.change == "gpus" for f in found):
        base = w.derive(grad_checkpointing=True) if not w.grad_checkpointing else w
        for change, desc, w2, n in _candidates(base, gpus, acc):
            if change == "checkpointing":
                continue
            w3 = w2.derive(grad_checkpointing=True)
            prefix = "" if w.grad_checkpointing else "turn on activation checkpointing and "
            consider("checkpointing+" + change, prefix + desc, w3, n)
    if not w.is_training and "precision" not in seen:  # quantize and split: fewest GPUs per format
        for change, desc, w2, n in cands:
            if change != "precision":
                continue
            for m in (2, 4, 8, 16):
                if m > gpus and consider(f"gpus+{w2.precision}",
                                         f"{desc.split(' (--')[0]} on {m} GPUs (--precision {w2.precision} "
                                         f"--gpus {m} --sharding tensor)",
                                         w2.derive(sharding="tensor", gpus=m), m):
                    break
    order = {"precision": 0, "checkpointing": 1, "optimizer": 2, "master_weights": 3, "lora": 4,
             "qlora": 5, "gpus": 6, "batch": 7, "seq_len": 8}
    found.sort(key=lambda s: (order.get(s.change.split("+")[-1], order.get(s.change.split("+")[0], 9)),
                              s.gpus, s.total_bytes))
    return found[:limit]


def check_fit(workload: Workload, accelerator: "Accelerator", gpus: int | None = None) -> FitResult:
    """Does ``workload`` fit on ``gpus`` × ``accelerator``? If not, what smallest changes make it fit."""
    n = int(gpus or workload.gpus)
    key = (workload, n)
    cached = _FIT_CACHE.get((key, id(accelerator)))
    if cached is not None and cached[0] is accelerator:
        return cached[1]
    mem = estimate_memory(workload, n)
    cap = capacity_bytes(accelerator)
    fits = mem.total_bytes <= cap
    supported, msg = precision_support(workload.precision, accelerator)
    suggestions = [] if fits else _LazySuggestions(lambda: _suggest(workload, n, accelerator, cap))
    if fits:
        message = (f"uses {mem.total_bytes / cal.GiB:.1f} of {cap / cal.GiB:.1f} GiB per GPU "
                   f"({(cap - mem.total_bytes) / cal.GiB:.1f} GiB free)")
    else:
        message = (f"needs {mem.total_bytes / cal.GiB:.1f} GiB per GPU, "
                   f"{accelerator.id} has {cap / cal.GiB:.1f} GiB usable")
    if msg:  # an error when refused, a note when support is undocumented
        message = msg + "; " + message
    res = FitResult(fits=fits, memory=mem, capacity_bytes=cap, headroom_bytes=cap - mem.total_bytes,
                    accelerator=accelerator.id, gpus=n, suggestions=suggestions,
                    precision_supported=supported, message=message,
                    precision_note=msg if supported else "")
    if len(_FIT_CACHE) > 8192:
        _FIT_CACHE.clear()
    _FIT_CACHE[(key, id(accelerator))] = (accelerator, res)
    return res


_FIT_CACHE: dict = {}


class _LazySuggestions(list):
    """A list computed on first use: ranking a catalog checks hundreds of misfits and rarely
    reads their suggestions (each costs a few dozen re-estimates)."""

    __slots__ = ("_make", "_done")

    def __init__(self, make=()):
        super().__init__()
        if callable(make):
            self._make, self._done = make, False
        else:  # an iterable (dataclasses.asdict and copy rebuild lists this way)
            super().extend(make)
            self._make, self._done = None, True

    def __reduce__(self):  # pickles/deep-copies as a plain list
        self._fill()
        return (list, (list(super().__iter__()),))

    def _fill(self) -> None:
        if not self._done:
            self._done = True
            super().extend(self._make())

    def __iter__(self):
        self._fill()
        return super().__iter__()

    def __len__(self):
        self._fill()
        return super().__len__()

    def __getitem__(self, i):
        self._fill()
        return super().__getitem__(i)

    def __bool__(self):
        self._fill()
        return super().__len__() > 0

    def __eq__(self, other):
        self._fill()
        return list(super().__iter__()) == other

    __hash__ = None

    def __repr__(self):
        self._fill()
        return super().__repr__()

# --- serving capacity ----------------------------------------------------------------------------

#: vLLM's default share of device memory an engine may take (gpu_memory_utilization).
SERVING_MEMORY_UTILIZATION = 0.9
#: Tokens in one profiling/prefill chunk of a serving engine (vLLM max_num_batched_tokens class).
SERVING_CHUNK_TOKENS = 8192
#: Sequences sampled at once (vLLM max_num_seqs default 256): their fp32 logits, with the sampler's
#: probability and log-probability copies (3 vocab-sized fp32 tensors per sequence).
SERVING_MAX_SEQS = 256
SERVING_SAMPLER_COPIES = 3


def serving_sequence_tokens(w: Workload) -> int:
    if w.prompt_len is not None:
        return w.prompt_len + (w.gen_len or 0)
    if w.seq_len is not None:
        return w.seq_len
    return min(w.arch.max_position or 4096, 4096)


def kv_capacity(workload: Workload, accelerator: "Accelerator", gpus: int | None = None) -> KVCapacity:
    """KV-cache tokens and concurrent sequences a serving engine fits on ``gpus`` × ``accelerator``.

    As vLLM budgets it: ``capacity × gpu_memory_utilization − weights − non-torch memory −
    activation peak of one prefill chunk`` is the KV pool; tokens = pool / KV bytes per token.
    Checked against vLLM's logged pools on an H100 (field-notes §2.7): Llama-3.1-8B 54.6 GiB here
    vs 54.2 GiB (58.11 at utilization 0.95), Qwen2.5-7B 55.1 vs 54.6; Llama-3.1-70B fp8 on one
    80 GB GPU leaves a few thousand tokens ("up to 4k context", LambdaLabs vLLM report).
    Data-parallel replicas add up; tensor parallel splits KV heads across GPUs.
    """
    n = int(gpus or workload.gpus)
    w = workload
    arch = w.arch
    pc = param_counts(arch)
    dp, tp, shard = _split(w if w.sharding != "fsdp" else w.derive(sharding="data"), n)
    act = _act_bytes(w)
    weights = _weight_bytes(w.derive(kind="inference") if w.is_training else w, pc) / tp
    # vLLM measures from a baseline taken after CUDA init, so the driver reserve and the context
    # are outside its budget; what it calls non-torch memory is measured separately.
    non_torch = cal.SERVING_NON_TORCH_BYTES + (cal.COMM_BUFFERS_BYTES if tp > 1 else 0)
    activation = (_forward_transient(arch, SERVING_CHUNK_TOKENS, act, tp) * (1 + cal.ALLOCATOR_SLACK_FORWARD)
                  + SERVING_SAMPLER_COPIES * SERVING_MAX_SEQS * arch.vocab * 4 / tp
                  + cal.CUBLAS_WORKSPACE_BYTES)
    budget = accelerator.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION * SERVING_MEMORY_UTILIZATION
    free = budget - non_torch - weights - activation
    seq = serving_sequence_tokens(w)
    per_tok = _kv_bytes_per_token(arch, w, tp, seq)
    if free <= 0:
        return KVCapacity(0, 0, 0, int(per_tok), seq)
    tokens_one = int(free // per_tok)
    return KVCapacity(tokens=tokens_one * dp, concurrent_sequences=(tokens_one // seq) * dp,
                      free_bytes=int(free) * dp, bytes_per_token=int(per_tok), sequence_tokens=seq)


# --- everything at once ----------------------------------------------------------------------------

_SIZE_CACHE: dict = {}


def size_workload(workload: Workload, accelerator: "Accelerator | None" = None,
                  gpus: int | None = None) -> SizingResult:
    """Memory, fit (None without an accelerator), serving KV capacity and speed of ``workload``.

    Cached per (workload, accelerator object, gpus): cheap to call for every offer of a catalog.
    """
    n = int(gpus or workload.gpus)
    key = (workload, id(accelerator), n)
    hit = _SIZE_CACHE.get(key)
    if hit is not None and hit[0] is accelerator:
        return hit[1]
    mem = estimate_memory(workload, n)
    fit = kv = thr = None
    if accelerator is not None:
        fit = check_fit(workload, accelerator, n)
        if not workload.is_training:
            kv = kv_capacity(workload, accelerator, n)
        from fleet_tui.core.perf import estimate_throughput

        thr = estimate_throughput(workload, accelerator, n)
    res = SizingResult(workload=workload, memory=mem, fit=fit, kv_capacity=kv, throughput=thr,
                       accelerator=accelerator.id if accelerator is not None else None, gpus=n)
    if len(_SIZE_CACHE) > 8192:
        _SIZE_CACHE.clear()
    _SIZE_CACHE[key] = (accelerator, res)
    return res


def clear_caches() -> None:
    _estimate.cache_clear()
    _FIT_CACHE.clear()
    _SIZE_CACHE.clear()
