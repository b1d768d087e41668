"""Time of one engine iteration with any mix of prefill chunks and decodes: the scheduler
simulation's clock (:mod:`.serving_sim`).

It is the decode step of :func:`fleet_tui.core.perf.engines.serving_speed` opened up to a mixed
batch, built from the same pieces and the same engine profile, nothing fitted anew:

* **memory**: the weights the step's tokens touch (:func:`~.rates.weight_stream_bytes`: dense all
  of them, MoE the experts its tokens route to) and the KV cache its decodes read, at the engine's
  decode bandwidth (:func:`~.engines.decode_efficiency`);
* **compute**: 2 FLOPs per matmul weight per token (prefill tokens at the MoE grouped-GEMM factor,
  as served prefill is charged) at the engine's GEMM rate (:func:`~.engines.gemm_rate`), attention
  at the 16-bit rate (decodes over their context, absorbed MLA; a prefill chunk over the tokens
  before it and half of itself);
* the two combine as the decode step does (:func:`~.engines.decode_step_s`), plus the engine's
  fixed time per step and per sequence, and the tensor-parallel all-reduces (expert parallel: the
  all-to-alls) on the step's tokens (:func:`~.engines.tp_allreduce_s`, :func:`~.engines.ep_alltoall_s`).

A decode-only step of ``b`` sequences at context ``ctx`` is :func:`serving_speed`'s ``tpot_s``
(tests/core/perf/test_serving_sim.py checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fleet_tui.core.footprint import (
    activation_bytes,
    kv_bytes_per_token,
    sequence_state_bytes,
    weight_bytes,
)
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.perf.engines import (
    EP_LOAD_IMBALANCE,
    decode_efficiency,
    decode_step_s,
    engine_profile,
    ep_alltoall_s,
    expert_parallel,
    expert_share,
    gemm_rate,
    prefill_scale,
    tp_allreduce_s,
)
from fleet_tui.core.perf.rates import attn_flops_per_token, weight_stream_bytes
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@dataclass(slots=True)
class StepModel:
    """Seconds of one iteration of a replica of ``gpus`` × ``acc`` running ``workload`` (see the
    module docstring). :meth:`seconds` is the simulator's only question; the memo dicts keep the
    per-step work to a few dict reads (context-dependent terms are looked up per 16 tokens)."""

    workload: Workload
    accelerator: Accelerator
    gpus: int
    tp: int
    ep: bool
    bandwidth: float  # achieved bytes/s while streaming
    rate: float  # FLOP/s of the engine's GEMMs in the workload's precision
    attn_rate: float  # FLOP/s of attention (16-bit)
    moe: float  # grouped-GEMM factor of MoE prefill (1 for a dense model)
    prefill_scale: float  # the engine's rate for prompt tokens (engines.ENGINE_PREFILL_SCALE)
    n_prompt: float  # matmul weights a prompt token passes
    n_mat: float  # matmul weights a generated token passes
    overhead_s: float  # fixed per step
    seq_overhead_s: float  # per sequence per step
    state_bytes: float  # linear-attention state a sequence keeps (hybrid models), per rank
    _weights: dict[int, float] = field(default_factory=dict)
    _comm: dict[int, float] = field(default_factory=dict)
    _ctx: dict[int, tuple[float, float]] = field(default_factory=dict)
    _attn: dict[int, float] = field(default_factory=dict)

    def _weights_s(self, tokens: int) -> float:
        """Memory time of the weights a step of ``tokens`` tokens streams."""
        got = self._weights.get(tokens)
        if got is None:
            w = self.workload
            if self.ep:  # this GPU's dense weights, its share of the experts the batch routes to
                pc = param_counts(w.arch)
                dense = weight_bytes(w, pc) * (1 - expert_share(w))
                streamed = dense + (weight_stream_bytes(w, tokens * self.gpus, pc) - dense) / self.gpus \
                    * EP_LOAD_IMBALANCE
            else:
                streamed = weight_stream_bytes(w, tokens) / self.tp
            got = self._weights[tokens] = streamed / self.bandwidth
        return got

    def _comm_s(self, tokens: int) -> float:
        got = self._comm.get(tokens)
        if got is None:
            w, acc = self.workload, self.accelerator
            act, a = activation_bytes(w), w.arch
            if self.ep:
                got = ep_alltoall_s(acc, self.gpus, a.layers, tokens * a.experts_per_token * a.hidden * act
                                    * EP_LOAD_IMBALANCE)
            else:
                got = tp_allreduce_s(acc, self.tp, a.layers, tokens * a.hidden * act)
            self._comm[tokens] = got
        return got

    def _decode_ctx(self, ctx: float) -> tuple[float, float]:
        """(memory s, compute s) per decoding sequence at context ``ctx`` (KV read, attention)."""
        key = int(ctx) >> 4
        got = self._ctx.get(key)
        if got is None:
            w, c = self.workload, (key << 4) + 8
            kv = (c * kv_bytes_per_token(w.arch, w, self.tp, c) + self.state_bytes) / self.bandwidth
            attn = 2 * attn_flops_per_token(w, c, absorbed=True) / self.attn_rate / self.tp
            got = self._ctx[key] = (kv, attn)
        return got

    def _prefill_attn_s(self, ctx: float) -> float:
        """Attention compute seconds per prefill token whose mean context is ``ctx``."""
        key = int(ctx) >> 4
        got = self._attn.get(key)
        if got is None:
            got = self._attn[key] = 2 * attn_flops_per_token(self.workload, (key << 4) + 8) / self.attn_rate / self.tp
        return got

    def seconds(self, decodes: int, decode_ctx_sum: float, prefill_tokens: int, prefill_ctx_sum: float) -> float:
        """One iteration: ``decodes`` sequences each generating a token (their contexts summing to
        ``decode_ctx_sum``) beside ``prefill_tokens`` prompt tokens (``prefill_ctx_sum``: the sum
        over those tokens of the context each attends to)."""
        tokens = decodes + prefill_tokens
        if tokens == 0:
            return 0.0
        mem = self._weights_s(tokens)
        cmp = 0.0
        if decodes:
            kv, attn = self._decode_ctx(decode_ctx_sum / decodes)
            mem += decodes * kv
            cmp += decodes * (2 * self.n_mat / self.rate * (EP_LOAD_IMBALANCE if self.ep else 1.0) / self.tp + attn)
        if prefill_tokens:
            cmp += prefill_tokens * (2 * self.n_prompt / (self.rate * self.moe) / self.tp
                                     + self._prefill_attn_s(prefill_ctx_sum / prefill_tokens)) / self.prefill_scale
        return (decode_step_s(mem, cmp) + self.overhead_s + (decodes + (1 if prefill_tokens else 0))
                * self.seq_overhead_s + self._comm_s(tokens))


def step_model(w: Workload, acc: Accelerator, gpus: int) -> StepModel | None:
    """The iteration time of one replica of ``gpus`` devices (tensor parallel over them unless the
    workload is expert parallel), or None when a published rate it needs is missing."""
    e = engine_profile(w)
    pc = param_counts(w.arch)
    ep = expert_parallel(w, gpus)
    tp = gpus if (w.sharding == "tensor" and gpus > 1 and not ep) else 1
    rate, _ = gemm_rate(e, acc, w.precision if w.kind != "qlora" else "bf16")
    if rate is None or not acc.memory_bandwidth_gbs:
        return None
    attn_rate = gemm_rate(e, acc, "bf16")[0] or gemm_rate(e, acc, "fp16")[0] or rate
    return StepModel(workload=w, accelerator=acc, gpus=gpus, tp=tp, ep=ep,
                     bandwidth=acc.memory_bandwidth_gbs * 1e9 * decode_efficiency(e, acc), rate=rate,
                     attn_rate=attn_rate, moe=e.moe_prefill_efficiency if w.arch.is_moe else 1.0,
                     prefill_scale=prefill_scale(e, acc),
                     n_prompt=float(pc.encoder_matmul or pc.matmul_active), n_mat=float(pc.matmul_per_target_token),
                     overhead_s=e.step_overhead_s, seq_overhead_s=e.seq_overhead_s,
                     state_bytes=sequence_state_bytes(w.arch, w, tp))


def blocks_for(tokens: int, block_size: int) -> int:
    """KV blocks that hold ``tokens`` tokens."""
    return math.ceil(tokens / block_size)
