"""Accelerator specifications (catalogs/accelerators.toml).

Two different facts live here and must not be confused:

* **what a device can run** (``Accelerator.supports``): decided by its architecture, from the
  vendor's architecture documents (:data:`ARCHITECTURE_PRECISIONS`), or by an explicit
  ``precisions`` list in the catalog entry. ``None`` means *unknown* (an architecture this table does
  not describe, or a precision its documents do not settle): callers allow it and say so.
* **how fast it runs it** (``Accelerator.peak``): the published DENSE peak per precision in
  ``peak_tflops`` (NVIDIA's headline tensor numbers use 2:4 sparsity; dense is half). Unknown
  values stay absent: never invent a number. A missing peak says nothing about support: NVIDIA
  publishes no datasheet for the A10G, yet it is an Ampere GA102 and runs bf16.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal, cast

from fleet_tui.core.records import FORBID_EXTRA, Record, record
from fleet_tui.core.types import NonEmptyStr, PositiveFloat

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"]
SoftwareStack = Literal["CUDA", "ROCm", "Neuron", "SynapseAI", "XLA", "other"]


@record
class ArchitecturePrecisions:
    """Precisions an architecture executes natively (``runs``) and is documented not to (``lacks``).

    A precision in neither set is unknown. int8/int4 here mean the tensor/matrix units' integer
    paths; weight-only int8/int4 quantization (de-quantize, then 16-bit math) runs on any CUDA or
    ROCm GPU regardless (see ``sizing.precision_support``).
    """

    family: str
    runs: frozenset[str]
    lacks: frozenset[str]
    source: str


def _ap(family: str, runs: str, lacks: str, source: str) -> ArchitecturePrecisions:
    return ArchitecturePrecisions(family, frozenset(runs.split()), frozenset(lacks.split()), source)


#: Architecture -> precisions, matched case-insensitively on the start of ``Accelerator.architecture``
#: (first match wins, so more specific names come first). One place, each row with its source:
ARCHITECTURE_PRECISIONS: tuple[tuple[str, ArchitecturePrecisions], ...] = (
    # NVIDIA. bf16 and tf32 arrived with Ampere's third-generation tensor cores, fp8 with Ada's and
    # Hopper's fourth generation (NVIDIA Ampere GA100/GA102, Ada Lovelace and Hopper architecture
    # whitepapers); CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table.
    ("maxwell", _ap("Maxwell", "fp32", "tf32 bf16 fp8",
                    "CUDA Programming Guide: compute capability 5.2 has no bf16/tensor cores")),
    ("pascal", _ap("Pascal", "fp32 fp16", "tf32 bf16 fp8",
                   "NVIDIA Tesla P100 whitepaper (GP100 fp16 at 2x fp32); no tensor cores")),
    ("volta", _ap("Volta", "fp32 fp16", "tf32 bf16 fp8",
                  "NVIDIA Tesla V100 (Volta) whitepaper: first-generation tensor cores, fp16 only")),
    ("turing", _ap("Turing", "fp32 fp16 int8 int4", "tf32 bf16 fp8",
                   "NVIDIA Turing architecture whitepaper: tensor cores fp16, int8, int4")),
    ("ampere", _ap("Ampere", "fp32 tf32 bf16 fp16 int8 int4", "fp8",
                   "NVIDIA A100 (GA100) and GA102 whitepapers: third-generation tensor cores "
                   "tf32, bf16, fp16, int8, int4; no fp8")),
    ("ada", _ap("Ada Lovelace", "fp32 tf32 bf16 fp16 fp8 int8 int4", "",
                "NVIDIA Ada Lovelace architecture whitepaper: fourth-generation tensor cores add fp8")),
    ("hopper", _ap("Hopper", "fp32 tf32 bf16 fp16 fp8 int8", "",
                   "NVIDIA H100 (Hopper) architecture whitepaper: fp8 transformer engine")),
    ("blackwell ultra", _ap("Blackwell Ultra", "fp32 tf32 bf16 fp16 fp8", "",
                            "NVIDIA Blackwell architecture technical brief (adds fp6/fp4)")),
    ("blackwell", _ap("Blackwell", "fp32 tf32 bf16 fp16 fp8 int8", "",
                      "NVIDIA Blackwell architecture technical brief (adds fp6/fp4)")),
    # AMD
    ("vega", _ap("Vega (GCN 5)", "fp32 fp16", "bf16 fp8",
                 "AMD Vega instruction set architecture: packed fp16; bf16 arrived with CDNA")),
    ("cdna 3", _ap("CDNA 3", "fp32 tf32 bf16 fp16 fp8 int8", "",
                   "AMD CDNA 3 architecture whitepaper (MI300 series matrix cores)")),
    ("cdna 4", _ap("CDNA 4", "fp32 bf16 fp16 fp8 int8", "",
                   "AMD CDNA 4 architecture whitepaper (MI350 series; adds fp6/fp4)")),
    # Intel Gaudi (Habana)
    ("gaudi2", _ap("Gaudi2", "fp32 tf32 bf16 fp16 fp8", "",
                   "Intel Gaudi 2 whitepaper: MME supports fp32, tf32, bf16, fp16, fp8")),
    ("gaudi3", _ap("Gaudi3", "fp32 tf32 bf16 fp16 fp8", "",
                   "Intel Gaudi 3 AI accelerator whitepaper")),
    ("gaudi", _ap("Gaudi", "fp32 bf16", "fp8",
                  "Habana Gaudi (HL-205) whitepaper: MME bf16/fp32; fp8 arrived with Gaudi2")),
    # AWS Neuron (Neuron SDK architecture pages)
    ("neuroncore-v1", _ap("NeuronCore-v1", "fp16 bf16 int8", "fp8",
                          "AWS Neuron docs, Inferentia architecture: fp16, bf16, int8")),
    ("neuroncore-v2", _ap("NeuronCore-v2", "fp32 tf32 bf16 fp16 fp8 int8", "",
                          "AWS Neuron docs, NeuronCore-v2: fp32, tf32, bf16, fp16, cfp8, int8")),
    ("neuroncore-v3", _ap("NeuronCore-v3", "fp32 tf32 bf16 fp16 fp8", "",
                          "AWS Neuron docs, Trainium2 architecture")),
    # Google TPU: the MXU multiplies in bf16 (Cloud TPU docs, "bfloat16"); fp32 runs as multi-pass bf16.
    ("tpu", _ap("TPU", "fp32 bf16", "", "Cloud TPU documentation: bfloat16 on the MXU")),
)


def architecture_precisions(architecture: str | None) -> ArchitecturePrecisions | None:
    """The :data:`ARCHITECTURE_PRECISIONS` row for ``architecture`` (None when not described)."""
    if not architecture:
        return None
    arch = architecture.strip().lower()
    for prefix, row in ARCHITECTURE_PRECISIONS:
        if arch.startswith(prefix):
            return row
    return None


@record(kw_only=True)
class Accelerator(Record):
    """One device's published figures. Field types are checked by
    :func:`fleet_tui.core.records.validate` when read from a file (a catalog read from the compiled
    cache unpickles accelerators without validating them, so `size` never imports pydantic)."""

    __pydantic_config__ = FORBID_EXTRA

    id: NonEmptyStr  # canonical short name used by instances, e.g. "H100", "L40S"
    name: str = ""  # full marketing name, e.g. "NVIDIA H100 80GB SXM5"
    aliases: tuple[str, ...] = ()  # other names seen in cloud catalogs (e.g. "A100-80GB")
    vendor: str  # NVIDIA, AMD, AWS, Intel, Google, Qualcomm
    software_stack: SoftwareStack
    memory_gib: PositiveFloat
    memory_bandwidth_gbs: PositiveFloat | None = None
    # dense peak per precision in TFLOP/s (TOP/s for int8/int4); absent = not published
    peak_tflops: dict[Precision, PositiveFloat] = field(default_factory=dict)
    # what the device runs, when the architecture table cannot say (a user's own device); when
    # given it is authoritative: a precision not listed is not supported
    precisions: tuple[Precision, ...] | None = None
    tdp_w: PositiveFloat | None = None
    interconnect: str | None = None
    interconnect_bandwidth_gbs: PositiveFloat | None = None
    architecture: str | None = None
    launch_year: int | None = None
    source: str = ""
    as_of: str = ""  # ISO date the figures were taken
    notes: str = ""

    def supports(self, precision: str) -> bool | None:
        """Can the device run ``precision`` natively? True, False, or None when unknown.

        A published peak proves support; then the entry's own ``precisions``; then the
        architecture's documented precisions (:data:`ARCHITECTURE_PRECISIONS`).
        """
        if precision in self.peak_tflops:
            return True
        if self.precisions is not None:
            return precision in self.precisions
        row = architecture_precisions(self.architecture)
        if row is not None:
            if precision in row.runs:
                return True
            if precision in row.lacks:
                return False
        return None

    def peak(self, precision: str) -> float | None:
        """Published dense peak for ``precision`` in TFLOP/s (TOP/s for integers), None if unknown."""
        # any name may be asked for; only a Precision can have a peak
        return cast("dict[str, float]", self.peak_tflops).get(precision)
