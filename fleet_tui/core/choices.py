"""The choices a workload offers, in the order front ends list them (CLI ``choices=``, the builder's
selects, :class:`~fleet_tui.core.workload.Workload`'s field types). Each is a ``Literal`` (what the
type checker and pydantic read) and the tuple of its values (what the front ends list). Imports only
``typing``: the CLI builds its parser from these without loading pydantic, so ``--help`` stays fast."""

from typing import Literal, get_args

WorkloadKind = Literal["inference", "training", "finetune", "lora", "qlora"]
WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "fp4", "int8", "int4"]
Optimizer = Literal["adamw", "adamw8bit", "paged_adamw8bit", "sgd", "adafactor"]
Sharding = Literal["data", "tensor", "fsdp"]
MasterWeights = Literal["fp32", "none"]
Serving = Literal["interactive", "batch"]
LoraTarget = Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
Engine = Literal["vllm", "trtllm", "sglang", "hf"]  # serving engines (core/perf/engines.py profiles)
KVCacheDtype = Literal["auto", "fp16", "bf16", "fp8", "int8"]  # auto = the compute dtype
Framework = Literal["hf", "torchtune", "unsloth", "deepspeed", "torchtitan", "megatron", "nemo", "maxtext",
                    "optimum-habana", "neuronx"]  # training stacks (core/frameworks.py presets)
OffloadTarget = Literal["activations", "optimizer", "params"]  # what a training run may keep in CPU memory

KINDS: tuple[WorkloadKind, ...] = get_args(WorkloadKind)
PRECISIONS: tuple[WeightPrecision, ...] = get_args(WeightPrecision)
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
SHARDINGS: tuple[Sharding, ...] = get_args(Sharding)
MASTER_WEIGHTS: tuple[MasterWeights, ...] = get_args(MasterWeights)
SERVING_MODES: tuple[Serving, ...] = get_args(Serving)
LORA_TARGETS: tuple[LoraTarget, ...] = get_args(LoraTarget)
ENGINES: tuple[Engine, ...] = get_args(Engine)
#: each engine as a user reads it in a sentence
ENGINE_NAMES: dict[str, str] = {"vllm": "vLLM", "trtllm": "TensorRT-LLM", "sglang": "SGLang", "hf": "Hugging Face"}
KV_CACHE_DTYPES: tuple[KVCacheDtype, ...] = get_args(KVCacheDtype)
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)
OFFLOAD_TARGETS: tuple[OffloadTarget, ...] = get_args(OffloadTarget)
