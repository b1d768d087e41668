"""What the user wants to run: the input of sizing, speed, pricing and recommendations.

Owned by the sizing code. Frozen so it can be cached, hashed and shared between threads.

Semantics (the CLI documents the same):

* ``training``/``finetune`` (full fine-tuning) with ``seq_len``: one optimizer step over ``batch``
  sequences of ``seq_len`` tokens. ``precision`` is the compute precision; ``master_weights="fp32"``
  keeps fp32 parameters and runs the forward under autocast (PyTorch AMP), ``"none"`` keeps
  parameters, gradients and optimizer states in ``precision`` (pure bf16).
* ``lora``: a frozen base in ``precision`` with LoRA adapters of ``lora_rank`` on ``lora_targets``;
  ``qlora``: the same with a 4-bit NF4 base (``precision`` = compute dtype).
* ``inference`` with ``seq_len`` and no ``gen_len``: one forward pass over the batch returning
  logits at every position; with ``prompt_len``/``gen_len``: generation; with neither: the model
  loaded and ready.
* ``batch`` is the global batch; data-parallel and FSDP runs split it across ``gpus``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from fleet_tui.core.modelspec import ModelArch

WorkloadKind = Literal["inference", "training", "finetune", "lora", "qlora"]
WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
Optimizer = Literal["adamw", "adamw8bit", "sgd", "adafactor"]
Sharding = Literal["data", "tensor", "fsdp"]

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class Workload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: WorkloadKind
    model: ModelArch | None = None  # None when only a parameter count is known
    params: PositiveInt | None = None  # used when model is None
    precision: WeightPrecision = "bf16"
    batch: PositiveInt = 1
    seq_len: PositiveInt | None = None  # training step shape, or one forward pass for inference
    prompt_len: PositiveInt | None = None  # generation: prompt tokens
    gen_len: PositiveInt | None = None  # generation: new tokens
    optimizer: Optimizer = "adamw"
    master_weights: Literal["fp32", "none"] = "fp32"
    grad_checkpointing: bool = False
    lora_rank: PositiveInt = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    gpus: PositiveInt = 1
    sharding: Sharding = "data"
    serving: Literal["interactive", "batch"] = "interactive"

    @model_validator(mode="after")
    def _check(self) -> "Workload":
        if self.model is None and self.params is None:
            raise ValueError("give a model (--model/--model-config) or a parameter count (--params)")
        if self.gen_len is not None and self.prompt_len is None:
            raise ValueError("--gen-len needs --prompt-len (generation = a prompt plus new tokens)")
        bad = [t for t in self.lora_targets if t not in LORA_TARGETS]
        if bad:
            raise ValueError(f"unknown LoRA target(s) {', '.join(bad)}; allowed: {', '.join(LORA_TARGETS)}")
        if self.kind in ("training", "finetune") and self.precision in ("int8", "int4"):
            raise ValueError(f"full training in {self.precision} is not supported; use --workload "
                             "qlora (4-bit base + LoRA) or lora with --precision bf16")
        return self

    @property
    def is_training(self) -> bool:
        return self.kind != "inference"

    @property
    def is_generation(self) -> bool:
        return self.kind == "inference" and self.gen_len is not None

    @property
    def is_adapter(self) -> bool:
        return self.kind in ("lora", "qlora")

    @property
    def arch(self) -> ModelArch:
        """The model shape: the given one, or a Llama-like shape with ``params`` parameters."""
        if self.model is not None:
            return self.model
        return _arch_for_params(int(self.params))

    @property
    def tokens_per_step(self) -> int:
        """Tokens one step processes (training/forward: batch × seq_len; generation: the prompt)."""
        if self.seq_len is not None:
            return self.batch * self.seq_len
        if self.prompt_len is not None:
            return self.batch * self.prompt_len
        return 0

    def derive(self, **changes) -> "Workload":
        """A copy with ``changes`` applied, cheaply: cross-field rules are checked, field types are
        trusted (for engine-made variants; use :meth:`with_` for user input)."""
        new = self.model_copy(update=changes)
        new._check()
        return new

    def with_(self, **changes) -> "Workload":
        """A copy with ``changes`` applied and validated again."""
        data = self.model_dump()
        data["model"] = self.model
        data.update(changes)
        return Workload(**data)


@lru_cache(maxsize=256)
def _arch_for_params(params: int) -> ModelArch:
    from fleet_tui.core.modelspec import arch_for_params

    return arch_for_params(params)
