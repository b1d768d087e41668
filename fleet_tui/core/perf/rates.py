"""Rates of a device and FLOPs/bytes of a workload that the speed estimates divide by each other.

FLOPs per token are 2 × the matmul parameters a token passes + attention. An encoder-decoder (T5)
model splits that by stack: a source token passes the encoder (bidirectional attention over the
source), a target token the decoder and output head (causal self-attention over the target and
cross-attention over the source); a step's FLOPs are the sum, its tokens source + target
(:func:`forward_terms`). Decoding streams only the decoder's weights.

Achievable compute = dense datasheet peak × large-GEMM efficiency of the architecture
(:data:`calibration.MATMUL_EFFICIENCY`, H200 measured 0.67 of peak at its 700 W cap); fp8 and
weight-only int8/int4 apply the factors documented in :mod:`fleet_tui.core.calibration`. A figure
that is not published stays unknown (``None`` plus a note), never a stand-in number.
"""

from __future__ import annotations

import math

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import stack_lengths, weight_bytes
from fleet_tui.core.modelspec import ParamCounts, param_counts
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

#: Shape assumed for speed when an inference workload gives neither a sequence nor a prompt length
#: (its memory is then the weights alone); the output says so.
DEFAULT_PROMPT_TOKENS = 512
DEFAULT_GEN_TOKENS = 128

_MATMUL = caches.memo("perf.matmul_efficiency", 256)


def matmul_efficiency(accelerator: Accelerator) -> float:
    """Large-GEMM efficiency of the device's architecture (the longest matching table prefix)."""
    arch = accelerator.architecture or ""
    return _MATMUL.get_or_compute(arch, lambda: _matmul_efficiency(arch))


def _matmul_efficiency(arch: str) -> float:
    low = arch.lower()
    return next((e for k, e in cal.MATMUL_EFFICIENCY.items()
                 if k != "default" and low.startswith(k.lower())), cal.MATMUL_EFFICIENCY["default"])


def weight_only_compute(accelerator: Accelerator, precision: str) -> str | None:
    """The 16-bit precision the matmuls of ``precision`` weights run in when they are de-quantized
    inside the GEMM (int8/int4 weight-only quantization; fp8 on a device without fp8 tensor cores,
    which vLLM and SGLang serve with FP8 Marlin: ``catalogs/capabilities.toml`` ``[[weight_only]]``),
    or None when the device multiplies in ``precision`` itself. The weights stay ``precision``'s
    bytes: only the compute rate is the 16-bit one."""
    if precision in ("int8", "int4") or (precision == "fp8" and accelerator.supports("fp8") is False):
        p = accelerator.peak_tflops
        return "bf16" if "bf16" in p or "fp16" not in p and accelerator.supports("bf16") else "fp16"
    return None


def peak_flops(accelerator: Accelerator, precision: str) -> tuple[float | None, list[str]]:
    """Achievable dense FLOP/s for ``precision`` (peak × efficiency), or None when the peak it
    needs is not published, and notes (fallbacks, or which figure is missing)."""
    p = accelerator.peak_tflops
    name = accelerator.id
    notes: list[str] = []
    base = weight_only_compute(accelerator, precision)
    if base is not None:
        if base not in p:
            return None, [f"no published bf16/fp16 peak for {name}"]
        tflops = p[base] * cal.WEIGHT_ONLY_QUANT_COMPUTE_FACTOR
        notes.append(f"{precision} weight-only: matmuls run in {base} after de-quantizing the weights")
    elif precision not in p:
        return None, [f"no published {precision} peak for {name}"]
    elif precision == "fp8":
        tflops = p["fp8"] * cal.FP8_EFFICIENCY_FACTOR
    else:
        tflops = p[precision]
        if precision == "fp32":
            notes.append("fp32 matmuls at the fp32 (non-tensor-core) peak: PyTorch leaves TF32 off by default")
    return tflops * 1e12 * matmul_efficiency(accelerator), notes


def bandwidth(accelerator: Accelerator) -> tuple[float | None, list[str]]:
    """Datasheet memory bandwidth in bytes/s, or None (with a note) when it is not published."""
    if accelerator.memory_bandwidth_gbs:
        return accelerator.memory_bandwidth_gbs * 1e9, []
    return None, [f"no published memory bandwidth for {accelerator.id}"]


def attn_flops_per_token(w: Workload, context: float, absorbed: bool = False) -> float:
    """Forward attention FLOPs per token (QKᵀ and AV, causal: half the square).

    ``absorbed``: a decode step of multi-head latent attention with the up-projections absorbed
    (DeepSeek-V2 paper, arXiv:2405.04434 §2.1.2; FlashMLA): every head scores the whole
    kv_lora_rank + rope latent and sums kv_lora_rank-wide values, ~2.8x the FLOPs of its
    192-wide heads, the price of reading only the latent.
    """
    a = w.arch
    full = a.kv_layers  # hybrid models: linear-attention layers add no context-long term
    width = a.q_dim
    if absorbed and a.kv_lora_rank:
        width = a.heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim) / 2
    flops = full * 2 * context * width
    if a.sliding_window_layers and a.sliding_window is not None:  # (ModelArch: one needs the other)
        flops += a.sliding_window_layers * 2 * min(context, a.sliding_window) * a.q_dim
    return float(flops)


def encoder_attn_flops_per_token(w: Workload, source: float) -> float:
    """Forward attention FLOPs per source token in a T5 encoder: bidirectional, the whole square."""
    return float(w.arch.layers * 4 * source * w.arch.q_dim)


def forward_terms(w: Workload, seq: int) -> tuple[float, float, int]:
    """(matmul parameters, attention FLOPs) per token, averaged over the tokens of one sequence of a
    training step or forward pass over ``seq`` tokens, and those tokens per sequence. Decoder-only:
    every token passes every matmul. Encoder-decoder: ``seq`` source tokens pass the encoder and
    ``target_len`` target tokens the decoder, so the sequence counts source + target tokens."""
    pc = param_counts(w.arch)
    src, tgt = stack_lengths(w, seq)
    if not src:
        return float(pc.matmul_active), attn_flops_per_token(w, seq), seq
    # decoder: causal self-attention over the target plus cross-attention over the whole source
    dec_attn = attn_flops_per_token(w, tgt) + w.arch.decoder_layers * 4 * src * w.arch.q_dim
    n = src + tgt
    return ((src * pc.encoder_matmul + tgt * pc.matmul_per_target_token) / n,
            (src * encoder_attn_flops_per_token(w, src) + tgt * dec_attn) / n, n)


def scaling_efficiency(sharding: str, gpus: int) -> float:
    """Share of linear speed-up left on ``gpus`` devices (:data:`calibration.SCALING_PER_DOUBLING`)."""
    if gpus <= 1:
        return 1.0
    return cal.SCALING_PER_DOUBLING[sharding] ** math.log2(gpus)


def weight_stream_bytes(w: Workload, batch: int, pc: ParamCounts | None = None, decode: bool = True) -> float:
    """Weight bytes one step reads: dense all; MoE the experts the batch routes to; an
    encoder-decoder's decode step only the decoder and head (``decode``)."""
    a = w.arch
    pc = pc or param_counts(a)
    total = weight_bytes(w if not w.is_training else w.derive(kind="inference"), pc)
    if a.is_encoder_decoder and decode:
        return total * (1 - pc.encoder_matmul / pc.total)
    if not a.is_moe:
        return total
    # expected distinct experts per layer touched by `batch` tokens routing to k of E each
    touched = a.experts * (1 - (1 - a.experts_per_token / a.experts) ** batch)
    expert_params = a.layers * (pc.mlp_per_layer - pc.mlp_active_per_layer) / max(1, a.experts - a.experts_per_token)
    untouched = (a.experts - touched) * expert_params
    return total * (1 - untouched / pc.total)
