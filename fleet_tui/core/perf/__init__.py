"""Speed of a workload on an accelerator: a roofline with measured and published efficiencies.

Modules: :mod:`.rates` (device rates, FLOPs and bytes per token), :mod:`.throughput` (training step,
prefill, decode), :mod:`.run` (a whole training run), :mod:`.engines` (serving engine profiles, KV
pools, offline serving speed), :mod:`.serving_plan` (serving capacity plan). Byte formulas shared with
memory sizing (weights, KV cache, LoRA parameters) are in :mod:`fleet_tui.core.footprint`.

Method
------
* **FLOPs.** A forward pass costs ``2 × N_matmul`` per token (N_matmul = matmul weights a token
  touches: decoder linears of the *active* experts + the output head) plus causal attention
  ``2 × context × heads·head_dim`` per token per layer (flash kernels skip the masked half).
  Training = forward + backward = 3 × forward (6·N·D), 4 × with activation recompute (8·N·D). LoRA:
  forward 2N, backward only through activations 2N (frozen weights need no weight gradient),
  attention backward as usual -> 4·N·D (6·N·D with recompute), plus 6 × adapter parameters.
* **Compute rate** = dense datasheet peak for the precision × large-GEMM efficiency of the
  architecture × a step efficiency for everything that is not a big GEMM (norms, rotary, softmax,
  launches). The H200 sustained 662 TFLOP/s on bf16 GEMMs at its 700 W cap (0.67 of the 989.5 dense
  peak); Hugging Face eager prefill reached 0.74 and training 0.62 of that rate on the ground-truth
  rows (one factor each, not per row).
* **Memory-bound parts** of a training step: the optimizer update (fused AdamW reads and writes
  parameters and both moments), AMP's fp32->bf16 weight casts each forward and gradient casts,
  all at the measured copy bandwidth (0.885 of the datasheet HBM bandwidth).
* **Decode and served prefill** describe the serving engine the workload names (``--engine``,
  default vLLM; profiles in :mod:`.engines`): per output step the GPU streams every weight it needs
  (MoE: the experts the batch routes to) and the batch's KV cache at the engine's share of the
  bandwidth for the architecture, or is compute-bound at large batch at the engine's GEMM
  efficiency; each step pays the engine's scheduling time and, tensor parallel, two all-reduces per
  layer on the link. ``--engine hf`` is Hugging Face eager generate (launch-bound: ≈35 tokens/s for
  an 8B model at batch 1 on an H200, where weight streaming allows ~200). Offline throughput, KV
  pools and the serving capacity plan (:mod:`.serving_plan`) use the same profiles; their error against
  published tables is in ``bench/bench_validation.py``.
* **Several GPUs**: data-parallel replicas add up; FSDP/tensor parallel pay a documented
  efficiency per doubling (:data:`calibration.SCALING_PER_DOUBLING`).

* **Unknown figures stay unknown.** A compute-bound estimate (training, prefill) needs the published
  dense peak for the precision; a memory-bound one (decode, optimizer/casts) needs the memory
  bandwidth. Where the figure is missing (NVIDIA publishes no A10G datasheet; many catalog devices
  list memory only) that part of the estimate is ``None`` with an assumption line saying which
  figure is missing ("no published bf16 peak for A10G") — never a stand-in number. Decode is still
  estimated from bandwidth alone when the peak is missing (its compute limit, which matters only at
  large batches, is then not checked, and the note says so). ``Throughput.tokens_per_s`` is ``None``
  when the headline phase cannot be estimated, ``Throughput.unknown`` says why.

Measured error on the H200 rows (``tests/core/sizing/test_sizing_accuracy.py`` prints them): prefill
tokens/s within 8.6 % (median 7.1 %), training within 16.6 % (median 7.9 %). Against published
numbers for other GPUs: 7B training per GPU is ~15 % (H100) and ~25 % (A100)
below MosaicML's optimized stack — expected, the model describes Hugging Face eager training; the
H100/A100 ratio is ~2.5 (published 2.29, peak ratio 3.17). Other architectures (AMD, Gaudi, Neuron,
TPU) use an assumed GEMM efficiency: treat their speeds as rough.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_tui.core.perf.rates import (
    DEFAULT_GEN_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    bandwidth,
    matmul_efficiency,
    peak_flops,
)
from fleet_tui.core.perf.throughput import (
    ENGINE_FORWARD,
    ENGINE_SERVING,
    Throughput,
    estimate_throughput,
)

if TYPE_CHECKING:
    from fleet_tui.core.perf.run import RunEstimate, training_run

__all__ = [
    "DEFAULT_GEN_TOKENS", "DEFAULT_PROMPT_TOKENS", "ENGINE_FORWARD", "ENGINE_SERVING",
    "RunEstimate", "Throughput", "bandwidth", "estimate_throughput", "matmul_efficiency", "peak_flops",
    "training_run",
]


def __getattr__(name: str) -> object:
    """``RunEstimate``/``training_run`` on first use: ``size`` without ``--tokens`` never needs them."""
    if name in ("RunEstimate", "training_run"):
        from fleet_tui.core.perf import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
