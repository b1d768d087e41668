"""What the user wants to run: the input of sizing, speed, pricing and recommendations.

Owned by the sizing code. Frozen so it can be cached, hashed and shared between threads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from fleet_tui.core.modelspec import ModelArch

WorkloadKind = Literal["inference", "training", "finetune", "lora", "qlora"]
WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
Optimizer = Literal["adamw", "adamw8bit", "sgd", "adafactor"]
Sharding = Literal["data", "tensor", "fsdp"]


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
        return self

    @property
    def is_training(self) -> bool:
        return self.kind != "inference"

    @property
    def is_generation(self) -> bool:
        return self.kind == "inference" and self.gen_len is not None
