"""Accelerator specifications (catalogs/accelerators.toml).

Owned by the catalog code. Throughput figures are DENSE peaks (NVIDIA's headline tensor numbers use
2:4 sparsity; dense is half). A precision the device cannot run is absent from ``peak_tflops``;
unknown values stay absent: never invent a number.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, field_validator

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"]
SoftwareStack = Literal["CUDA", "ROCm", "Neuron", "SynapseAI", "XLA", "other"]


class Accelerator(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)  # canonical short name used by instances, e.g. "H100", "L40S"
    name: str = ""  # full marketing name, e.g. "NVIDIA H100 80GB SXM5"
    aliases: tuple[str, ...] = ()  # other names seen in cloud catalogs (e.g. "A100-80GB")
    vendor: str  # NVIDIA, AMD, AWS, Intel, Google, Qualcomm
    software_stack: SoftwareStack
    memory_gib: PositiveFloat
    memory_bandwidth_gbs: PositiveFloat | None = None
    # dense peak per precision in TFLOP/s (TOP/s for int8/int4)
    peak_tflops: dict[Precision, PositiveFloat] = Field(default_factory=dict)
    tdp_w: PositiveFloat | None = None
    interconnect: str | None = None
    interconnect_bandwidth_gbs: PositiveFloat | None = None
    architecture: str | None = None
    launch_year: int | None = None
    source: str = ""
    as_of: str = ""  # ISO date the figures were taken
    notes: str = ""

    @field_validator("peak_tflops")
    @classmethod
    def _known_precisions(cls, v: dict) -> dict:
        return dict(v)

    def supports(self, precision: str) -> bool:
        """True when the device has a native path for ``precision`` (int4/fp8 weight-only aside)."""
        return precision in self.peak_tflops
