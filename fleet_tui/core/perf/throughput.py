"""Tokens/s of a workload on an accelerator: training steps, prefill and decode (the method is in
:mod:`fleet_tui.core.perf`'s docstring, the rates and FLOP counts in :mod:`.rates`)."""

from __future__ import annotations

import math
from dataclasses import field
from typing import TYPE_CHECKING, Literal, NamedTuple

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import Layout, kv_bytes_per_token, lora_params, parallel_layout, sequence_state_bytes
from fleet_tui.core.modelspec import ParamCounts, param_counts
from fleet_tui.core.perf.engines import (
    decode_efficiency,
    decode_step_s,
    engine_profile,
    engine_statement,
    gemm_rate,
    tp_allreduce_s,
)
from fleet_tui.core.perf.rates import (
    DEFAULT_GEN_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    attn_flops_per_token,
    bandwidth,
    encoder_attn_flops_per_token,
    forward_terms,
    peak_flops,
    scaling_efficiency,
    weight_only_compute,
    weight_stream_bytes,
)
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import DEFAULT_TRAIN_SEQ_LEN, Workload

if TYPE_CHECKING:  # the links table is read only when a collective is charged (Device.links)
    from fleet_tui.core.interconnects import Fabric

ENGINE_SERVING = "optimized serving (vLLM/TensorRT-LLM class)"  # kept for callers; decode names its engine
ENGINE_FORWARD = "PyTorch forward pass (SDPA/flash attention)"

Phase = Literal["prefill", "decode", "training"]


@record
class Throughput:
    """The speed of one workload on its devices, with the assumptions behind it."""

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

class _Device(NamedTuple):
    """What ``gpus`` devices offer one workload: its achievable rates and the notes behind them."""

    params: ParamCounts
    rate: float | None  # achievable FLOP/s of one device in the compute precision
    bandwidth: float | None  # bytes/s of one device
    notes: list[str]
    sharding: str
    scale: float  # multi-GPU scaling efficiency
    peak_dense: float | None  # dense datasheet FLOP/s (for MFU)
    layout: Layout  # how the devices share the work
    fabric: Fabric | None  # the links between them as the caller gave them (None: the device's own)
    accelerator: Accelerator

    def links(self) -> Fabric:
        """The links a collective crosses: the caller's, else the device's own inside nodes of 8
        and its reference system's network between them (one device serving crosses none, so a
        run that needs no collective never reads the links table)."""
        if self.fabric is not None:
            return self.fabric
        from fleet_tui.core.interconnects import default_fabric

        return default_fabric(self.accelerator.id, self.accelerator.software_stack)


def _device(w: Workload, acc: Accelerator, gpus: int, fabric: Fabric | None) -> _Device:
    compute_prec = w.precision if w.kind != "qlora" else "bf16"
    rate, notes = peak_flops(acc, compute_prec)
    bw, bw_notes = bandwidth(acc)
    sharding = w.sharding if gpus > 1 else "data"
    layout = parallel_layout(w, gpus)
    base = "bf16" if w.kind == "qlora" else weight_only_compute(acc, w.precision)
    peak_tf = acc.peak(w.precision) or (acc.peak(base) or acc.peak("fp16") if base is not None else None)
    return _Device(params=param_counts(w.arch), rate=rate, bandwidth=bw, notes=notes + bw_notes,
                   sharding=sharding, scale=scaling_efficiency("tensor", layout.tp),
                   peak_dense=peak_tf * 1e12 if peak_tf else None,
                   layout=layout, fabric=fabric, accelerator=acc)


_THROUGHPUT = caches.memo("perf.throughput", 8192)


def estimate_throughput(workload: Workload, accelerator: Accelerator, gpus: int | None = None,
                        fabric: Fabric | None = None) -> Throughput:
    """Tokens/s of ``workload`` on ``gpus`` × ``accelerator`` (see :mod:`fleet_tui.core.perf`),
    its collectives charged on ``fabric`` (default: the device's own link inside nodes of 8 and an
    unknown, slow network between them — :func:`fleet_tui.core.interconnects.default_fabric`)."""
    n = int(gpus or workload.gpus)
    return _THROUGHPUT.get_or_compute((workload, caches.ValueKey(accelerator, accelerator.id), n, fabric),
                                      lambda: _throughput(workload, accelerator, n, fabric))


def _throughput(w: Workload, acc: Accelerator, gpus: int, fabric: Fabric | None) -> Throughput:
    d = _device(w, acc, gpus, fabric)
    if w.is_training:
        return _training(w, d, gpus)
    return _inference(w, d, gpus, acc)


def _training(w: Workload, d: _Device, gpus: int) -> Throughput:
    """One optimizer step: GEMMs at the compute rate, optimizer and AMP casts at copy bandwidth; the
    stack named per ``--framework`` (its preset's label)."""
    from fleet_tui.core.frameworks import MEASURED_ON_SMALL_MODELS, PRESETS, gemm_size_factor, statement

    a, pc = w.arch, d.params
    rate, bw, notes, peak_dense = d.rate, d.bandwidth, d.notes, d.peak_dense
    seq = w.seq_len or DEFAULT_TRAIN_SEQ_LEN
    # causal mean attention: 2·seq·heads·head_dim per layer (encoder-decoder: per source + target token)
    n_mat, attn, per_seq = forward_terms(w, seq)
    tokens = w.batch * per_seq
    if a.is_encoder_decoder:
        notes.append(f"encoder-decoder: a step's tokens are source + target ({per_seq} per sequence); a source "
                     "token passes the encoder, a target token the decoder and head (2 FLOPs per weight each)")
    if w.is_adapter:
        lora = lora_params(a, w)
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
    if rate is None or bw is None:  # both the GEMMs and the optimizer/cast traffic are needed
        missing = "; ".join(n for n in notes if n.startswith("no published"))
        return Throughput(tokens_per_s=None, phase="training", engine=PRESETS[w.framework].label,
                          assumptions=notes, unknown=missing)
    fw = PRESETS[w.framework]
    # the measured presets' efficiency (hf and the stacks sharing it) holds for 1B-8B widths
    size = gemm_size_factor(a.hidden, rate / peak_dense if peak_dense else 0.0,
                            narrow=w.framework not in MEASURED_ON_SMALL_MODELS)
    compute_s = tokens * flops_tok / (rate * fw.step_efficiency * size)
    if size > 1.0:
        notes.append(f"hidden size {a.hidden}: large GEMMs run {size - 1:.0%} closer to peak than at 4096")
    elif size < 1.0:
        notes.append(f"hidden size {a.hidden}: narrow GEMMs run {1 - size:.0%} further from peak than at 4096")
    # memory-bound: optimizer update and AMP casts (FSDP/Megatron mixed precision keeps no
    # per-step autocast copies of the weights: parameters are cast once, shard by shard)
    amp = (w.master_weights == "fp32" and w.precision not in ("fp32",) and not w.is_adapter
           and fw.precision == "amp")
    state32 = amp or w.precision == "fp32" or w.is_adapter
    opt_bytes = {"adamw": 28.0, "adamw8bit": 14.0, "paged_adamw8bit": 14.0, "sgd": 20.0,
                 "adafactor": 12.0}[w.optimizer]
    if not state32:
        opt_bytes /= 2
    mem_bytes = trainable * opt_bytes
    if amp:
        mem_bytes += pc.matmul_total * 6.0 * fwd_passes + pc.total * 6.0  # weight casts, grad casts
    mem_s = mem_bytes / (bw * cal.COPY_BANDWIDTH_EFFICIENCY)
    step_1 = compute_s + mem_s
    # the layout's share of the step plus every collective on the link it crosses
    from fleet_tui.core.perf import collectives  # training and pipelines only: inference on one device needs none

    fwd_flops = 2 * n_mat + attn
    par = collectives.training_step(w, pc, d.layout, d.links(), step_1,
                                    attention_share=attn / fwd_flops * (compute_s / step_1))
    if w.framework != "hf":
        notes.insert(0, statement(w.framework, gpus))
    if gpus > 1:
        notes.append(f"{gpus} devices as {d.layout.label()}; {d.links().describe(gpus)}")
        notes.extend(par.notes)
    step = par.seconds  # wall time of one step of the global batch on all devices
    tok_s = tokens / step
    # model FLOPs utilisation: useful FLOPs (recompute excluded) over the dense peak
    model_flops_tok = flops_tok - (2 * n_mat + attn) * (fwd_passes - 1)
    mfu = tokens * model_flops_tok / (step * gpus) / peak_dense if peak_dense else None
    if w.offload:
        notes.append(f"offload of {', '.join(w.offload)} to CPU memory: its PCIe transfers are not charged "
                     "(they overlap compute when the step is long enough)")
    return Throughput(tokens_per_s=tok_s, phase="training", step_s=step, engine=PRESETS[w.framework].label,
                      bound="compute" if compute_s >= mem_s else "memory", assumptions=notes,
                      mfu=mfu)


class _Prefill(NamedTuple):
    """The prompt's pass: its seconds and tokens/s (None without a compute rate), the time to first
    token, its compute and weight-streaming times, and the rate decode computes at."""

    seconds: float | None
    tokens_per_s: float | None
    ttft: float | None
    t_cmp: float | None
    t_mem: float | None
    tokens: int
    flops_per_token: float
    ctx: int
    decode_rate: float | None


def _inference(w: Workload, d: _Device, gpus: int, acc: Accelerator) -> Throughput:
    """Prefill (compute-bound, floored by streaming the weights) and decode (an optimized engine)."""
    a, notes, peak_dense, b = w.arch, d.notes, d.peak_dense, w.batch
    eng = engine_profile(w)
    pre = _prefill(w, d, acc)
    prefill_s, prefill_tok_s, ttft, t_cmp, t_mem = pre.seconds, pre.tokens_per_s, pre.ttft, pre.t_cmp, pre.t_mem
    tpot, decode_tok_s, bound_dec, ctx = _decode(w, d, gpus, acc, pre.decode_rate)
    if w.is_generation or w.seq_len is None:
        notes.insert(0, f"decode at batch {b}, mean context {ctx:.0f} tokens; weights"
                     + (" (experts the batch routes to)" if a.is_moe else "")
                     + f" and KV streamed at {decode_efficiency(eng, acc):.0%} of peak bandwidth")
        notes.insert(0, engine_statement(w))
        if decode_tok_s is not None and pre.decode_rate is None:  # no compute rate: no decode compute term
            notes.append("decode: memory-bandwidth bound only; its compute limit is not checked "
                         "(no published peak), so at large batches this is an upper bound")
        if prefill_tok_s is None:
            notes.append("prefill speed and time to first token not estimated (no published peak)")
        if w.engine != "hf":
            notes.append("Hugging Face eager generate is launch-bound and typically 5-20x slower")
        missing = "" if decode_tok_s is not None else "; ".join(
            n for n in notes if n.startswith("no published"))
        return Throughput(tokens_per_s=decode_tok_s, phase="decode", prefill_tokens_per_s=prefill_tok_s,
                          decode_tokens_per_s=decode_tok_s, time_per_output_token_s=tpot, step_s=tpot,
                          engine=eng.label, bound=bound_dec, assumptions=notes,
                          time_to_first_token_s=ttft, unknown=missing)
    notes.insert(0, f"one forward pass over {b}×{pre.ctx} tokens")
    mfu = None
    if prefill_s is not None and peak_dense:
        mfu = pre.tokens * pre.flops_per_token / prefill_s / peak_dense / d.layout.model_split
    missing = "" if prefill_tok_s is not None else "; ".join(
        n for n in notes if n.startswith("no published"))
    return Throughput(tokens_per_s=prefill_tok_s, phase="prefill", prefill_tokens_per_s=prefill_tok_s,
                      decode_tokens_per_s=decode_tok_s, time_per_output_token_s=tpot, step_s=prefill_s,
                      engine=ENGINE_FORWARD,
                      bound="compute" if t_cmp is None or t_mem is None or t_cmp >= t_mem else "memory",
                      assumptions=notes, time_to_first_token_s=ttft, mfu=mfu, unknown=missing)


def _prefill(w: Workload, d: _Device, acc: Accelerator) -> _Prefill:
    """The prompt's pass (compute-bound, floor: streaming the weights once), at the engine's own GEMM
    rate when it serves."""
    a, pc = w.arch, d.params
    rate, bw, notes, scale = d.rate, d.bandwidth, d.notes, d.scale
    if w.seq_len is None and w.prompt_len is None:
        notes.append(f"no sequence or prompt length given: speeds assume {DEFAULT_PROMPT_TOKENS}-token "
                     f"prompts and {DEFAULT_GEN_TOKENS} generated tokens")
    ctx_prefill = w.seq_len or w.prompt_len or DEFAULT_PROMPT_TOKENS
    b = w.batch
    if a.is_encoder_decoder and not w.seq_len:  # the prompt is the encoder's: it alone reads it
        prefill_flops_tok = 2 * pc.encoder_matmul + encoder_attn_flops_per_token(w, ctx_prefill)
        prefill_tokens = b * ctx_prefill
    else:  # a forward pass (encoder-decoder: over source + target tokens)
        mat, attn, per_seq = forward_terms(w, ctx_prefill)
        prefill_flops_tok = 2 * mat + attn
        prefill_tokens = b * per_seq
    tp_div = d.layout.tp * scale
    t_mem = (weight_stream_bytes(w, max(1, prefill_tokens), pc, decode=False) / (bw * cal.DECODE_BANDWIDTH_EFFICIENCY)
             if bw is not None else None)
    prefill_s = prefill_tok_s = ttft = t_cmp = None
    eng = engine_profile(w)
    # served (generation, or a model loaded for serving): the engine's own GEMM efficiency, which the
    # validation rows fitted end to end (FP8 prefill on Hopper ~0.7 of the fp8 peak, where the
    # Hugging Face forward reaches about a third); a bare forward pass stays Hugging Face's
    step_rate = rate * cal.PREFILL_STEP_EFFICIENCY if rate is not None else None
    decode_rate = rate
    if w.engine != "hf" and (w.is_generation or w.seq_len is None) and rate is not None:
        served, _ = gemm_rate(eng, acc, w.precision)
        if served is not None:
            step_rate = served * (eng.moe_prefill_efficiency if a.is_moe else 1.0)
            decode_rate = served
    if step_rate is not None:  # (set exactly when rate is)
        t_cmp = prefill_tokens * prefill_flops_tok / step_rate
        prefill_s = max(t_cmp, t_mem or 0.0) / tp_div
        prefill_tok_s = prefill_tokens / prefill_s * d.layout.dp
        ttft = max(ctx_prefill * prefill_flops_tok / step_rate, t_mem or 0.0) / tp_div
        if t_mem is None:
            notes.append("prefill: the weight-streaming floor is not checked (memory bandwidth unknown)")
    return _Prefill(prefill_s, prefill_tok_s, ttft, t_cmp, t_mem, prefill_tokens, prefill_flops_tok, ctx_prefill,
                    decode_rate)


def _decode(w: Workload, d: _Device, gpus: int, acc: Accelerator,
            decode_rate: float | None) -> tuple[float | None, float | None, Literal["compute", "memory"], float]:
    """(seconds per output token, tokens/s, what bounds it, the mean context) of decoding the batch
    on an optimized engine, with the collectives of a split layout."""
    a, pc, bw, notes, b = w.arch, d.params, d.bandwidth, d.notes, w.batch
    eng = engine_profile(w)
    # batch b sequences at the mean context
    prompt = w.prompt_len or w.seq_len or DEFAULT_PROMPT_TOKENS
    gen = w.gen_len or DEFAULT_GEN_TOKENS
    ctx = prompt + gen / 2
    lay = d.layout
    per_gpu_b = math.ceil(b / lay.dp)  # sequences of one replica
    tp = lay.tp
    replicas = lay.dp
    # a generated token passes the decoder (encoder-decoder: not the encoder); its self- and
    # cross-attention span the same prompt + generated context as a decoder-only model's
    d_cmp = (per_gpu_b * (2 * pc.matmul_per_target_token + 2 * attn_flops_per_token(w, ctx)) / tp / decode_rate
             if decode_rate is not None else None)
    tpot = decode_tok_s = None
    bound_dec: Literal["compute", "memory"] = "memory"
    if bw is not None:
        kv_read = per_gpu_b * (ctx * kv_bytes_per_token(a, w, 1, ctx) + sequence_state_bytes(a, w))
        bytes_step = weight_stream_bytes(w, per_gpu_b, pc) + kv_read
        d_mem = bytes_step / tp / (bw * decode_efficiency(eng, acc))
        tpot = decode_step_s(d_mem, d_cmp or 0.0) + eng.step_overhead_s + per_gpu_b * eng.seq_overhead_s
        if tp > 1 or lay.pp > 1:
            # all-reduces per layer wait on the slowest device: inside one tensor-parallel group the
            # engine-fitted cost (latency plus the ring's bytes on the device's link); a pipeline's
            # stage hand-offs are charged on the fabric they cross
            from fleet_tui.core.perf import collectives

            sync = (tp_allreduce_s(acc, tp, a.layers, per_gpu_b * a.hidden * 2) if lay.pp == 1
                    else collectives.decode_sync_s(w, lay, d.links(), per_gpu_b))
            tpot += sync
            notes.append(f"{lay.label()}: {sync * 1e3:.2f} ms per token in collectives "
                         f"({d.links().describe(gpus)})")
        decode_tok_s = per_gpu_b / tpot * replicas
        bound_dec = "memory" if d_cmp is None or d_mem >= d_cmp else "compute"
    return tpot, decode_tok_s, bound_dec, ctx
