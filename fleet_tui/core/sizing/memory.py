"""Peak memory per GPU of a workload, split by component, as NVML would report it.

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
weights, gradients and optimizer states by the GPU count and adds the gathered weights of two layers
(``--framework deepspeed``: DeepSpeed ZeRO-3's live-parameter budget and gradient bucket, :mod:`.zero3`);
``tensor`` divides weights, activations, logits (vocab-parallel) and KV heads (at least one per GPU).
More than one GPU adds NCCL buffers (and DDP's gradient buckets for ``data`` training).

Constants with physical meaning and their sources are in :mod:`fleet_tui.core.calibration`.

Measured error
--------------
Against the 23 H200 runs in ``tests/fixtures/h200/sizing_truth.json`` (weights-only, prefill,
generation, AMP and pure-bf16 full training with and without recompute, LoRA) the median absolute
error of the NVML peak is 1.0 % and the maximum 4.7 % (``tests/core/sizing/test_sizing_accuracy.py``
prints the table). Calibration is a handful of constants (driver reserve and CUDA context as
measured, lazily loaded kernels, three allocator-slack fractions by allocation pattern), not per-row
factors. Known gaps: the Llama-2-7B fp32-master recompute run keeps ~10 GB more in the allocator
pool than any transient explains (we under-predict it by 2 %); eager attention (which materializes
the score matrix, ``attention = "eager"``) is counted tensor by tensor but no measured run checks it;
multi-head latent attention is not modelled (such configs are refused).

Speed of the function: results are cached per (workload, gpus) in :mod:`fleet_tui.core.caches`
(``Workload`` is frozen and hashable), so ranking a whole catalog costs one estimate per GPU count.
"""


from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.errors import render_fields
from fleet_tui.core.footprint import (
    Layout,
    activation_bytes,
    forward_transient,
    kv_bytes_per_token,
    lora_params,
    parallel_layout,
    sequence_state_bytes,
    stack_lengths,
    weight_bytes,
)
from fleet_tui.core.modelspec import ModelArch, ParamCounts, param_counts
from fleet_tui.core.perf.engines import engine_profile, engine_reserve
from fleet_tui.core.records import record
from fleet_tui.core.sizing.activations import (
    adafactor_state_elems,
    attention_mask_bytes,
    attention_note,
    autocast_fp32,
    residual_bytes,
    stack_activations,
)
from fleet_tui.core.sizing.kv_pool import serves_with_engine, serving_sequence_tokens
from fleet_tui.core.sizing.stacks import (
    StackTerms,
    adapter_bytes,
    apply_stack,
    compile_factor,
    distributed_optimizer,
    loss_bytes_per_vocab_token,
    selective_kept,
)
from fleet_tui.core.workload import DEFAULT_TRAIN_SEQ_LEN, Workload

if TYPE_CHECKING:  # imported only for DeepSpeed at run time
    from fleet_tui.core.sizing.zero3 import Zero3Footprint

COMPONENT_ORDER = (
    "weights", "weight_copies", "gradients", "optimizer_states", "activations", "logits",
    "kv_cache", "workspace", "comm_buffers", "non_torch", "cuda_graphs", "allocator_slack", "runtime_kernels",
    "cuda_context", "driver_reserve", "outside_budget",
)
COMPONENT_HELP = {
    "weights": "model parameters as stored (quantized formats include their scales)",
    "weight_copies": "weight copies: AMP autocast cache, FSDP/ZeRO-3 gathered weights, QLoRA dequant",
    "gradients": "parameter gradients (trainable parameters only)",
    "optimizer_states": "optimizer moments (AdamW m and v, 8-bit states, momentum, factored v)",
    "activations": "tensors kept for backward (training) or live layer transients (inference)",
    "logits": "vocabulary-sized outputs; training adds the fp32 loss path",
    "kv_cache": "attention keys and values of every layer (GQA-aware; MoE experts do not add KV)",
    "workspace": "cuBLAS workspace and other kernel scratch",
    "comm_buffers": "NCCL buffers, DDP/ZeRO gradient buckets",
    "allocator_slack": "PyTorch caching allocator: freed blocks kept reserved (fragmentation)",
    "runtime_kernels": "kernel images and library handles loaded while running",
    "cuda_context": "the process' CUDA context",
    "driver_reserve": "memory the driver holds before any process starts",
    "non_torch": "serving engine: CUDA context, NCCL and custom all-reduce buffers (outside PyTorch)",
    "cuda_graphs": "serving engine: memory its captured CUDA graphs keep",
    "outside_budget": "serving engine: the share of the device it leaves outside its budget "
                      "(1 - gpu_memory_utilization, or the fraction it keeps free)",
}


@record
class MemoryBreakdown:
    """Peak device memory per GPU, as NVML would report it, split by component (bytes)."""

    total_bytes: int
    breakdown: dict[str, int]
    per_gpu: bool = True
    phase: str = ""  # which moment of the run is the peak
    gpus: int = 1
    # sentences in which an input field appears as ``{field}`` (see :meth:`notes`)
    assumptions: tuple[str, ...] = ()

    @property
    def total_gib(self) -> float:
        return self.total_bytes / cal.GiB

    def notes(self, label: Callable[[str], str]) -> list[str]:
        """The assumptions with each input field shown as ``label(field)`` (a flag, a form label)."""
        return [render_fields(a, label) for a in self.assumptions]


@record
class _Phase:
    """One moment of a run (a prefill, the end of generation, a forward pass) and its memory parts."""

    name: str
    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())


# --- the estimate --------------------------------------------------------------------------------

def estimate_memory(workload: Workload, gpus: int | None = None) -> MemoryBreakdown:
    """Peak memory per GPU of ``workload`` on ``gpus`` devices (default ``workload.gpus``)."""
    n = int(gpus or workload.gpus)
    return _MEMORY.get_or_compute((workload, n), lambda: _estimate(workload, n))


_MEMORY = caches.memo("sizing.memory", 4096)


@dataclass(slots=True)
class _Setup:
    """What every phase of one workload on one layout shares: the layout, the per-device batch and
    the persistent parts before the workload kind adds its own."""

    w: Workload
    arch: ModelArch
    pc: ParamCounts
    lay: Layout
    act: int  # bytes per activation element
    b_gpu: int  # sequences per data-parallel rank
    weights: float  # weight bytes per device
    fsdp_gather: float  # parameters gathered for the layer being computed (FSDP / ZeRO-3)
    zero3: Zero3Footprint | None
    comm: float  # NCCL buffers (training and sharded inference only)
    assumptions: list[str]  # in the order the report prints them

    @property
    def split(self) -> int:
        return self.lay.tp * self.lay.pp  # devices one copy of the model is cut into


@dataclass(slots=True)
class _Run:
    """The phases of a run, how much of each phase's transient memory the allocator keeps cached,
    and which parts outlive every phase (not transient)."""

    phases: list[_Phase]
    slack_frac: float
    persistent: tuple[str, ...] = ("weights",)
    comm: float = 0.0  # extra communication buffers (DDP buckets, ZeRO-3 reduce bucket)
    micro: int | None = None  # training: sequences per forward, when below the rank's batch


def _estimate(w: Workload, gpus: int) -> MemoryBreakdown:
    if serves_with_engine(w):
        return _engine_start(w, gpus)
    s = _setup(w, gpus)
    if w.is_training:
        run = _training_run(s)
    elif w.gen_len is not None and w.prompt_len is not None:
        run = _generation_run(s)
    elif w.seq_len is not None:
        run = _forward_run(s)
    else:
        run = _loaded_run(s)
    if not w.is_training:
        s.assumptions.append(attention_note(s.arch))
    return _peak(s, run, gpus)


def _setup(w: Workload, gpus: int) -> _Setup:
    arch = w.arch
    pc = param_counts(arch)
    lay = parallel_layout(w, gpus)
    dp, tp, shard = lay.dp, lay.tp, lay.weight_shards
    split = tp * lay.pp
    assumptions: list[str] = []
    if lay.idle:
        assumptions.append(f"global batch {w.batch} keeps {lay.devices} of {gpus} devices busy "
                           f"({lay.idle} idle): a data-parallel rank needs at least one micro-batch")
    if gpus > 1 and w.batch < dp:
        assumptions.append(f"batch {w.batch} < {dp} data-parallel replicas: each GPU still holds one sequence")
    fsdp_gather = 0.0
    if shard > 1:
        # two layers' parameters gathered (the current one and the prefetched next), in 16-bit, or
        # in NF4 for QLoRA (the quantized base is what is sharded and gathered)
        layer_params = pc.attention_per_layer + pc.mlp_per_layer
        gathered = cal.WEIGHT_BYTES["nf4"] if w.kind == "qlora" else 2
        fsdp_gather = (2 * layer_params * gathered / tp
                       + (pc.embedding if w.is_training else 0) * 2 / (shard * split))
    zero3 = None
    if w.framework == "deepspeed" and w.is_training and (shard > 1 or "params" in w.offload):
        # DeepSpeed's coordinator, not FSDP's two layers: its live-parameter budget (see .zero3)
        from fleet_tui.core.sizing.zero3 import zero3_footprint  # only for DeepSpeed: not imported by default

        gathered = cal.WEIGHT_BYTES["nf4"] if w.kind == "qlora" else (4.0 if w.precision == "fp32" else 2.0)
        adapters_b = lora_params(arch, w) * adapter_bytes(w) if w.is_adapter else 0.0
        zero3 = zero3_footprint(w, pc, tp, gathered, adapter_bytes(w) if w.is_adapter else gathered,
                                pc.norms * gathered + adapters_b)
        fsdp_gather = zero3.gathered_bytes
        assumptions.append(zero3.note)
    # independent inference replicas do not talk to each other; everything else does
    comm = cal.COMM_BUFFERS_BYTES if gpus > 1 and (w.is_training or split > 1 or shard > 1) else 0
    return _Setup(w=w, arch=arch, pc=pc, lay=lay, act=activation_bytes(w), b_gpu=math.ceil(w.batch / dp),
                  weights=weight_bytes(w, pc) / (split * shard), fsdp_gather=fsdp_gather, zero3=zero3,
                  comm=comm, assumptions=assumptions)


def _generation_run(s: _Setup) -> _Run:
    """Hugging Face ``generate``: the prompt's forward, then the cache grown to the last token."""
    w, arch, act, b_gpu = s.w, s.arch, s.act, s.b_gpu
    tp, pp = s.lay.tp, s.lay.pp
    prompt_len, gen_len = w.prompt_len or 0, w.gen_len or 0  # both given (the caller checks)
    ctx = prompt_len + gen_len
    prompt_tok = b_gpu * prompt_len
    state = b_gpu * sequence_state_bytes(arch, w, tp) / pp  # hybrid models' linear layers
    kv_prompt = b_gpu * prompt_len * kv_bytes_per_token(arch, w, tp, prompt_len) / pp + state
    kv_end = b_gpu * ctx * kv_bytes_per_token(arch, w, tp, ctx) / pp + state
    last_logits = b_gpu * arch.vocab * (act + 4) / tp  # last position, plus the fp32 copy generate takes
    ws = cal.CUBLAS_WORKSPACE_BYTES
    masks = attention_mask_bytes(arch, w, b_gpu, *((prompt_len, 0) if arch.is_encoder_decoder
                                                   else (0, prompt_len)))
    phases = [
        _Phase("prompt forward (prefill)", {
            "weights": s.weights, "weight_copies": s.fsdp_gather, "kv_cache": kv_prompt,
            "activations": forward_transient(arch, prompt_tok, act, tp, prompt_len) + masks,
            "logits": last_logits, "workspace": ws}),
        _Phase("end of generation", {
            "weights": s.weights, "weight_copies": s.fsdp_gather, "kv_cache": kv_end,
            # dynamic cache: torch.cat re-allocates one layer's K and V per step
            "activations": kv_end / (arch.decoder_layers or arch.layers) + b_gpu * arch.hidden * act * 4,
            "logits": last_logits, "workspace": ws}),
    ]
    s.assumptions.append("generation memory as Hugging Face generate with a dynamic KV cache; "
                         "serving engines pre-allocate a KV pool instead (see kv capacity)")
    return _Run(phases, cal.ALLOCATOR_SLACK_FORWARD)


def _forward_run(s: _Setup) -> _Run:
    """One forward pass returning logits at every position (encoder-decoder: the encoder reads the
    source, the decoder's cross-attention caches its K/V and the target's self-attention K/V)."""
    w, arch, act, b_gpu = s.w, s.arch, s.act, s.b_gpu
    tp, pp = s.lay.tp, s.lay.pp
    seq_len = w.seq_len or 0  # given (the caller checks)
    src, tgt = stack_lengths(w, seq_len)
    tokens = b_gpu * tgt
    widest = max(src, tgt)
    masks = attention_mask_bytes(arch, w, b_gpu, src, tgt)
    kv = (b_gpu * (src + tgt) * kv_bytes_per_token(arch, w, tp, seq_len)
          + b_gpu * sequence_state_bytes(arch, w, tp)) / pp
    # soft-capping (Gemma-2) divides, tanh's and multiplies: two logits-sized tensors live
    capped = 2 if arch.logit_softcap else 1
    logits = tokens * (capped * arch.vocab * act / tp + arch.hidden * act)
    ws = cal.CUBLAS_WORKSPACE_BYTES
    phases = [
        _Phase("forward pass (output logits)", {
            "weights": s.weights, "weight_copies": s.fsdp_gather, "kv_cache": kv,
            "activations": masks, "logits": logits, "workspace": ws}),
        _Phase("forward pass (widest layer)", {
            "weights": s.weights, "weight_copies": s.fsdp_gather, "kv_cache": kv,
            "activations": forward_transient(arch, b_gpu * widest, act, tp, widest) + masks,
            "workspace": ws}),
    ]
    s.assumptions.append("one forward pass returning logits at every position (16-bit), "
                         "KV cache kept (use_cache=True)")
    return _Run(phases, cal.ALLOCATOR_SLACK_FORWARD)


def _loaded_run(s: _Setup) -> _Run:
    """The model loaded and nothing run."""
    w, arch = s.w, s.arch
    phase = _Phase("model loaded", {"weights": s.weights, "weight_copies": s.fsdp_gather})
    if arch.tied_embeddings and w.precision in ("bf16", "fp16", "fp32"):
        # Hugging Face builds the output head, then ties it to the embedding: the freed vocab ×
        # hidden block stays in the caching allocator's pool (measured on both tied models of the
        # H200 set; later allocations reuse it)
        phase.parts["allocator_slack"] = arch.vocab * arch.hidden * s.act / (s.split * s.lay.weight_shards)
        s.assumptions.append("model built by Hugging Face: the untied output head it allocates "
                             "before tying stays cached until reused")
    return _Run([phase], 0.0)


def _trained_states(s: _Setup) -> tuple[float, float, float, float]:
    """Weights, gradients and optimizer states per device for the trainable parameters, and the
    weight copies QLoRA adds (the de-quantized matrix being multiplied)."""
    w, arch, pc, lay = s.w, s.arch, s.pc, s.lay
    split = s.split
    weights, extra_copies = s.weights, 0.0
    trainable = lora_params(arch, w) if w.is_adapter else pc.total
    if w.is_adapter:
        adapters = trainable / (split * lay.weight_shards)
        ad_b = adapter_bytes(w)
        weights += adapters * ad_b
        grads = adapters * ad_b
        if w.optimizer == "adafactor":  # factored: (rows + cols) per r × d matrix ≈ 4 B · d
            opt = adapters * 4.0 / w.lora_rank
        else:
            table = cal.OPTIMIZER_BYTES_FP32 if ad_b == 4 else cal.OPTIMIZER_BYTES_BF16
            opt = adapters * table[w.optimizer]
        s.assumptions.append(f"LoRA r={w.lora_rank} on {','.join(w.lora_targets)}: "
                             f"{trainable / 1e6:.1f}M trainable parameters in "
                             + ("fp32 (PEFT default)" if ad_b == 4 else "bf16 (torchtune)"))
        if w.kind == "qlora":
            extra_copies = max(arch.hidden * arch.intermediate, arch.hidden * arch.q_dim) * s.act
            s.assumptions.append("QLoRA base in NF4 with double quantization (4.127 bits/param)")
        return weights, grads, opt, extra_copies
    per_shard = trainable / (split * lay.grad_shards)
    per_opt_shard = trainable / (split * lay.optimizer_shards)
    amp = w.master_weights == "fp32" and w.precision != "fp32"
    grad_b = 4.0 if (amp or w.precision == "fp32") else float(s.act)
    grads = per_shard * grad_b
    if w.optimizer == "adafactor":
        opt = adafactor_state_elems(arch, pc) * 4.0 / (split * lay.optimizer_shards)
    else:
        table = cal.OPTIMIZER_BYTES_FP32 if grad_b == 4.0 else cal.OPTIMIZER_BYTES_BF16
        opt = per_opt_shard * table[w.optimizer]
    if amp and lay.zero < 3 and distributed_optimizer(w):
        # Megatron-Core: 16-bit parameters, an fp32 gradient buffer (also the DDP buckets), fp32
        # master weights and Adam moments sharded over the data-parallel ranks
        shards = split * lay.optimizer_shards
        weights = trainable * 2.0 / split + trainable * 4.0 / shards
        grads = trainable * 4.0 / split
        opt = trainable * cal.OPTIMIZER_BYTES_FP32.get(w.optimizer, 8.0) / shards
        s.assumptions.append("Megatron mixed precision with the distributed optimizer: bf16 parameters, "
                             "fp32 gradient buffer, fp32 master weights and optimizer states sharded "
                             f"{lay.optimizer_shards} ways")
    elif amp and not autocast_fp32(w):
        s.assumptions.append("FSDP mixed precision: fp32 parameters, gradients and optimizer states "
                             "sharded; forward and backward on bf16 copies (param_dtype=bf16)")
    elif amp:
        s.assumptions.append("mixed precision (PyTorch AMP): fp32 parameters, gradients and "
                             "optimizer states; forward under autocast")
    elif w.precision != "fp32":
        s.assumptions.append(f"pure {w.precision}: parameters, gradients and optimizer states "
                             f"in {w.precision}")
    return weights, grads, opt, extra_copies


def _training_run(s: _Setup) -> _Run:  # long: the four moments of a step share one set of terms
    """A training step's moments: forward end, the loss's backward start, a layer recomputed
    midway through backward (checkpointing), and the optimizer step."""
    w, arch, pc, lay, act = s.w, s.arch, s.pc, s.lay, s.act
    tp, pp, dp, shard, split = lay.tp, lay.pp, lay.dp, lay.weight_shards, s.split
    weights, grads, opt, extra_copies = _trained_states(s)
    fsdp_gather = s.fsdp_gather + extra_copies
    seq_len = w.seq_len or DEFAULT_TRAIN_SEQ_LEN
    if w.seq_len is None:
        s.assumptions.append(f"no {{seq_len}} given: {DEFAULT_TRAIN_SEQ_LEN}-token sequences assumed")
    # one micro-batch per forward; a pipeline stage keeps min(micro-batches, stages) of them in
    # flight over its layers / pp layers (1F1B, Narayanan et al. arXiv:2104.04473)
    micro = min(s.b_gpu, lay.micro_batch)
    in_flight = min(math.ceil(s.b_gpu / micro), pp) / pp
    # autocast (PyTorch AMP) only: FSDP/Megatron mixed precision computes on 16-bit copies
    amp = autocast_fp32(w) and w.precision not in ("fp32",) and not w.is_adapter
    # context parallel: each rank keeps the activations of its seq / cp tokens (ring attention)
    stacks = stack_activations(arch, w, micro, max(1, seq_len // lay.cp))
    tokens = stacks.head_tokens  # through the output head (encoder-decoder: the target)
    if arch.is_encoder_decoder:
        src, tgt = stack_lengths(w, seq_len)
        s.assumptions.append(f"encoder-decoder: encoder over {src} source tokens, decoder over {tgt} target "
                             "tokens per sequence, loss on the target"
                             + ("" if w.target_len else " (no {target_len} given: as long as the source)"))
    fused = compile_factor(w) / tp
    head_in = tokens * arch.hidden * (10 if amp else 8) / tp  # final norm + output-head input
    if w.grad_checkpointing or w.selective_checkpointing:
        kept = in_flight * stacks.layer_inputs * residual_bytes(w) / tp
        if w.selective_checkpointing and not w.grad_checkpointing:
            kept = selective_kept(w, kept, in_flight * stacks.saved * fused)
        acts = kept + head_in
        # backward recomputes one layer at a time: its activations live once more
        recompute = stacks.widest_layer * fused
        slack_frac = cal.ALLOCATOR_SLACK_RECOMPUTE
    else:
        acts = in_flight * stacks.saved * fused + head_in + stacks.masks
        recompute = 0.0
        slack_frac = cal.ALLOCATOR_SLACK_TRAINING
    # soft-capped logits (Gemma-2): tanh keeps its 16-bit output (+2 B), and backward forms a
    # 16-bit gradient through the cap (+2 B)
    cap_fwd, cap_bwd = (2 * act, 4 * act) if arch.logit_softcap else (0, 0)
    loss_bwd, loss_fwd = loss_bytes_per_vocab_token(w)
    logits_bwd = tokens * arch.vocab * (loss_bwd + cap_bwd) / tp
    logits_fwd = tokens * arch.vocab * (loss_fwd + cap_fwd) / tp
    head_params = pc.lm_head or pc.embedding
    if amp:
        cast_all = 2.0 * pc.matmul_total / split if shard == 1 else 0.0
        cast_bwd = cast_all if not w.grad_checkpointing else 2.0 * head_params / split
    else:
        cast_all = cast_bwd = 0.0
    zero3 = s.zero3
    stack = apply_stack(w, StackTerms(weights=weights, grads=grads, opt=opt, acts=acts,
                                      layer_weights=(pc.attention_per_layer + pc.mlp_per_layer)
                                      * cal.WEIGHT_BYTES.get(w.precision, 2.0) / tp,
                                      layer_acts=stacks.widest_layer * fused,
                                      largest_grad=(pc.lm_head or pc.embedding)
                                      * (4.0 if amp else float(act)) / (tp * shard),
                                      persistent=zero3.persistent_bytes if zero3 else 0.0))
    weights, grads, opt, acts = stack.weights, stack.grads, stack.opt, stack.acts
    s.assumptions.extend(stack.notes)
    # DDP's gradient buckets (Megatron's distributed optimizer reduces from the gradient buffer itself)
    ddp = grads if (lay.zero < 2 and dp > 1 and not w.is_adapter and not distributed_optimizer(w)) else 0.0
    base = {"weights": weights, "optimizer_states": opt}
    if (w.master_weights == "fp32" and w.precision != "fp32" and lay.zero < 3 and distributed_optimizer(w)
            and not w.is_adapter):
        base["gradients"] = grads  # Megatron's fp32 gradient buffer is allocated for the whole run
    phases = [
        _Phase("forward end", {**base, "weight_copies": cast_all + fsdp_gather,
                               "activations": acts, "logits": logits_fwd}),
        _Phase("backward start (loss)", {**base, "weight_copies": cast_bwd + fsdp_gather,
                                         "activations": acts, "logits": logits_bwd}),
    ]
    if recompute:
        # midway through backward: about half the gradients exist, half the layer inputs are
        # freed, and one layer's activations and their gradients are live
        phases.append(_Phase("backward (recomputing a layer)", {
            **base, "weight_copies": fsdp_gather, "gradients": grads * 0.5,
            "activations": acts * 0.5 + 2 * recompute}))
    if not w.optimizer_in_backward:
        phases.append(_Phase("optimizer step", {**base, "gradients": grads, "weight_copies": 0.0}))
    if w.grad_checkpointing:
        s.assumptions.append("activation checkpointing: each decoder layer's input kept, the layer "
                             "recomputed in backward (Hugging Face gradient_checkpointing_enable)")
    s.assumptions.append(attention_note(arch))
    s.assumptions.append("loss over chunks of the sequence: bf16 logits kept, one chunk up-cast to fp32 at a time"
                         if w.chunked_loss else
                         "loss as Hugging Face computes it: logits up-cast to fp32 for cross-entropy")
    return _Run(phases, slack_frac, ("weights", "optimizer_states", "gradients"),
                comm=ddp + (zero3.reduce_bucket_bytes if zero3 else 0.0), micro=micro)


def _peak(s: _Setup, run: _Run, gpus: int) -> MemoryBreakdown:
    """The largest phase, plus the allocator's cached share of the largest transient, the
    communication buffers and the fixed per-process memory."""
    w, lay = s.w, s.lay
    peak = max(run.phases, key=lambda p: p.total)
    transient = max(p.total - sum(p.parts.get(k, 0.0) for k in run.persistent) for p in run.phases)
    parts: dict[str, float] = {k: 0.0 for k in COMPONENT_ORDER}
    for k, v in peak.parts.items():
        parts[k] += v
    parts["allocator_slack"] += run.slack_frac * transient
    parts["comm_buffers"] = s.comm + run.comm
    parts.update({
        "driver_reserve": cal.DRIVER_RESERVE_BYTES,
        "cuda_context": cal.CUDA_CONTEXT_BYTES,
        "runtime_kernels": cal.RUNTIME_KERNELS_TRAINING_BYTES if w.is_training else cal.RUNTIME_KERNELS_INFERENCE_BYTES,
    })
    assumptions = s.assumptions
    if gpus > 1:
        split_note = f": global batch {w.batch} split {lay.dp} ways" if lay.dp > 1 else ""
        if w.tp is None and w.pp is None and w.zero is None:
            assumptions.append(f"{gpus} GPUs, {w.sharding} sharding" + split_note)
        else:
            assumptions.append(f"{gpus} GPUs as {lay.label()}" + split_note)
        if run.micro is not None and run.micro < s.b_gpu:
            assumptions.append(f"micro-batch {run.micro} with {math.ceil(s.b_gpu / run.micro)} gradient-accumulation "
                               f"steps per optimizer step")
    breakdown = {k: int(round(parts[k])) for k in COMPONENT_ORDER if parts[k] > 0}
    return MemoryBreakdown(total_bytes=sum(breakdown.values()), breakdown=breakdown, per_gpu=True,
                           phase=peak.name, gpus=gpus, assumptions=tuple(dict.fromkeys(assumptions)))


def _engine_start(w: Workload, gpus: int) -> MemoryBreakdown:
    """The least memory per GPU on which a serving engine (vllm, trtllm, sglang) starts: its
    weights, profile-run activation peak, non-torch memory and CUDA graphs, plus the KV cache of
    one sequence of the context (prompt + generated tokens, as ``--max-model-len``), inside its
    budget; ``outside_budget`` is what its budget rule leaves unused at that size. The batch does
    not move it: a larger batch queues (:func:`fleet_tui.core.sizing.kv_pool.engine_fit`). Links
    are taken as NVLink-class under tensor parallelism (their buffers charged; PCIe boards keep less)."""
    e = engine_profile(w)
    seq = serving_sequence_tokens(w)
    r = engine_reserve(w, gpus, seq, fabric=True)
    one_seq = (seq * kv_bytes_per_token(w.arch, w, r.tp, seq) + sequence_state_bytes(w.arch, w, r.tp)) / r.pp
    need = r.total_for_pool(one_seq)
    parts = {"weights": r.weights, "activations": r.activation_peak, "kv_cache": one_seq,
             "non_torch": r.non_torch, "cuda_graphs": r.cuda_graphs}
    parts["outside_budget"] = max(0.0, need - sum(parts.values()))
    breakdown = {k: int(round(parts[k])) for k in COMPONENT_ORDER if parts.get(k, 0) > 0}
    util = f"{r.utilization:g}"
    knob = {"vllm": "gpu_memory_utilization", "trtllm": "free_gpu_memory_fraction",
            "sglang": "mem_fraction_static"}.get(e.id, "its memory share")
    notes = (f"memory as {e.id} reserves it: {knob} {util}; the pool must hold one sequence of "
             f"{seq:,} tokens (prompt + generated) to start; requests beyond what the pool and the "
             "running-request limit hold wait in the queue",
             f"profile run over {w.max_num_batched_tokens or e.batched_tokens:,} tokens a step "
             f"({{max_num_batched_tokens}}, chunked prefill): {r.activation_peak / cal.GiB:.2f} GiB "
             "activation peak",
             attention_note(w.arch))
    return MemoryBreakdown(total_bytes=sum(breakdown.values()), breakdown=breakdown, per_gpu=True,
                           phase=f"{e.id} start-up (weights, profile run, one sequence)", gpus=gpus,
                           assumptions=notes)
