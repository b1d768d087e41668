"""Serving engines as documented profiles: how each batches, reserves memory and how fast its kernels run.

One :class:`EngineProfile` per engine in :data:`ENGINES` (``--engine``); the serving speed
(:func:`serving_speed`) and the KV pool (:func:`kv_pool`) read only these records, so an engine is
one entry here.

Method (one formula per phase, the constants per engine):

* **KV pool** per GPU. vLLM: ``gpu_memory_utilization × total − weights − non-torch memory −
  the activation peak of one ``max_num_batched_tokens`` chunk − CUDA graphs`` (vLLM's profile run,
  ``worker.determine_num_available_blocks``). SGLang: ``mem_fraction_static × total − weights``.
  TensorRT-LLM: ``kv_cache_free_gpu_mem_fraction × (free memory after weights and activations)``.
  Under tensor parallelism every rank also pays NCCL/custom all-reduce buffers and keeps its own
  activation workspace, so the pool is not "total memory − weights/tp" (the old estimate was
  ~10 GiB per GPU too generous there).
* **Concurrency** of an offline run: as many sequences as the pool holds, each charged what the
  scheduler reserves for it — TensorRT-LLM's default ``GUARANTEED_NO_EVICT`` policy reserves the
  whole ``input + output`` up front; vLLM and SGLang allocate blocks as tokens are generated, so a
  sequence holds ``input + output/2`` on average — capped by the engine's batch limit and the
  client's concurrency.
* **Prefill** is compute-bound: FLOPs at the dense datasheet peak × the engine's GEMM efficiency
  for the architecture and precision (:attr:`EngineProfile.gemm_efficiency`); MoE prefill pays the
  grouped-GEMM factor :attr:`EngineProfile.moe_prefill_efficiency`.
* **Decode** streams the weights the batch touches and the batch's KV cache once per step at
  :attr:`EngineProfile.decode_bandwidth_efficiency` of the datasheet bandwidth, and does the
  batch's matmuls (attention at the 16-bit rate, MLA in its absorbed form); the two times combine
  as a p-norm (:func:`decode_step_s`, p = 2: near the ridge point kernels reach neither limit);
  each step also pays a fixed scheduling/sampling time and, under tensor parallelism, two
  all-reduces per layer.
* Offline throughput = output tokens / (prefill time + decode time) of the whole run.

Fitted by ``bench/fit_serving.py`` (grid search, median |error| on tune throughput rows 0.18):
decode bandwidth efficiency 0.70 (0.6-0.8 tried), 10 µs per sequence per step, TensorRT-LLM batch
cap 1024, all-reduce efficiency 0.5; the MoE grouped-GEMM factor 0.7 (the fit is flat between 0.7
and 1.0; 0.7 matches the ~30 % MoE prefill shortfall the old model showed).

Re-run with a mean capped |log error| objective (the median is moved
only by rows near it, so a median fit over-fits them: 9 % tune vs 21 % holdout) after attention
moved to the 16-bit rate and MLA decode to its absorbed form: the same constants came back within
one grid step except the decode factors (ARCH_DECODE_FACTOR: Hopper 1.1 -> 1.0, Blackwell 0.7 ->
0.8, Ada 1.0 -> 1.1; mean |log| on tune rows 0.1825 -> 0.1731, median 9.7 % -> 10.6 %), then the
decode step's p-norm :data:`ROOF_P` = 2 (0.1731 -> 0.1675, median 9.3 %).

Third pass (CDNA): AMD's own vLLM tables for 8x MI300X (rocm/vllm containers of Sep-Nov 2025,
``serving_amd.toml``) and its MLPerf v4.1 submission run Llama 70B/405B 2.5-5x faster than the
2024 - early 2025 community ROCm builds (dstack's vLLM 0.6.3/0.7.3 and SGLang 0.4.2 runs) that the
CDNA constants had been fitted to, so every MI300X estimate was that much too slow (a 70B prefill
9x below an H100). Those builds, and the first DeepSeek-R1 releases on H200 (2-7x below TensorRT-LLM
1.x on the same GPU), are named in ``bench/validation_rows.py`` (``SUPERSEDED_RELEASES``) and left
out of the fit, which now takes a grid step only for a gain of at least 0.001 (``MIN_GAIN``: the
objective is flat to a few 1e-4 near the optimum). Refitted from the CDNA starting points (GEMM
0.45/0.40, decode factor 1.0): CDNA GEMM stays at its start, CDNA decode factor 0.5, nothing else
moves (mean |log| on the tune rows 0.1290 -> 0.1267; the superseded rows stay in the set, predicted
as the current releases run).

Fourth pass, through the product's path (the scheduler simulation, not the analytic model):
``bench/fit_serving.py --only CDNA`` moved the CDNA decode factor 0.5 -> 0.4 and its GEMM table
x0.7 (AMD's table runs 1,500-3,200 sequences at once, compute-bound, where the analytic model had
fitted at its 256-sequence cap; mean |log| 0.1558 -> 0.1439), and ``--engines`` fitted vLLM's and
SGLang's rate for prompt tokens on Hopper (:data:`ENGINE_PREFILL_SCALE`, 0.1471 -> 0.1380, after the
simulation kept a preempted vLLM request's cached blocks) and TensorRT-LLM's on Blackwell
(0.1393 -> 0.1380); the MoE grouped-GEMM factor and the expert-parallel imbalance refitted the same
way (``--globals moe ep_imbalance``) come back unchanged.

The constants were fitted on the ``split = "tune"`` rows of ``tests/fixtures/validation/serving.toml``,
``serving_amd.toml`` and ``kv_capacity.toml`` only (``bench/bench_validation.py`` prints the error on tune and holdout
rows separately). Sources of the engine defaults are on each field.
"""

from __future__ import annotations

import math
from dataclasses import field

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import (
    activation_bytes,
    kv_bytes_per_token,
    parallel_layout,
    parallel_split,
    sequence_state_bytes,
    weight_bytes,
)
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.perf.profile_run import profile_peak_bytes, static_buffers_bytes
from fleet_tui.core.perf.rates import attn_flops_per_token, weight_only_compute, weight_stream_bytes
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class EngineProfile:
    """One serving engine's defaults and fitted efficiencies (module docstring: where each comes from)."""

    id: str
    label: str
    batching: str  # "continuous" (iteration-level scheduling) or "static" (one batch at a time)
    #: how the KV pool is sized: "total" (a share of device memory: vLLM, SGLang), "free" (a share of
    #: what is left after weights and activations: TensorRT-LLM), "dynamic" (grows per request: HF)
    memory_rule: str
    memory_utilization: float  # default share (gpu_memory_utilization / mem_fraction_static / ...)
    batched_tokens: int  # default tokens per step (max_num_batched_tokens / max_num_tokens / chunk)
    max_seqs: int  # default cap on sequences in flight
    reserve_full_sequence: bool  # KV reserved for input+output at admission (no eviction)
    cuda_graph_bytes: int  # memory CUDA graphs capture per GPU
    #: sizes its pool after a profile run whose forward is freed before the sampler runs (vLLM:
    #: perf/profile_run.py); otherwise its activation and logits buffers coexist
    profiles_peak: bool
    #: extra memory per GPU the engine keeps outside the KV pool once tensor parallel (worker
    #: processes' own CUDA contexts and allocator pools, custom all-reduce IPC buffers); fitted on
    #: the tune TP rows of kv_capacity.toml (bench/fit_kv.py)
    tp_reserve_bytes: int
    #: fraction of the dense datasheet peak the engine's GEMMs reach, by architecture prefix and
    #: precision family ("16" = bf16/fp16, "8" = fp8, "4" = fp4)
    gemm_efficiency: dict[str, dict[str, float]]
    moe_prefill_efficiency: float  # grouped-GEMM MoE layers vs a dense GEMM of the same FLOPs
    decode_bandwidth_efficiency: float  # achieved share of HBM bandwidth while streaming in decode
    step_overhead_s: float  # scheduling and launch time per decode step
    seq_overhead_s: float  # per sequence per step: sampling, detokenizing, block-table updates
    sources: tuple[str, ...] = field(default=())


#: Engine GEMM efficiency (share of the dense datasheet peak) by architecture and precision family.
#: Starting points: H200 bf16 GEMMs measured at 0.67 (calibration.MATMUL_EFFICIENCY); field notes
#: §3.4: TensorRT-LLM FP8 prefill above half of the fp8 peak on Hopper/Ada (the HF-based model gave
#: a third). Scaled per architecture by bench/fit_serving.py on the tune rows (two passes): Hopper
#: 0.60 -> 0.79 bf16 (cuBLAS reaches ~0.75-0.8 of the H100 dense peak on large GEMMs at 700 W),
#: Ampere 0.70 -> 0.80, Ada unchanged, Blackwell 0.55 -> 0.47 (bf16; TensorRT-LLM 1.x B200/GB200
#: tables), CDNA 0.45 x 0.7 (AMD's rocm/vllm containers and MLPerf v4.1 submission, refitted through
#: the simulation: the module docstring, fourth pass; it had gone to 0.07 when
#: fitted to the 2024 - early 2025 community ROCm builds, whose 10,000-token prompt of Llama-3.1-405B
#: took 12 s on 8 MI300X, ~6 % of the peak: see the module docstring, third pass).
_GEMM_DEFAULT = {"Hopper": {"16": 0.79, "8": 0.72, "4": 0.72}, "Blackwell": {"16": 0.47, "8": 0.43, "4": 0.38},
                 "Ampere": {"16": 0.80, "8": 0.80, "4": 0.80}, "Ada": {"16": 0.55, "8": 0.55, "4": 0.55},
                 "CDNA": {"16": 0.32, "8": 0.28, "4": 0.28}, "default": {"16": 0.45, "8": 0.40, "4": 0.40}}

#: The rate of an engine's iterations that carry prompt tokens, relative to the shared GEMM table above
#: (whose Hopper entries the TensorRT-LLM tables set), by architecture; decode-only iterations keep
#: the table's rate. Fitted by ``bench/fit_serving.py --engines`` on the tune rows. vLLM 0.11 and
#: SGLang 0.5 on Hopper: bursts of 500-1,000 requests of 2K, 4K or 32K prompts on one H100
#: (Qwen3-14B, GPUStack's performance lab) prefill at the same ~30 % of the bf16 peak (vLLM) and
#: ~20 % of the fp8 peak (SGLang FP8) whether attention is 3 % or a third of the work, so the
#: shortfall is the whole mixed forward (batches above the captured CUDA-graph sizes run piecewise,
#: PyTorch-side norms, rotary and activation kernels), not the attention kernel or the scheduler.
ENGINE_PREFILL_SCALE: dict[str, dict[str, float]] = {"vllm": {"Hopper": 0.40}, "sglang": {"Hopper": 0.35},
                                                    "trtllm": {"Blackwell": 1.3}}


def prefill_scale(e: EngineProfile, acc: Accelerator) -> float:
    """Share of the GEMM table's rate an iteration's prompt tokens are computed at (see above)."""
    table = ENGINE_PREFILL_SCALE.get(e.id)
    return _arch_entry({**table, "default": 1.0}, acc) if table else 1.0


ENGINES: dict[str, EngineProfile] = {
    "vllm": EngineProfile(
        id="vllm", label="vLLM (continuous batching, paged KV cache, CUDA graphs)", batching="continuous",
        memory_rule="total", memory_utilization=0.90, batched_tokens=8192, max_seqs=256,
        reserve_full_sequence=False, cuda_graph_bytes=0, profiles_peak=True, tp_reserve_bytes=int(3.8 * cal.GiB),
        gemm_efficiency=_GEMM_DEFAULT, moe_prefill_efficiency=0.70, decode_bandwidth_efficiency=0.70,
        step_overhead_s=2.0e-3, seq_overhead_s=1e-5,
        sources=("vLLM EngineArgs defaults: gpu_memory_utilization 0.9, max_num_seqs 256, chunked-prefill "
                 "max_num_batched_tokens 8192 (docs.vllm.ai, engine arguments)",
                 "tensor parallel on NVLink: 3.8 GiB per GPU outside the pool beyond NCCL's buffers, fitted "
                 "with profile_run.SAMPLER_COPIES by bench/fit_kv.py on the tune rows of kv_capacity.toml "
                 "(was 4.9 GiB from two rows, 405B TP8 and Qwen3-235B TP4; the vllm 0.19 Llama/Qwen TP2-4 "
                 "rows keep ~2.1 GiB, the 2023-24 releases more)",
                 "vLLM (V0, V1 through 0.19) captures CUDA graphs after sizing the KV pool: not in its budget",
                 "vLLM worker profile run: KV = utilization x total - weights - non-torch - the profile's "
                 "peak, the wider of the forward over max_num_batched_tokens and the sampler over "
                 "max_num_seqs (fleet_tui/core/perf/profile_run.py)")),
    "trtllm": EngineProfile(
        id="trtllm", label="TensorRT-LLM (in-flight batching, paged KV cache, CUDA graphs)",
        batching="continuous", memory_rule="free", memory_utilization=0.90, batched_tokens=8192,
        max_seqs=1024, reserve_full_sequence=True, cuda_graph_bytes=int(0.5 * cal.GiB), profiles_peak=False,
        tp_reserve_bytes=0,
        gemm_efficiency=_GEMM_DEFAULT, moe_prefill_efficiency=0.70, decode_bandwidth_efficiency=0.70,
        step_overhead_s=1.0e-3, seq_overhead_s=1e-5,
        sources=("TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction default 0.9; scheduler policy "
                 "GUARANTEED_NO_EVICT by default; max_num_tokens 8192 (TensorRT-LLM docs, perf-overview)",)),
    "sglang": EngineProfile(
        id="sglang", label="SGLang (continuous batching, radix KV cache, CUDA graphs)", batching="continuous",
        memory_rule="total", memory_utilization=0.88, batched_tokens=8192, max_seqs=1024,
        reserve_full_sequence=False, cuda_graph_bytes=int(0.5 * cal.GiB), profiles_peak=False, tp_reserve_bytes=0,
        gemm_efficiency=_GEMM_DEFAULT, moe_prefill_efficiency=0.70,
        decode_bandwidth_efficiency=0.70, step_overhead_s=2.0e-3, seq_overhead_s=1e-5,
        sources=("SGLang server args: mem_fraction_static ~0.88 on 80 GB GPUs (set from GPU memory), "
                 "chunked_prefill_size 8192 (docs.sglang.ai, server arguments)",)),
    "hf": EngineProfile(
        id="hf", label="Hugging Face generate (static batch, dynamic cache, eager launches)", batching="static",
        memory_rule="dynamic", memory_utilization=1.0, batched_tokens=0, max_seqs=1 << 30,
        reserve_full_sequence=True, cuda_graph_bytes=0, profiles_peak=False, tp_reserve_bytes=0,
        gemm_efficiency={k: {p: e * 0.74 for p, e in v.items()} for k, v in _GEMM_DEFAULT.items()},
        moe_prefill_efficiency=0.5, decode_bandwidth_efficiency=0.12, step_overhead_s=0.0,
        seq_overhead_s=0.0,
        sources=("H200 ground truth (tests/fixtures/h200): HF eager generate reaches ~0.12 of peak "
                 "bandwidth at batch 1 (35 tokens/s for an 8B model)",)),
}


#: Decode bandwidth reached on each architecture relative to the engine's figure (Hopper = 1):
#: attention and MoE kernels are tuned first for Hopper; fitted per architecture on the tune rows
#: by bench/fit_serving.py (mean capped |log error| on tune throughput rows 0.1825 -> 0.1731):
#: Hopper 1.0 (0.70 of peak), Blackwell 0.8 (B200/GB200 reach ~0.56 of their 8 TB/s in the
#: TensorRT-LLM 1.x tables), Ada 1.1 (L40S GDDR6 streams at ~0.77), CDNA 0.4 (AMD's rocm/vllm
#: containers of Sep-Nov 2025 through the simulation, fourth pass: ~0.28 of the MI300X's 5.3 TB/s).
ARCH_DECODE_FACTOR = {"Hopper": 1.0, "Blackwell": 0.8, "Ampere": 1.0, "Ada": 1.1, "CDNA": 0.4, "default": 1.0}


def _arch_entry(table: dict, acc: Accelerator):
    arch = (acc.architecture or "").lower()
    return next((v for k, v in table.items() if k != "default" and arch.startswith(k.lower())), table["default"])


def decode_efficiency(e: EngineProfile, acc: Accelerator) -> float:
    """Share of the datasheet bandwidth the engine's decode step streams at on ``acc``."""
    return min(0.95, e.decode_bandwidth_efficiency * _arch_entry(ARCH_DECODE_FACTOR, acc))


def engine_profile(w: Workload) -> EngineProfile:
    if w.engine is None:  # (Workload.__post_init__ sets the default engine)
        raise ValueError("the workload names no serving engine")
    return ENGINES[w.engine]


def engine_statement(w: Workload) -> str:
    """One line naming the engine the serving numbers describe (printed in every output)."""
    e = engine_profile(w)
    default = " (default)" if w.engine == "vllm" else ""
    return f"serving engine: {e.id}{default}, {e.label}"


def precision_family(precision: str) -> str:
    return {"fp8": "8", "fp4": "4"}.get(precision, "16")


def gemm_rate(e: EngineProfile, acc: Accelerator, precision: str) -> tuple[float | None, str]:
    """Achievable FLOP/s of one device for the engine's GEMMs in ``precision``, and a note."""
    arch = acc.architecture or ""
    table = _arch_entry(e.gemm_efficiency, acc)
    p = acc.peak_tflops
    note = ""
    family = precision_family(precision)
    base = weight_only_compute(acc, precision)
    if base is not None:  # de-quantized in a 16-bit GEMM (int8/int4; fp8 without fp8 tensor cores)
        peak = acc.peak(base)
        peak = peak * cal.WEIGHT_ONLY_QUANT_COMPUTE_FACTOR if peak else None
        family = precision_family(base)
        if precision == "fp8":
            note = f"fp8 weights de-quantized to {base} (weight-only, no fp8 tensor cores): {base} GEMM rate"
    elif precision == "fp4":
        peak = p.get("fp4")
        if peak is None and arch.lower().startswith("blackwell") and p.get("fp8"):
            peak = 2 * p["fp8"]  # NVIDIA Blackwell datasheets: dense FP4 = 2 x dense FP8 (B200 9 vs 4.5 PF)
            note = "fp4 peak taken as 2x the fp8 peak (Blackwell datasheets)"
        elif peak is None and p.get("fp8"):
            peak = p["fp8"]  # no fp4 tensor cores: weights de-quantized to fp8
            note = "no fp4 tensor cores: fp4 weights computed at the fp8 rate"
    elif precision == "fp8" and "fp8" not in p:
        peak = p.get("bf16") or p.get("fp16")
        note = "no fp8 tensor cores: fp8 weights computed at the 16-bit rate"
    else:
        peak = acc.peak(precision)
    if not peak:
        return None, f"no published {precision} peak for {acc.id}"
    return peak * 1e12 * table[family], note


@record
class KVPool:
    """The KV-cache pool an engine keeps on each GPU once its other reservations are made."""

    free_bytes: float  # KV pool of one GPU
    bytes_per_token: float  # per GPU (KV heads split over tensor ranks)
    tokens: int  # tokens one replica (tensor group) holds
    parts: dict[str, float]  # what the engine set aside before the pool, per GPU


def expert_parallel(w: Workload, gpus: int) -> bool:
    """Attention data parallel + expert parallel (``--expert-parallel`` on a MoE model, several GPUs)."""
    return w.expert_parallel and w.arch.is_moe and gpus > 1


def expert_share(w: Workload) -> float:
    """Share of the stored weight bytes that sit in the routed experts."""
    pc = param_counts(w.arch)
    routed = w.arch.layers * pc.mlp_per_layer * w.arch.experts / (w.arch.experts + w.arch.shared_experts)
    return min(1.0, routed / pc.total)


@record
class EngineReserve:
    """What an engine sets aside on each GPU before its KV pool, and how it sizes the pool."""

    weights: float
    non_torch: float
    activation_peak: float
    cuda_graphs: float
    utilization: float  # gpu_memory_utilization / free_gpu_memory_fraction / mem_fraction_static
    rule: str  # EngineProfile.memory_rule
    tp: int  # KV heads are split over this many ranks (1 under expert parallel)
    pp: int = 1  # pipeline stages: each GPU holds 1/pp of the layers' weights and KV

    @property
    def parts(self) -> dict[str, float]:
        return {"weights": self.weights, "non_torch": self.non_torch, "activation_peak": self.activation_peak,
                "cuda_graphs": self.cuda_graphs}

    def pool_bytes(self, total: float) -> float:
        """The KV pool of one GPU with ``total`` usable bytes (negative: the engine cannot start)."""
        fixed = self.weights + self.non_torch + self.activation_peak + self.cuda_graphs
        if self.rule == "free":
            return (total - cal.CUDA_CONTEXT_BYTES - fixed) * self.utilization
        if self.rule == "total":
            return total * self.utilization - fixed
        if self.rule == "static":  # SGLang: mem_fraction_static covers weights + KV; activations outside it
            return total * self.utilization - self.weights
        return total - cal.CUDA_CONTEXT_BYTES - fixed

    def total_for_pool(self, pool: float) -> float:
        """The least usable bytes per GPU on which the pool reaches ``pool`` bytes (the inverse of
        :meth:`pool_bytes`; SGLang also needs its activations to fit outside its static share)."""
        fixed = self.weights + self.non_torch + self.activation_peak + self.cuda_graphs
        if self.rule == "free":
            return cal.CUDA_CONTEXT_BYTES + fixed + pool / self.utilization
        if self.rule == "total":
            return (fixed + pool) / self.utilization
        if self.rule == "static":
            return max((self.weights + pool) / self.utilization, fixed + pool + cal.CUDA_CONTEXT_BYTES)
        return cal.CUDA_CONTEXT_BYTES + fixed + pool


_RESERVES = caches.memo("perf.engine_reserve", 4096)


def engine_reserve(w: Workload, gpus: int, seq_tokens: int, fabric: bool) -> EngineReserve:
    """The engine's charges per GPU before its pool (see the module docstring). ``fabric``: the GPUs
    talk over NVLink-class links, which add NCCL's channels and the custom all-reduce buffers.
    Expert parallel: every GPU keeps the attention and dense weights and 1/gpus of the experts.
    Memoised: it does not depend on the device, so a ranking computes it once per device count
    (bench/bench_recommend.py)."""
    linked = fabric and gpus > 1  # one device has no links: one entry for both
    return _RESERVES.get_or_compute((w, gpus, seq_tokens, linked),
                                    lambda: _engine_reserve(w, gpus, seq_tokens, linked))


def _engine_reserve(w: Workload, gpus: int, seq_tokens: int, fabric: bool) -> EngineReserve:
    e = engine_profile(w)
    arch = w.arch
    pc = param_counts(arch)
    _, tp, _ = parallel_split(w if w.sharding != "fsdp" else w.derive(sharding="data"), gpus)
    pp = parallel_layout(w, gpus).pp if w.sharding != "fsdp" else 1
    weights = weight_bytes(w.derive(kind="inference") if w.is_training else w, pc) / (tp * pp)
    ep = expert_parallel(w, gpus)
    if ep:
        tp = 1
        weights = weight_bytes(w, pc) * (1 - expert_share(w) * (1 - 1 / gpus))
    act = activation_bytes(w)
    cfg = w.engine_config
    chunk = cfg.max_num_batched_tokens or e.batched_tokens or seq_tokens
    util = cfg.gpu_memory_utilization or e.memory_utilization
    # NVLink-class links get NCCL's NVLink channels and the engines' custom all-reduce IPC buffers;
    # PCIe boards without peer-to-peer (RTX 4090, T4, L40S) use neither: vLLM logs 0.25 GiB of
    # non-torch memory at TP 2 on 2×4090 (kv_capacity.toml, i13061)
    linked = (tp > 1 or ep) and fabric
    non_torch = cal.SERVING_NON_TORCH_BYTES + (cal.COMM_BUFFERS_BYTES + e.tp_reserve_bytes if linked else 0)
    # seqs: the engines' own caps above 256 (TensorRT-LLM, SGLang: 1024) are admission limits, not
    # what their start-up profile samples
    seqs = cfg.max_num_seqs or min(e.max_seqs, 256)
    activation = (profile_peak_bytes if e.profiles_peak else static_buffers_bytes)(arch, act, chunk, seqs, tp)
    rule = "static" if e.id == "sglang" else e.memory_rule
    return EngineReserve(weights=weights, non_torch=non_torch, activation_peak=activation,
                         cuda_graphs=float(e.cuda_graph_bytes), utilization=util, rule=rule, tp=tp, pp=pp)


def kv_pool(w: Workload, acc: Accelerator, gpus: int, seq_tokens: int) -> KVPool:
    """The KV pool an engine allocates on each of ``gpus`` devices (see the module docstring and
    :func:`engine_reserve`)."""
    r = engine_reserve(w, gpus, seq_tokens, link_kind(acc) == "fabric")
    total = acc.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION
    free = r.pool_bytes(total)
    per_tok = kv_bytes_per_token(w.arch, w, r.tp, seq_tokens) / r.pp
    tokens = int(max(0.0, free) // per_tok) if per_tok else 0
    return KVPool(free_bytes=max(0.0, free), bytes_per_token=per_tok, tokens=tokens, parts=r.parts)


#: Share of the interconnect's one-way bandwidth a ring all-reduce reaches (NCCL bus bandwidth):
#: NVLink/Infinity Fabric: nccl-tests reach ~0.8 on large messages (8xH100: ~360-400 of 450 GB/s),
#: but a decode step's all-reduces are a few MiB each and overlap nothing: 0.5 fitted on the tune
#: rows (bench/fit_serving.py). PCIe boards without peer-to-peer go through host memory: 0.5 of the
#: PCIe one-way figure, fitted on the tune rows' L40S TP4/TP8 results.
ALLREDUCE_EFFICIENCY = {"fabric": 0.5, "pcie": 0.5}


def link_kind(acc: Accelerator) -> str:
    """"fabric" (NVLink, NVSwitch, Infinity Fabric: GPU-to-GPU links) or "pcie" (through the host)."""
    link = (acc.interconnect or "").lower()
    return "pcie" if ("pcie" in link and "nvlink" not in link) or not acc.interconnect_bandwidth_gbs else "fabric"


def tp_allreduce_s(acc: Accelerator, tp: int, layers: int, message_bytes: float) -> float:
    """Time of the two all-reduces per layer that tensor parallelism adds to one forward step:
    a latency per doubling of the group (:data:`calibration.TP_ALLREDUCE_S_PER_DOUBLING`) plus the
    ring's 2(n-1)/n × message over the link's one-way bandwidth. The single call the collectives
    model (network costs across nodes) replaces."""
    if tp <= 1:
        return 0.0
    kind = link_kind(acc)
    one_way = (acc.interconnect_bandwidth_gbs or 64) / 2 * 1e9 * ALLREDUCE_EFFICIENCY[kind]
    per = cal.TP_ALLREDUCE_S_PER_DOUBLING * math.ceil(math.log2(tp)) + 2 * (tp - 1) / tp * message_bytes / one_way
    return 2 * layers * per


#: Expert parallel: the busiest GPU's routed load over the mean (without expert-placement balancing
#: the hottest experts get well above their share; DeepSeek's EPLB exists to cut this). Fitted on the
#: tune rows by bench/fit_serving.py: 2.0 (the top of the 1.0-2.0 grid; TensorRT-LLM DEP rows).
EP_LOAD_IMBALANCE = 2.0


def ep_alltoall_s(acc: Accelerator, gpus: int, layers: int, message_bytes: float) -> float:
    """Expert parallel: per layer the routed tokens go to their experts' GPUs and come back (two
    all-to-alls); (n-1)/n of ``message_bytes`` leaves each GPU over its link."""
    one_way = (acc.interconnect_bandwidth_gbs or 64) / 2 * 1e9 * ALLREDUCE_EFFICIENCY[link_kind(acc)]
    return 2 * layers * (cal.TP_ALLREDUCE_S_PER_DOUBLING * math.ceil(math.log2(gpus))
                         + (gpus - 1) / gpus * message_bytes / one_way)


#: How a decode step's memory time and compute time combine: ``(mem^p + cmp^p)^(1/p)``. The
#: roofline's ``max`` (p = infinity) assumes a kernel reaches both limits at once; at the batch sizes
#: serving runs (arithmetic intensity near the ridge point) the GEMMs and attention reach neither,
#: so the corner is smoothed. p = 2 fitted on the tune rows by bench/fit_serving.py (mean capped
#: |log error| 0.1731 with max -> 0.1675; p = 1, a plain sum, 0.1924; p = 3-10 in between).
ROOF_P = 2.0


def decode_step_s(memory_s: float, compute_s: float) -> float:
    """Time of one decode step's streaming and math (before fixed overheads and collectives)."""
    return (memory_s ** ROOF_P + compute_s ** ROOF_P) ** (1 / ROOF_P)


@record
class ServingSpeed:
    """A serving engine's speed at the sequences it runs at once."""

    engine: str
    concurrency: int  # sequences in flight per replica
    output_tokens_per_s: float | None  # whole setup
    prefill_tokens_per_s: float | None  # whole setup, prompt tokens per second of prefill
    ttft_s: float | None  # one prompt's prefill on an idle replica
    tpot_s: float | None  # decode step time at ``concurrency``
    kv_tokens: int  # per replica
    replicas: int
    bound: str
    notes: tuple[str, ...] = ()
    unknown: str = ""
    total_tokens_per_s: float | None = None  # input + output tokens per second
    #: time between a sequence's tokens under steady load: the decode step plus the share of
    #: prefill work interleaved with it (chunked prefill), = run time of a wave / output length
    loaded_tpot_s: float | None = None


def serving_speed(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int,
                  concurrency: int | None = None) -> ServingSpeed:
    """Offline/steady-state serving speed of ``prompt``+``gen`` requests on ``gpus`` × ``acc``.

    ``concurrency``: sequences the client keeps in flight per replica (None: as many as the engine
    fits). See the module docstring for the method.
    """
    e = engine_profile(w)
    arch = w.arch
    pc = param_counts(arch)
    ep = expert_parallel(w, gpus)
    tp = gpus if (w.sharding == "tensor" and gpus > 1 and not ep) else 1
    replicas = max(1, gpus // tp)
    notes: list[str] = [engine_statement(w)]
    if ep:
        notes.append(f"expert parallel over {gpus} GPUs: attention data parallel, 1/{gpus} of the experts each, "
                     "tokens exchanged all-to-all twice per layer")
    seq = prompt + gen
    pool = kv_pool(w, acc, gpus, seq)
    held = seq if e.reserve_full_sequence else prompt + gen / 2
    if pool.bytes_per_token:  # a hybrid model's fixed linear-attention state, in tokens' worth of pool
        held += sequence_state_bytes(arch, w, tp) / pool.bytes_per_token
    fits = int(pool.tokens // max(1.0, held)) if e.memory_rule != "dynamic" else (concurrency or w.batch)
    max_seqs = w.max_num_seqs or e.max_seqs
    cap = min(max_seqs, concurrency) if concurrency else max_seqs
    b = max(0, min(fits, cap))
    rate, rate_note = gemm_rate(e, acc, w.precision if w.kind != "qlora" else "bf16")
    if rate_note:
        notes.append(rate_note)
    bw = acc.memory_bandwidth_gbs * 1e9 if acc.memory_bandwidth_gbs else None
    if b == 0:
        return ServingSpeed(e.id, 0, None, None, None, None, pool.tokens, replicas, "memory", tuple(notes),
                            unknown="the KV cache holds no whole sequence")
    if bw is None or rate is None:
        missing = rate_note if rate is None else f"no published memory bandwidth for {acc.id}"
        return ServingSpeed(e.id, b, None, None, None, None, pool.tokens, replicas, "memory", tuple(notes),
                            unknown=missing)
    # encoder-decoder: the encoder reads the prompt, the decoder (and head) makes each output token
    n_prompt, n_mat = pc.encoder_matmul or pc.matmul_active, pc.matmul_per_target_token
    moe = e.moe_prefill_efficiency if arch.is_moe else 1.0
    # attention (FlashAttention, FlashMLA, XQA) multiplies in 16-bit whatever the weights' precision
    attn_rate = gemm_rate(e, acc, "bf16")[0] or gemm_rate(e, acc, "fp16")[0] or rate
    pre_attn = attn_flops_per_token(w, prompt / 2 + 1) * 2
    prefill_s_per_req = prompt * (2 * n_prompt / (rate * moe) + pre_attn / attn_rate) / tp / prefill_scale(e, acc)
    ctx = prompt + gen / 2
    kv_read = b * (ctx * kv_bytes_per_token(arch, w, tp, int(ctx)) + sequence_state_bytes(arch, w, tp))
    act = activation_bytes(w)
    if ep:  # this GPU's dense weights, its share of the experts the whole batch routes to
        dense = weight_bytes(w, pc) * (1 - expert_share(w))
        # the step waits for the busiest GPU: routed load is uneven across experts
        streamed = dense + (weight_stream_bytes(w, b * gpus, pc) - dense) / gpus * EP_LOAD_IMBALANCE
        comm = ep_alltoall_s(acc, gpus, arch.layers,
                             b * arch.experts_per_token * arch.hidden * act * EP_LOAD_IMBALANCE)
        prefill_comm = ep_alltoall_s(acc, gpus, arch.layers, prompt * arch.experts_per_token * arch.hidden * act)
    else:
        streamed = weight_stream_bytes(w, b, pc) / tp
        comm = tp_allreduce_s(acc, tp, arch.layers, b * arch.hidden * act)
        prefill_comm = tp_allreduce_s(acc, tp, arch.layers, prompt * arch.hidden * act)
    d_mem = (streamed + kv_read) / (bw * decode_efficiency(e, acc))
    d_cmp = b * (2 * n_mat / rate * (EP_LOAD_IMBALANCE if ep else 1.0)
                 + 2 * attn_flops_per_token(w, ctx, absorbed=True) / attn_rate) / tp
    step = decode_step_s(d_mem, d_cmp) + e.step_overhead_s + b * e.seq_overhead_s + comm
    prefill_s_per_req += prefill_comm
    run_s = prefill_s_per_req * b + gen * step  # one wave of b requests
    out_tok_s = b * gen / run_s * replicas
    notes.append(f"{b} sequences in flight per replica (KV pool {pool.tokens:,} tokens, "
                 f"{'input+output' if e.reserve_full_sequence else 'input + half the output'} held each)")
    return ServingSpeed(e.id, b, out_tok_s, prompt / prefill_s_per_req * replicas, prefill_s_per_req, step,
                        pool.tokens, replicas, "memory" if d_mem >= d_cmp else "compute", tuple(notes),
                        total_tokens_per_s=out_tok_s * seq / gen, loaded_tpot_s=run_s / gen)
