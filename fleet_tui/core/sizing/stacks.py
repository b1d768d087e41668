"""Training stacks: what a framework preset assumes and what each memory switch changes.

``--framework hf`` (default) is what :mod:`.memory` was measured on: Transformers + PEFT, PyTorch AMP
(fp32 master weights) for full fine-tuning, LoRA adapters in fp32, the loss on fp32 logits of the
whole sequence. ``--framework torchtune`` is torchtune's recipes: pure bf16 (parameters, gradients,
optimizer states and LoRA adapters in bf16), ``CEWithChunkedOutputLoss`` (chunked loss),
activation checkpointing on, FSDP2 across several GPUs. The switches apply to either stack:

* ``chunked_loss``: the output projection and cross-entropy run over 8 chunks of the sequence;
  the bf16 logits are kept (2 B per vocab entry per token) and one chunk at a time is up-cast to
  fp32 for the loss and its gradient (torchtune ``CEWithChunkedOutputLoss``, num_output_chunks 8).
* ``optimizer_in_backward``: each parameter is stepped (and its gradient freed) as soon as its
  gradient exists, so no full gradient buffer and no separate optimizer-step peak remain; the
  largest single gradient (the output head) is the most that is live.
* ``offload`` (combinable): ``activations`` — saved activations go to CPU memory as they are
  produced and come back in backward (torchtune ``enable_activation_offloading``, DeepSpeed
  activation offload), two layers' worth stay on the GPU; ``optimizer`` — optimizer states and the
  update on the CPU (DeepSpeed ZeRO-Offload, torchtune ``fsdp_cpu_offload`` with a fused CPU step),
  gradients stream to the CPU bucket by bucket; ``params`` — parameters live in CPU memory and two
  layers at a time are on the GPU (FSDP ``CPUOffload(offload_params=True)``); under
  ``--framework deepspeed`` (ZeRO-3 ``offload_param``) only the persistent small parameters stay and
  the gathered ones follow DeepSpeed's live-parameter budget (:mod:`.zero3`).
* ``compile``: ``torch.compile`` fuses the norms, rotary, SwiGLU and residual adds, so their
  intermediates are not saved: :data:`COMPILE_ACTIVATION_FACTOR` of the eager per-layer activations.
* ``selective_checkpointing``: every other layer checkpointed (torchtune ``ac_mode: selective``,
  ``ac_option: 2``); handled in :mod:`.memory`.
``--framework unsloth`` is Unsloth: fused Triton kernels (:data:`UNSLOTH_ACTIVATION_FACTOR`), its
gradient checkpointing with the saved inputs offloaded to CPU memory, a fused cross-entropy that
never stores the logits, and 8-bit AdamW unless ``--optimizer`` says otherwise (``optim =
"adamw_8bit"`` in every training example of Unsloth's README, the same file as its context tables).

* ``paged_adamw8bit``: bitsandbytes' 8-bit AdamW in unified memory; states page to the CPU only
  when the GPU runs out, so while it fits its footprint is adamw8bit's.
"""

from __future__ import annotations

import dataclasses

from fleet_tui.core import calibration as cal
from fleet_tui.core.records import record
from fleet_tui.core.workload import Workload

#: Share of the eager per-layer saved activations left with torch.compile: torchtune's
#: "Optimization flags" table (Llama-3.2-3B, A100, packed 2×4096) drops from 60.0 to 51.0 GiB when
#: compile is added; with weights+grads+AdamW (3.2B × 8 B = 24 GiB pure bf16) and the loss
#: unchanged that is ~0.75 of the activations (tune row torchtune-optflags-llama32-3b-compile).
COMPILE_ACTIVATION_FACTOR = 0.75

#: Chunks of torchtune's CEWithChunkedOutputLoss (num_output_chunks default 8).
LOSS_CHUNKS = 8

#: Share of a layer's saved activations torchtitan's op-level selective checkpointing keeps
#: (``activation_checkpoint.mode = "selective"``, ``selective_ac_option = "op"``): its save list
#: keeps the outputs of matrix multiplies (every other one: "to balance memory") and of flash
#: attention, and recomputes norms, rotary and pointwise ops. For a Llama layer (q, k, v, o, gate,
#: up, down outputs and the attention output) that is about a fifth of the bytes eager autograd saves.
OP_SAC_SHARE = 0.2

#: Layers' worth of offloaded tensors kept on the GPU (the one in use and the one being prefetched).
OFFLOAD_LAYERS_ON_GPU = 2


def distributed_optimizer(w: Workload) -> bool:
    """Megatron-Core's distributed optimizer (``--use-distributed-optimizer``; NeMo, NeuronX):
    16-bit parameters with fp32 main gradients, fp32 master weights and Adam moments sharded over the
    data-parallel (and context-parallel) ranks: 6 + 12/d bytes per parameter (Megatron-LM
    docs/source/api-guide/dist_optimizer.md)."""
    return w.framework in ("megatron", "nemo", "neuronx")


def selective_kept(w: Workload, layer_inputs: float, saved: float) -> float:
    """Activations kept under selective checkpointing, given each layer's input (``layer_inputs``,
    what full checkpointing keeps) and what eager autograd saves (``saved``): torchtune's
    ``ac_option: 2`` checkpoints every other layer; torchtitan's op-level policy keeps the layer
    inputs plus :data:`OP_SAC_SHARE` of the rest; Megatron/NeMo's selective recompute only redoes
    the attention core, which flash attention already does not store (everything else is kept)."""
    if w.framework in ("torchtitan", "neuronx"):
        return layer_inputs + OP_SAC_SHARE * saved
    if w.framework in ("megatron", "nemo"):
        return saved
    return layer_inputs / 2 + saved / 2


def adapter_bytes(w: Workload) -> int:
    """Bytes per LoRA adapter parameter: fp32 under PEFT (its default), bf16 under torchtune."""
    return 2 if w.framework == "torchtune" else 4


#: Share of the Hugging Face per-layer activations Unsloth's fused kernels (LoRA MLP/attention,
#: RoPE, RMSNorm in Triton) keep, fitted on the tune rows of its context-length table
#: (unsloth-maxctx-llama318b-12gb/-24gb, unsloth-maxctx-llama3370b-80gb; bench/bench_validation.py),
#: mean |log error| over a 0.002 grid: 0.168 (0.0143), with the preset's 8-bit AdamW. With fp32
#: AdamW states it had been 0.16, and the fixed memory of the 70B run read ~2.5 GB too high (its
#: 48 GB row -31 %, the 8B's 8 GB row "never fits").
UNSLOTH_ACTIVATION_FACTOR = 0.168


#: Share of the eager per-layer activations Megatron-Core with Transformer Engine keeps: its fused
#: LayerNorm+Linear and SwiGLU save the norm input, the normalized input once, q/k/v, the attention
#: output, the fc1 output and the SwiGLU output (8h + 6q + 4kv + 6f bytes per token with bf16), where
#: eager autograd saves fp32 norm copies and every MLP intermediate (16h + 6q + 4kv + 12f,
#: activations.train_act_per_token_layer): 0.55 for Llama 3 70B and 405B shapes alike
#: (Korthikanti et al., arXiv:2205.05198 §4, counts the same tensors for GPT).
TE_ACTIVATION_FACTOR = 0.55


def compile_factor(w: Workload) -> float:
    """Share of the eager per-layer activations a stack's fused kernels keep."""
    if w.framework == "unsloth":
        return UNSLOTH_ACTIVATION_FACTOR
    if w.framework in ("megatron", "nemo"):
        return TE_ACTIVATION_FACTOR
    return COMPILE_ACTIVATION_FACTOR if w.compile else 1.0


def loss_bytes_per_vocab_token(w: Workload) -> tuple[float, float]:
    """(backward start, forward end) bytes per token per vocabulary entry of the loss path."""
    if w.framework == "unsloth":
        return 0.0, 0.0  # fused (cut) cross-entropy: logits computed block by block, never stored
    if w.chunked_loss:
        # bf16 logits kept; one chunk's fp32 up-cast (+ its fp32 gradient in backward) at a time
        return 2.0 + (4.0 + 4.0) / LOSS_CHUNKS, 2.0 + 4.0 / LOSS_CHUNKS
    return cal.LOSS_BYTES_PER_VOCAB_TOKEN, cal.LOSS_FORWARD_BYTES_PER_VOCAB_TOKEN


@record
class StackTerms:
    """Per-GPU training memory terms before a stack's own rules apply (:func:`apply_stack`)."""

    weights: float
    grads: float
    opt: float
    acts: float
    layer_weights: float = 0.0  # one decoder layer's weights on this GPU
    layer_acts: float = 0.0  # one decoder layer's saved activations on this GPU
    largest_grad: float = 0.0  # the biggest single gradient tensor on this GPU
    persistent: float = 0.0  # DeepSpeed: parameters never partitioned (left when params are offloaded)
    notes: tuple[str, ...] = ()


def apply_stack(w: Workload, t: StackTerms) -> StackTerms:
    """The persistent terms once the offload / optimizer-in-backward switches are applied."""
    weights, grads, opt, acts = t.weights, t.grads, t.opt, t.acts
    notes: list[str] = []
    if w.framework == "unsloth":
        notes.append("Unsloth: fused kernels, offloaded checkpoints, fused cross-entropy (no logits stored)")
    if w.framework == "torchtune":
        notes.append("torchtune recipe: pure bf16, chunked cross-entropy, activation checkpointing"
                     + (", FSDP2" if w.gpus > 1 else ""))
    if w.optimizer_in_backward:
        grads = min(grads, t.largest_grad)
        notes.append("optimizer step fused into backward: gradients freed as they are applied")
    if "optimizer" in w.offload:
        opt = 0.0
        grads = min(grads, t.largest_grad)
        notes.append("optimizer states and step on the CPU; gradients streamed to CPU memory")
    if "params" in w.offload and w.framework == "deepspeed":
        weights = min(weights, t.persistent)  # what is gathered is counted by .zero3
        notes.append("parameters in CPU memory (ZeRO-3 offload_param), gathered to the GPU as modules run")
    elif "params" in w.offload:
        weights = min(weights, OFFLOAD_LAYERS_ON_GPU * t.layer_weights)
        notes.append("parameters in CPU memory, two layers at a time on the GPU")
    if "activations" in w.offload:
        acts = min(acts, OFFLOAD_LAYERS_ON_GPU * t.layer_acts)
        notes.append("saved activations offloaded to CPU memory, two layers' worth on the GPU")
    if w.compile:
        notes.append(f"torch.compile: fused elementwise ops save {1 - COMPILE_ACTIVATION_FACTOR:.0%} "
                     "fewer activations")
    return dataclasses.replace(t, weights=weights, grads=grads, opt=opt, acts=acts, notes=tuple(notes))
