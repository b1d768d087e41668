"""Speed of a workload on an accelerator: a roofline with measured and published efficiencies.

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
* **Decode** describes an optimized serving engine (vLLM/TensorRT-LLM class, continuous batching,
  CUDA graphs), *not* Hugging Face eager generate, whose ground-truth decode speeds are
  launch-bound (≈35 tokens/s for an 8B model at batch 1 on an H200, where weight streaming allows
  ~200): per output step the GPU streams every weight it needs (MoE: the experts the batch routes
  to) and the batch's KV cache at 0.75 of peak bandwidth, or is compute-bound at large batch.
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

Measured error on the H200 rows (``tests/core/test_sizing_accuracy.py`` prints them): prefill
tokens/s within 8.6 % (median 7.1 %), training within 16.6 % (median 7.9 %). Against published
numbers for other GPUs (field-notes §3.3-3.4): 7B training per GPU is ~15 % (H100) and ~25 % (A100)
below MosaicML's optimized stack — expected, the model describes Hugging Face eager training; the
H100/A100 ratio is ~2.5 (published 2.29, peak ratio 3.17). Other architectures (AMD, Gaudi, Neuron,
TPU) use an assumed GEMM efficiency: treat their speeds as rough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from fleet_tui.core import calibration as cal
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from fleet_tui.core.specs import Accelerator

ENGINE_SERVING = "optimized serving (vLLM/TensorRT-LLM class)"
ENGINE_TRAINING = "PyTorch + Hugging Face Transformers (eager, fused AdamW)"
ENGINE_FORWARD = "PyTorch forward pass (SDPA/flash attention)"

COPY_BANDWIDTH_EFFICIENCY = cal.COPY_BANDWIDTH_EFFICIENCY
PREFILL_STEP_EFFICIENCY = cal.PREFILL_STEP_EFFICIENCY
TRAINING_STEP_EFFICIENCY = cal.TRAINING_STEP_EFFICIENCY

Phase = Literal["prefill", "decode", "training"]


@dataclass(frozen=True, slots=True)
class Throughput:
    # headline: training tokens/s, prefill tokens/s, or decode output tokens/s; None when a
    # figure it needs is not published (``unknown`` says which)
    tokens_per_s: float | None
    phase: Phase
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    time_per_output_token_s: float | None = None
    step_s: float | None = None  # one training step / one forward pass / one decode step
    engine: str = ""
    bound: Literal["compute", "memory"] = "compute"
    assumptions: list[str] = field(default_factory=list)
    time_to_first_token_s: float | None = None
    mfu: float | None = None  # model FLOPs utilisation of the dense peak (training/prefill)
    unknown: str = ""  # why tokens_per_s is None ("no published bf16 peak for A10G")


@dataclass(frozen=True, slots=True)
class RunEstimate:
    seconds: float | None  # None when the training speed cannot be estimated (``unknown``)
    gpu_hours: float | None
    tokens: int = 0
    tokens_per_s: float | None = 0.0
    gpus: int = 1
    unknown: str = ""


def matmul_efficiency(accelerator: "Accelerator") -> float:
    arch = accelerator.architecture or ""
    eff = _MATMUL_BY_ARCH.get(arch)
    if eff is None:
        low = arch.lower()
        eff = next((e for k, e in cal.MATMUL_EFFICIENCY.items()
                    if k != "default" and low.startswith(k.lower())), cal.MATMUL_EFFICIENCY["default"])
        _MATMUL_BY_ARCH[arch] = eff
    return eff


_MATMUL_BY_ARCH: dict[str, float] = {}


def peak_flops(accelerator: "Accelerator", precision: str) -> tuple[float | None, list[str]]:
    """Achievable dense FLOP/s for ``precision`` (peak × efficiency), or None when the peak it
    needs is not published, and notes (fallbacks, or which figure is missing)."""
    p = accelerator.peak_tflops
    name = accelerator.id
    notes: list[str] = []
    if precision in ("int8", "int4"):
        base = "bf16" if "bf16" in p else "fp16" if "fp16" in p else None
        if base is None:
            return None, [f"no published bf16/fp16 peak for {name}"]
        tflops = p[base] * cal.WEIGHT_ONLY_QUANT_COMPUTE_FACTOR
        notes.append(f"{precision} weight-only quantization: matmuls run in 16-bit after de-quantizing")
    elif precision not in p:
        return None, [f"no published {precision} peak for {name}"]
    elif precision == "fp8":
        tflops = p["fp8"] * cal.FP8_EFFICIENCY_FACTOR
    else:
        tflops = p[precision]
        if precision == "fp32":
            notes.append("fp32 matmuls at the fp32 (non-tensor-core) peak: PyTorch leaves TF32 off by default")
    return tflops * 1e12 * matmul_efficiency(accelerator), notes


def bandwidth(accelerator: "Accelerator") -> tuple[float | None, list[str]]:
    """Datasheet memory bandwidth in bytes/s, or None (with a note) when it is not published."""
    if accelerator.memory_bandwidth_gbs:
        return accelerator.memory_bandwidth_gbs * 1e9, []
    return None, [f"no published memory bandwidth for {accelerator.id}"]


def _attn_flops_per_token(w: Workload, context: float) -> float:
    """Forward attention FLOPs per token (QKᵀ and AV, causal: half the square)."""
    a = w.arch
    full = a.layers - a.sliding_window_layers
    flops = full * 2 * context * a.q_dim
    if a.sliding_window_layers:
        flops += a.sliding_window_layers * 2 * min(context, a.sliding_window) * a.q_dim
    return float(flops)


#: Shape assumed for speed when an inference workload gives neither a sequence nor a prompt length
#: (its memory is then the weights alone); the output says so.
DEFAULT_PROMPT_TOKENS = 512
DEFAULT_GEN_TOKENS = 128


def _scaling(sharding: str, gpus: int) -> float:
    if gpus <= 1:
        return 1.0
    return cal.SCALING_PER_DOUBLING[sharding] ** math.log2(gpus)


def _weight_stream_bytes(w: Workload, batch: int, pc=None) -> float:
    """Weight bytes one decode step reads: dense all; MoE the experts the batch routes to."""
    from fleet_tui.core.sizing import _weight_bytes

    a = w.arch
    pc = pc or param_counts(a)
    total = _weight_bytes(w if not w.is_training else w.derive(kind="inference"), pc)
    if not a.is_moe:
        return total
    # expected distinct experts per layer touched by `batch` tokens routing to k of E each
    touched = a.experts * (1 - (1 - a.experts_per_token / a.experts) ** batch)
    expert_params = a.layers * (pc.mlp_per_layer - pc.mlp_active_per_layer) / max(1, a.experts - a.experts_per_token)
    untouched = (a.experts - touched) * expert_params
    return total * (1 - untouched / pc.total)


@lru_cache(maxsize=8192)
def _throughput(w: Workload, acc_key: tuple, gpus: int) -> Throughput:
    acc = _ACC_BY_KEY[acc_key]
    a = w.arch
    pc = param_counts(a)
    compute_prec = w.precision if w.kind != "qlora" else "bf16"
    rate, notes = peak_flops(acc, compute_prec)
    bw, bw_notes = bandwidth(acc)
    notes = notes + bw_notes
    sharding = w.sharding if gpus > 1 else "data"
    scale = _scaling(sharding, gpus)
    n_mat = pc.matmul_active
    peak_tf = (acc.peak(w.precision) or (acc.peak("bf16") or acc.peak("fp16")
                                          if w.precision in ("int8", "int4") or w.kind == "qlora" else None))
    peak_dense = peak_tf * 1e12 if peak_tf else None

    if w.is_training:
        seq = w.seq_len or 2048
        tokens = w.batch * seq
        attn = _attn_flops_per_token(w, seq)  # causal mean: 2·seq·heads·head_dim per layer
        if w.is_adapter:
            from fleet_tui.core.sizing import _lora_params

            lora = _lora_params(a, w)
            fwd_passes = 2 if w.grad_checkpointing else 1
            flops_tok = (2 * n_mat + attn) * fwd_passes + 2 * n_mat + 2 * attn + 6 * lora
            trainable = lora
        else:
            fwd_passes = 2 if w.grad_checkpointing else 1
            flops_tok = (2 * n_mat + attn) * (2 + fwd_passes)
            trainable = pc.total
        notes.append(f"training FLOPs {flops_tok / n_mat:.1f}·N per token (N = {n_mat / 1e9:.2f}B "
                     "matmul parameters) incl. causal attention"
                     + ("; recompute adds a forward" if w.grad_checkpointing else ""))
        if gpus > 1:
            notes.append(f"{gpus} GPUs {sharding}: scaling efficiency {scale:.2f}")
        if rate is None or bw is None:  # both the GEMMs and the optimizer/cast traffic are needed
            missing = "; ".join(n for n in notes if n.startswith("no published"))
            return Throughput(tokens_per_s=None, phase="training", engine=ENGINE_TRAINING,
                              assumptions=notes, unknown=missing)
        compute_s = tokens * flops_tok / (rate * TRAINING_STEP_EFFICIENCY)
        # memory-bound: optimizer update and AMP casts
        amp = (w.master_weights == "fp32" and w.precision not in ("fp32",) and not w.is_adapter)
        state32 = amp or w.precision == "fp32" or w.is_adapter
        opt_bytes = {"adamw": 28.0, "adamw8bit": 14.0, "sgd": 20.0, "adafactor": 12.0}[w.optimizer]
        if not state32:
            opt_bytes /= 2
        mem_bytes = trainable * opt_bytes
        if amp:
            mem_bytes += pc.matmul_total * 6.0 * fwd_passes + pc.total * 6.0  # weight casts, grad casts
        mem_s = mem_bytes / (bw * COPY_BANDWIDTH_EFFICIENCY)
        step_1 = compute_s + mem_s
        tok_s = tokens / step_1 * gpus * scale
        step = tokens / tok_s  # wall time of one step of the global batch on all GPUs
        # model FLOPs utilisation: useful FLOPs (recompute excluded) over the dense peak
        model_flops_tok = flops_tok - (2 * n_mat + attn) * (fwd_passes - 1)
        mfu = tokens * model_flops_tok / step_1 / peak_dense if peak_dense else None
        return Throughput(tokens_per_s=tok_s, phase="training", step_s=step, engine=ENGINE_TRAINING,
                          bound="compute" if compute_s >= mem_s else "memory", assumptions=notes,
                          mfu=mfu)

    # inference: prefill (compute-bound, floor: streaming the weights once)
    if w.seq_len is None and w.prompt_len is None:
        notes.append(f"no sequence or prompt length given: speeds assume {DEFAULT_PROMPT_TOKENS}-token "
                     f"prompts and {DEFAULT_GEN_TOKENS} generated tokens")
    ctx_prefill = w.seq_len or w.prompt_len or DEFAULT_PROMPT_TOKENS
    prefill_flops_tok = 2 * n_mat + _attn_flops_per_token(w, ctx_prefill)
    b = w.batch
    prefill_tokens = b * ctx_prefill
    tp_div = gpus * scale if sharding == "tensor" else 1.0
    t_mem = (_weight_stream_bytes(w, max(1, prefill_tokens), pc) / (bw * cal.DECODE_BANDWIDTH_EFFICIENCY)
             if bw is not None else None)
    prefill_s = prefill_tok_s = ttft = t_cmp = None
    if rate is not None:
        t_cmp = prefill_tokens * prefill_flops_tok / (rate * PREFILL_STEP_EFFICIENCY)
        prefill_s = max(t_cmp, t_mem or 0.0) / tp_div
        prefill_tok_s = prefill_tokens / prefill_s * (gpus if sharding != "tensor" else 1)
        ttft = max(ctx_prefill * prefill_flops_tok / (rate * PREFILL_STEP_EFFICIENCY), t_mem or 0.0) / tp_div
        if t_mem is None:
            notes.append("prefill: the weight-streaming floor is not checked (memory bandwidth unknown)")

    # decode, optimized engine: batch b sequences at the mean context
    from fleet_tui.core.sizing import _kv_bytes_per_token

    prompt = w.prompt_len or w.seq_len or DEFAULT_PROMPT_TOKENS
    gen = w.gen_len or DEFAULT_GEN_TOKENS
    ctx = prompt + gen / 2
    per_gpu_b = b if sharding == "tensor" else math.ceil(b / gpus)
    tp = gpus if sharding == "tensor" else 1
    replicas = 1 if sharding == "tensor" else gpus
    d_cmp = (per_gpu_b * (2 * n_mat + 2 * _attn_flops_per_token(w, ctx)) / tp / rate
             if rate is not None else None)
    tpot = decode_tok_s = None
    bound_dec = "memory"
    if bw is not None:
        kv_read = per_gpu_b * ctx * _kv_bytes_per_token(a, w, 1, ctx)
        bytes_step = _weight_stream_bytes(w, per_gpu_b, pc) + kv_read
        d_mem = bytes_step / tp / (bw * cal.DECODE_BANDWIDTH_EFFICIENCY)
        tpot = max(d_mem, d_cmp or 0.0) / (scale if tp > 1 else 1.0)
        if tp > 1:
            # two all-reduces per layer wait on the slowest device: a latency no split removes
            sync = 2 * a.layers * cal.TP_ALLREDUCE_S_PER_DOUBLING * math.ceil(math.log2(tp))
            tpot += sync
            notes.append(f"tensor parallel over {tp}: {sync * 1e3:.2f} ms per token in all-reduces")
        decode_tok_s = per_gpu_b / tpot * replicas
        bound_dec = "memory" if d_cmp is None or d_mem >= d_cmp else "compute"
    if w.is_generation or w.seq_len is None:
        notes.insert(0, f"decode at batch {b}, mean context {ctx:.0f} tokens; weights"
                     + (" (experts the batch routes to)" if a.is_moe else "")
                     + f" and KV streamed at {cal.DECODE_BANDWIDTH_EFFICIENCY:.0%} of peak bandwidth")
        if decode_tok_s is not None and d_cmp is None:
            notes.append("decode: memory-bandwidth bound only; its compute limit is not checked "
                         "(no published peak), so at large batches this is an upper bound")
        if prefill_tok_s is None:
            notes.append("prefill speed and time to first token not estimated (no published peak)")
        notes.append("Hugging Face eager generate is launch-bound and typically 5-20x slower")
        missing = "" if decode_tok_s is not None else "; ".join(
            n for n in notes if n.startswith("no published"))
        return Throughput(tokens_per_s=decode_tok_s, phase="decode", prefill_tokens_per_s=prefill_tok_s,
                          decode_tokens_per_s=decode_tok_s, time_per_output_token_s=tpot, step_s=tpot,
                          engine=ENGINE_SERVING, bound=bound_dec, assumptions=notes,
                          time_to_first_token_s=ttft, unknown=missing)
    notes.insert(0, f"one forward pass over {b}×{ctx_prefill} tokens")
    mfu = None
    if prefill_s is not None and peak_dense:
        mfu = prefill_tokens * prefill_flops_tok / prefill_s / peak_dense / (gpus if sharding == "tensor" else 1)
    missing = "" if prefill_tok_s is not None else "; ".join(
        n for n in notes if n.startswith("no published"))
    return Throughput(tokens_per_s=prefill_tok_s, phase="prefill", prefill_tokens_per_s=prefill_tok_s,
                      decode_tokens_per_s=decode_tok_s, time_per_output_token_s=tpot, step_s=prefill_s,
                      engine=ENGINE_FORWARD,
                      bound="compute" if t_cmp is None or t_mem is None or t_cmp >= t_mem else "memory",
                      assumptions=notes, time_to_first_token_s=ttft, mfu=mfu, unknown=missing)


_ACC_BY_KEY: dict[tuple, "Accelerator"] = {}


def _acc_key(acc: "Accelerator") -> tuple:
    key = (acc.id, acc.architecture, acc.memory_bandwidth_gbs, tuple(sorted(acc.peak_tflops.items())))
    _ACC_BY_KEY.setdefault(key, acc)
    return key


def estimate_throughput(workload: Workload, accelerator: "Accelerator", gpus: int | None = None) -> Throughput:
    """Tokens/s of ``workload`` on ``gpus`` × ``accelerator`` (see the module docstring)."""
    return _throughput(workload, _acc_key(accelerator), int(gpus or workload.gpus))


def training_run(workload: Workload, accelerator: "Accelerator", gpus: int | None, tokens: int) -> RunEstimate:
    """Wall time and GPU-hours to train on ``tokens`` tokens (None when the speed is unknown)."""
    n = int(gpus or workload.gpus)
    if tokens <= 0:
        raise ValueError("tokens must be positive")
    w = workload if workload.is_training else workload.with_(kind="training")
    thr = estimate_throughput(w, accelerator, n)
    if not thr.tokens_per_s:
        return RunEstimate(seconds=None, gpu_hours=None, tokens=int(tokens), tokens_per_s=None, gpus=n,
                           unknown=thr.unknown or "training speed unknown")
    seconds = tokens / thr.tokens_per_s
    return RunEstimate(seconds=seconds, gpu_hours=seconds * n / 3600.0, tokens=int(tokens),
                       tokens_per_s=thr.tokens_per_s, gpus=n)
