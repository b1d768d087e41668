"""Training frameworks as presets: what each one does by default, declared once.

``--framework NAME`` picks one :class:`FrameworkPreset`. The workload parser applies its defaults
(mixed-precision policy, checkpointing, loss, sharding across GPUs); the memory model reads the
policy it implies; the speed model reads its step efficiency and how it overlaps communication;
the output states :func:`statement`. Sources per preset are in its ``source``.

Step efficiency is the share of the large-GEMM rate (:data:`calibration.MATMUL_EFFICIENCY`) a whole
training step keeps, before communication. ``hf`` is the measured one (0.62 on the H200 rows,
:data:`calibration.TRAINING_STEP_EFFICIENCY`); the others were fitted on the tune rows of
``tests/fixtures/validation/training_speed.toml`` (the figures and the held-out error are in
``docs/training.md``). Overlap shares say how much of a collective's time the framework hides
behind compute: FSDP prefetches the next unit's all-gather and reduce-scatters while backward runs
(PyTorch FSDP ``backward_prefetch``, FSDP2 implicit prefetch); Megatron-Core overlaps the
gradient reduce-scatter with backward bucket by bucket (``overlap_grad_reduce``) and the parameter
all-gather with the next forward (``overlap_param_gather``); NeMo's performance recipes also
overlap tensor-parallel collectives with GEMMs (Transformer Engine userbuffers,
``tp_comm_overlap``); XLA (MaxText) schedules collectives asynchronously.
"""

from __future__ import annotations

from typing import Literal

from fleet_tui.core import calibration as cal
from fleet_tui.core.records import record

#: How a preset keeps its training state. ``amp``: fp32 parameters, gradients and optimizer states,
#: forward under autocast (Transformers Trainer, DeepSpeed bf16 with fp32 master). ``sharded_mp``:
#: FSDP/FSDP2 or Megatron mixed precision: 16-bit parameters for compute, fp32 master weights and
#: optimizer states sharded over the data-parallel ranks, no per-step autocast copies of the weights.
#: ``pure``: everything in 16-bit (torchtune, Unsloth).
Precision = Literal["amp", "sharded_mp", "pure"]
BatchSemantics = Literal["global", "per_device"]
Loss = Literal["fp32_logits", "chunked", "fused"]
Checkpointing = Literal["none", "full", "selective"]


@record
class FrameworkPreset:
    name: str
    label: str  # the stack named in the output
    batch: BatchSemantics  # what the framework's own batch-size setting counts
    sharding: Literal["fsdp", "tensor", "data"]  # across several devices when no layout is given
    precision: Precision
    checkpointing: Checkpointing
    loss: Loss
    step_efficiency: float  # share of the large-GEMM rate a whole step keeps (module doc)
    dp_overlap: float  # share of compute the data-parallel/FSDP collectives can hide behind
    tp_overlap: float  # share of tensor-parallel collective time hidden behind GEMMs
    families: tuple[str, ...]  # software stacks it runs on (Accelerator.software_stack values)
    source: str


_CUDA_ROCM = ("CUDA", "ROCm")

PRESETS: dict[str, FrameworkPreset] = {p.name: p for p in (
    FrameworkPreset("hf", "PyTorch + Hugging Face Transformers (eager, fused AdamW)", "per_device", "fsdp",
                    "amp", "none", "fp32_logits", cal.TRAINING_STEP_EFFICIENCY, 0.67, 0.0,
                    _CUDA_ROCM + ("SynapseAI",),
                    "Transformers Trainer: per_device_train_batch_size; AMP via autocast; the loss on fp32 "
                    "logits (LlamaForCausalLM upcasts); measured on an H200 (tests/fixtures/h200)"),
    FrameworkPreset("torchtune", "torchtune (PyTorch, bf16, FSDP2 on several GPUs)", "per_device", "fsdp",
                    "pure", "full", "chunked", cal.TRAINING_STEP_EFFICIENCY, 0.8, 0.0, _CUDA_ROCM,
                    "torchtune recipes: batch_size per device, dtype bf16, enable_activation_checkpointing, "
                    "CEWithChunkedOutputLoss, FSDP2 fully_shard in the distributed recipes"),
    FrameworkPreset("unsloth", "Unsloth (fused Triton kernels)", "per_device", "data", "pure", "full", "fused",
                    cal.TRAINING_STEP_EFFICIENCY, 0.67, 0.0, ("CUDA",),
                    "Unsloth README: per_device_train_batch_size, adamw_8bit, fused cross-entropy"),
    FrameworkPreset("deepspeed", "PyTorch + Hugging Face Transformers under DeepSpeed ZeRO", "per_device", "fsdp",
                    "amp", "none", "fp32_logits", cal.TRAINING_STEP_EFFICIENCY, 0.67, 0.0,
                    _CUDA_ROCM + ("SynapseAI",),
                    "DeepSpeed ZeRO-3 (train_micro_batch_size_per_gpu), bf16 with fp32 master weights"),
    FrameworkPreset("torchtitan", "torchtitan (FSDP2, bf16 mixed precision, selective checkpointing)", "global",
                    "fsdp", "sharded_mp", "selective", "fp32_logits", 0.70, 0.95, 0.0, _CUDA_ROCM,
                    "torchtitan: training.global_batch_size (local_batch_size per rank), FSDP2 "
                    "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), activation_checkpoint "
                    "mode selective (op), torch.compile"),
    FrameworkPreset("megatron", "Megatron-LM (Megatron-Core, distributed optimizer)", "global", "tensor",
                    "sharded_mp", "selective", "fused", 0.70, 0.9, 0.0, ("CUDA", "ROCm"),
                    "Megatron-LM: --global-batch-size/--micro-batch-size, --bf16 with fp32 main grads and "
                    "params in the distributed optimizer (--use-distributed-optimizer), "
                    "--recompute-granularity selective, fused cross-entropy"),
    FrameworkPreset("nemo", "NVIDIA NeMo (Megatron-Core, Transformer Engine, TP comm overlap)", "global",
                    "tensor", "sharded_mp", "selective", "fused", 0.70, 0.9, 0.6, ("CUDA",),
                    "NeMo 2.0 performance recipes: global_batch_size/micro_batch_size, bf16-mixed (or fp8 "
                    "via Transformer Engine), distributed optimizer, tp_comm_overlap on H100"),
    FrameworkPreset("maxtext", "MaxText (JAX/XLA, FSDP over the ICI slice)", "per_device", "fsdp",
                    "sharded_mp", "selective", "fused", 0.70, 0.95, 0.5, ("XLA",),
                    "MaxText base.yml: per_device_batch_size, weight_dtype float32 with bf16 compute "
                    "(dtype), remat_policy, ici_fsdp_parallelism"),
    FrameworkPreset("optimum-habana", "Optimum Habana (Gaudi, Transformers + DeepSpeed/HPU graphs)", "per_device",
                    "fsdp", "amp", "full", "fp32_logits", 0.70, 0.67, 0.0, ("SynapseAI",),
                    "optimum-habana GaudiTrainer: per_device_train_batch_size, bf16 autocast, DeepSpeed ZeRO"),
    FrameworkPreset("neuronx", "AWS Neuron (NeuronX Distributed / neuronx-nemo-megatron)", "global", "tensor",
                    "sharded_mp", "selective", "fp32_logits", 0.62, 0.8, 0.0, ("Neuron",),
                    "NeuronX Distributed training: tensor_parallel_size, ZeRO-1 optimizer, bf16 with fp32 "
                    "master weights, selective activation checkpointing"),
)}


def preset(name: str) -> FrameworkPreset:
    return PRESETS[name]


def statement(name: str, gpus: int) -> str:
    """The preset in one line, as the output states it."""
    p = PRESETS[name]
    policy = {"amp": "AMP (fp32 master weights, gradients and optimizer states)",
              "sharded_mp": "bf16 parameters, fp32 master weights and optimizer states sharded",
              "pure": "pure bf16"}[p.precision]
    ckpt = {"none": "no activation checkpointing", "full": "full activation checkpointing",
            "selective": "selective activation checkpointing"}[p.checkpointing]
    loss = {"fp32_logits": "loss on fp32 logits", "chunked": "chunked cross-entropy",
            "fused": "fused cross-entropy"}[p.loss]
    batch = ("its batch size is per device (the tool's --batch is the global batch)"
             if p.batch == "per_device" else "global batch size")
    shard = f"; across GPUs: {p.sharding}" if gpus > 1 else ""
    return f"{p.label}: {policy}, {ckpt}, {loss}, {batch}{shard}"


#: Presets whose step efficiency is the one measured on 1B-8B models (the H200 rows): it already
#: includes the narrower GEMMs of models below :data:`REFERENCE_HIDDEN`.
MEASURED_ON_SMALL_MODELS = ("hf", "torchtune", "unsloth", "deepspeed")
#: Hidden size at which the measured step efficiencies hold (the H200 rows' 1B-8B models have
#: 2048-4096); wider GEMMs run closer to peak (cuBLAS on Hopper: ~0.8 of the dense peak at 8192+).
REFERENCE_HIDDEN = 4096
#: Half-saturation width of the large-GEMM efficiency curve ``h / (h + GEMM_HALF_WIDTH)``: fitted
#: on the tune rows (70B/175B/405B against 7B/8B of the same stacks).
GEMM_HALF_WIDTH = 2048
#: Largest share of the dense peak any GEMM reaches (cuBLAS/hipBLASLt large bf16 GEMMs, ~0.8).
MAX_GEMM_EFFICIENCY = 0.8


def gemm_size_factor(hidden: int, base_efficiency: float, narrow: bool = False) -> float:
    """How much faster than at :data:`REFERENCE_HIDDEN` the GEMMs of a model ``hidden`` wide run,
    never past :data:`MAX_GEMM_EFFICIENCY` of peak for a device whose reference efficiency is
    ``base_efficiency``. Below the reference width the factor is 1 unless ``narrow``: a step
    efficiency measured on 1B-8B models (Transformers on the H200 rows) already includes their
    narrower GEMMs; one fitted on 7B-405B runs (the other presets) does not."""
    def curve(h: float) -> float:
        return h / (h + GEMM_HALF_WIDTH)
    if hidden <= REFERENCE_HIDDEN:
        return curve(hidden) / curve(REFERENCE_HIDDEN) if narrow else 1.0
    factor = curve(hidden) / curve(REFERENCE_HIDDEN)
    if base_efficiency > 0:
        factor = min(factor, max(1.0, MAX_GEMM_EFFICIENCY / base_efficiency))
    return factor
