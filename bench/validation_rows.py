"""Turn the published measurements in tests/fixtures/validation/*.toml into the tool's workloads and
predictions: the one harness that bench/bench_validation.py prints and tests/bench/test_validation.py
asserts on. A row the tool cannot express returns a reason instead of a prediction.

Models the catalog lacks are given here as shapes from their published config.json (the same fields
a ``--model-config`` file gives); DeepSeek-R1 (multi-head latent attention) is the catalog's.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import tomllib

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import UserError
from fleet_tui.core.modelspec import ModelArch
from fleet_tui.core.perf.arrivals import Arrivals, closed_loop, poisson
from fleet_tui.core.perf.engines import serving_speed
from fleet_tui.core.perf.serving_plan import burst_speed, first_token_s, steady_state
from fleet_tui.core.perf.serving_sim import SimResult
from fleet_tui.core.perf.sim_plan import BurstReport, burst_report, simulate_replica
from fleet_tui.core.plan import PlanReport, PlanRequest, plan_workload
from fleet_tui.core.sizing import estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

VALIDATION = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "validation"

EXTRA_MODELS = {
    "GPT-OSS-120B": ModelArch(id="gpt-oss-120b", name="GPT-OSS-120B", layers=36, hidden=2880, intermediate=2880,
                              heads=64, kv_heads=8, head_dim=64, vocab=201088, experts=128, experts_per_token=4,
                              sliding_window=128, sliding_window_layers=18,
                              source="https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json"),
    "GPT-OSS-20B": ModelArch(id="gpt-oss-20b", name="GPT-OSS-20B", layers=24, hidden=2880, intermediate=2880,
                             heads=64, kv_heads=8, head_dim=64, vocab=201088, experts=32, experts_per_token=4,
                             sliding_window=128, sliding_window_layers=12,
                             source="https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json"),
    "Qwen3-30B-A3B": ModelArch(id="qwen3-30b-a3b", name="Qwen3-30B-A3B", layers=48, hidden=2048, intermediate=6144,
                               heads=32, kv_heads=4, head_dim=128, vocab=151936, experts=128, experts_per_token=8,
                               moe_intermediate=768,
                               source="https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"),
    "DeepSeek-R1-Distill-Qwen-14B": ModelArch(
        id="deepseek-r1-distill-qwen-14b", name="DeepSeek-R1-Distill-Qwen-14B", layers=48, hidden=5120,
        intermediate=13824, heads=40, kv_heads=8, vocab=152064, attention_bias=True,
        source="https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B/blob/main/config.json"),
    "deepseek-coder-6.7b-instruct": ModelArch(
        id="deepseek-coder-6.7b-instruct", name="deepseek-coder-6.7b-instruct", layers=32, hidden=4096,
        intermediate=11008, heads=32, kv_heads=32, vocab=32256, max_position=16384,
        source="https://huggingface.co/deepseek-ai/deepseek-coder-6.7b-instruct/blob/main/config.json"),
    # hybrid attention: the shape of Qwen3.5-27B as THUDM/slime's Megatron arguments give it
    # (scripts/models/qwen3.5-27B.sh: 64 layers, hidden 5120, FFN 17408, 24 heads, 4 query groups of
    # 256 channels, vocab 248320, untied); the kv_capacity row's PR says 16 of its 64 layers are full
    # attention and 32 KiB/token in fp8 (= 16 x 2 x 4 x 256 x 1 B). 27B parameters per the name (the
    # gated-delta-net projections differ from the attention ones the shape would count).
    "Qwen3.8-27B (hybrid: 16 of 64 layers full attention)": ModelArch(
        id="qwen3.8-27b", name="Qwen3.8-27B (hybrid)", layers=64, hidden=5120, intermediate=17408, heads=24,
        kv_heads=4, head_dim=256, vocab=248320, full_attention_layers=16, total_params=27_000_000_000,
        source="https://github.com/THUDM/slime/blob/main/scripts/models/qwen3.5-27B.sh"),
}
ALIASES = {"Llama-3.3-70B": "llama-3.1-70b", "DeepSeek-R1-0528": "deepseek-r1", "DeepSeek-R1": "deepseek-r1",
           "DeepSeek-V3/R1 architecture (671B MoE)": "deepseek-r1", "Mistral-7B": "mistral-7b",
           "Qwen2.5-VL-72B": "qwen2.5-72b", "bigscience/T0_3B": "t0-3b", "bigscience/mt0-xxl": "mt0-xxl"}

THROUGHPUT_METRICS = ("output_tokens_per_s", "total_tokens_per_s", "mlperf_tokens_per_s", "input_tokens_per_s")
LATENCY_METRICS = ("ttft_ms_mean", "itl_ms_mean", "tpot_ms_mean", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
                   "tpot_ms_p99")


@dataclass(frozen=True)
class Result:
    file: str
    id: str
    split: str
    kind: str  # "throughput", "latency", "kv", "memory"
    measured: float
    predicted: float | None
    reason: str = ""  # why it is not expressible

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured


def rows(name: str, table: str) -> list[dict]:
    with open(VALIDATION / name, "rb") as fh:
        return tomllib.load(fh)[table]


_CATALOG = None


def catalog():
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = load_catalog([])
    return _CATALOG


def model(name: str) -> ModelArch | None:
    key = ALIASES.get(name, name)
    if key is None:
        return None
    for name in (key, key.lower()):  # the product's own shape first (the catalog: gpt-oss, MLA, hybrids)
        try:
            return catalog().model(name)
        except UserError:
            pass
    return EXTRA_MODELS.get(key)


def precision_of(text: str, model_name: str) -> str:
    t = str(text).lower()
    if getattr(model(model_name), "id", "") == "deepseek-r1" and ("checkpoint default" in t or "bf16" in t):
        # DeepSeek-R1 ships an fp8 checkpoint; in bf16 its 1.34 TB would not fit the 8×141 GB the
        # TensorRT-LLM row ran on, so '--dtype bfloat16' there sets the activations, not the weights
        return "fp8"
    names = ("fp4", "fp8", "bf16", "fp16", "int8", "int4")
    for p in names:  # the stated precision leads the text ("bf16 (...; FP8 named as future work)")
        if t.startswith(p):
            return p
    for p in names:
        if f"{p} " in t or f"({p}" in t:
            return p
    if "w8a8" in t:
        return "int8"
    if "checkpoint default" in t or "bf16" in t:
        return "bf16"
    return "fp8"  # MLPerf closed-division submissions on Hopper/CDNA3 (not stated in the rows)


def kv_dtype_of(text: str) -> str:
    t = str(text).lower()
    if t.startswith("fp8"):
        return "fp8"
    if t in ("fp16", "bf16", "int8"):
        return t
    if t == "unknown":
        return "fp8"
    return "auto"


def _serving_workload(r: dict) -> tuple[Workload | None, int, int, str]:
    arch = model(r["model"])
    if arch is None:
        return None, 0, 0, f"model {r['model']} has no shape"
    if r["scenario"] == "pd_disaggregated_large_ep":
        return None, 0, 0, "prefill/decode disaggregated over 96 GPUs with expert parallelism"
    gpus = int(r["gpu_count"])
    tp = int(r.get("tp") or gpus)  # no layout stated: replaced by the best one in predict_serving
    prec = precision_of(r.get("weight_precision", ""), r["model"])
    if prec == "fp8" and r.get("gpu", "").startswith("A100"):
        prec = "fp16"
    ep = str(r.get("parallelism") or "").startswith("DEP")
    inp, out = r.get("input_len"), r.get("output_len")
    if inp is None or out is None:
        m = re.search(r"tokens/sample in this file = ([0-9]+(?:\.[0-9]+)?)", r.get("notes", ""))
        per_sample = float(m.group(1)) if m else None
        m = re.search(r"Completed samples per second ([0-9.]+); Completed tokens per second ([0-9.]+)",
                      r.get("source_detail", ""))
        if per_sample is None and m:  # the server latency rows: the same file's tokens / samples
            per_sample = float(m.group(2)) / float(m.group(1))
        if per_sample is None:
            return None, 0, 0, "request lengths not stated"
        inp = out = round(per_sample)  # MLPerf: output tokens per sample; input assumed alike
    # the engine's running-request limit where the source states it (AMD's table: 'max seqs 1500')
    m = re.search(r"max seqs ([0-9]+)|--max-num-seqs[= ]([0-9]+)", r.get("source_detail", ""))
    seqs = int(m.group(1) or m.group(2)) if m else None
    w = Workload(kind="inference", model=arch, precision=prec, batch=1, gpus=tp, prompt_len=int(inp),
                 gen_len=int(out), sharding="tensor" if tp > 1 and not ep else "data", engine=r["engine"],
                 expert_parallel=ep, kv_cache_dtype=kv_dtype_of(r.get("kv_cache_dtype", "auto")),
                 max_num_seqs=min(seqs, 100_000) if seqs else None)
    return w, int(inp), int(out), ""


#: Requests of an offline max-throughput run whose source does not state them (trtllm-bench's
#: perf-overview tables, MLPerf offline): long enough that the ramp-up and the tail are a small part
#: of the run, as in the engines' offline benchmarks, which queue thousands of requests.
OFFLINE_REQUESTS = 2000
#: TensorRT-LLM 0.14's online table: 'with 500 requests'
ONLINE_REQUESTS = 500

#: One planning answer per replica setup and burst (the rows of one run share it).
_PLANS: dict[tuple, PlanReport] = {}
_SIMS: dict[tuple, SimResult | None] = {}


def _planned(w: Workload, acc: str, burst_n: int | None) -> PlanReport:
    """The product's answer (``size --engine E --gpu G --burst N``): the one planning entry point."""
    key = (w, acc, burst_n)
    if key not in _PLANS:
        _PLANS[key] = plan_workload(PlanRequest(w, acc, layout_given=True, burst=burst_n), catalog())
    return _PLANS[key]


def _simulated(w: Workload, acc: Accelerator, arrivals: Arrivals) -> SimResult | None:
    """A rate or a closed loop on one replica: the simulation the capacity plan runs."""
    key = (w, acc.id, arrivals)
    if key not in _SIMS:
        _SIMS[key] = simulate_replica(w, acc, w.replica_gpus, arrivals)
    return _SIMS[key]


def _best_layout(w: Workload, acc: Accelerator, gpus: int) -> Workload:
    """The source states no layout (MLPerf): the tensor-parallel size whose replicas serve most per GPU."""
    def per_gpu(c: Workload) -> float:
        per = OFFLINE_REQUESTS // (gpus // c.gpus)
        if _planned(c, acc.id, None).verdict.ok is False:
            return 0.0
        b = _burst(c.derive(batch=per), acc, per, "fixed")
        return (b.output_tokens_per_s if not b.unknown else 0.0) / c.gpus
    cands = [w.derive(gpus=t, sharding="tensor" if t > 1 else "data") for t in (1, 2, 4, 8) if gpus % t == 0]
    return max(cands, key=per_gpu)


def _serving_setup(r: dict, file: str) -> Result | tuple[str, str, dict, Workload, int, int, Accelerator, int]:
    """What every serving prediction starts from: the row's metric and kind, the result fields, the
    workload, its lengths, the accelerator and the GPU count; or the Result of a row that gives no
    number (no workload for it, an accelerator the catalog lacks)."""
    metric = r["metric"]
    kind = "latency" if metric in LATENCY_METRICS else "throughput"
    w, inp, out, why = _serving_workload(r)
    base = dict(file=file, id=r["id"], split=r["split"], kind=kind, measured=float(r["value"]))
    if w is None:
        return Result(predicted=None, reason=why, **base)
    try:
        acc = catalog().accelerator(r["gpu"])
    except UserError:
        return Result(predicted=None, reason=f"accelerator {r['gpu']} not in the catalog", **base)
    return metric, kind, base, w, inp, out, acc, int(r["gpu_count"])


def predict_serving(r: dict, file: str = "serving") -> Result:
    """The row's figure as the product answers it: a burst (every request at once: rate inf,
    offline max throughput, ``vllm bench serve`` without a rate) is ``size --burst N``'s simulation
    (:func:`~fleet_tui.core.perf.sim_plan.burst_report`, split over the replicas as the plan splits
    it); a Poisson rate or a closed loop of clients is the simulation the capacity plan runs. The
    verdict is the engine's own (:func:`plan_workload`): a setup that does not start gives no number."""
    setup = _serving_setup(r, file)
    if isinstance(setup, Result):
        return setup
    metric, kind, base, w, inp, out, acc, gpus = setup
    if not r.get("tp") and not r.get("parallelism") and gpus > 1:
        w = _best_layout(w, acc, gpus)
    verdict = _planned(w, acc.id, None).verdict
    if verdict.ok is False:
        return Result(predicted=None, reason=f"{w.engine} does not start: {verdict.engine_error}", **base)
    replicas = max(1, gpus // w.gpus)
    conc = r.get("max_concurrency")
    rate = r.get("request_rate")
    scenario = r["scenario"]
    mix = str(r.get("length_mix") or "fixed")
    got: dict[str, float]
    if scenario == "online_max_concurrency" or isinstance(rate, (int, float)):
        if scenario == "online_max_concurrency":
            n = int(r.get("requests") or 2 * int(conc))
            arrivals = closed_loop(max(1, int(conc) // replicas), max(1, n // replicas), inp, out, mix)
        else:
            arrivals = poisson(float(rate) / replicas, int(r.get("requests") or ONLINE_REQUESTS), inp, out, mix)
        sim = _simulated(w, acc, arrivals)
        if sim is None or not sim.completed:
            return Result(predicted=None, reason="cannot be simulated here", **base)
        out_tps = sim.output_tokens_per_s * replicas
        got = {"ttft_ms_mean": sim.ttft.mean, "ttft_ms_p50": sim.ttft.p50, "ttft_ms_p99": sim.ttft.p99,
               "tpot_ms_mean": sim.tpot.mean, "itl_ms_mean": sim.tpot.mean, "tpot_ms_p50": sim.tpot.p50,
               "tpot_ms_p99": sim.tpot.p99}
    else:
        n = int(r.get("requests") or conc or (ONLINE_REQUESTS if rate == "inf" else OFFLINE_REQUESTS))
        per = max(1, n // replicas)
        b = _burst(w.derive(batch=per), acc, per, mix)
        if b.unknown:
            return Result(predicted=None, reason=b.unknown, **base)
        out_tps = b.output_tokens_per_s * replicas
        got = {"ttft_ms_mean": b.ttft_s, "ttft_ms_p50": b.ttft_p50_s, "ttft_ms_p99": b.ttft_p99_s,
               "tpot_ms_mean": b.itl_s, "itl_ms_mean": b.itl_s, "tpot_ms_p50": b.tpot_p50_s,
               "tpot_ms_p99": b.tpot_p99_s}
    if metric == "output_tokens_per_s" or metric == "mlperf_tokens_per_s":
        pred = out_tps
    elif metric == "total_tokens_per_s":
        pred = out_tps * (inp + out) / out
    elif metric == "input_tokens_per_s":
        pred = out_tps * inp / out
    elif metric in got:
        pred = got[metric] * 1e3
    else:
        return Result(predicted=None, reason=f"metric {metric} not modelled", **base)
    if r.get("scope") == "per_gpu":
        pred /= gpus
    elif r.get("scope") == "per_node":
        pred /= gpus / 8
    return Result(predicted=pred, **base)


def predict_serving_analytic(r: dict) -> Result:
    """The same row by the analytic model (``serving_plan.burst_speed`` / ``steady_state`` /
    ``engines.serving_speed``), which the product keeps for Hugging Face and ``--analytic-plan``:
    bench/bench_serving_latency.py prints it beside the simulation."""
    setup = _serving_setup(r, "serving")
    if isinstance(setup, Result):
        return setup
    metric, kind, base, w, inp, out, acc, gpus = setup
    w = w.derive(max_num_seqs=None)  # the analytic model takes the client's concurrency instead
    if not r.get("tp") and not r.get("parallelism") and gpus > 1:
        # the source states no layout (MLPerf): take the tensor-parallel size the tool finds fastest
        w = max((w.derive(gpus=t, sharding="tensor" if t > 1 else "data") for t in (1, 2, 4, 8) if gpus % t == 0),
                key=lambda c: (serving_speed(c, acc, c.gpus, inp, out).output_tokens_per_s or 0.0) / c.gpus)
    replicas = max(1, gpus // w.gpus)
    conc = r.get("max_concurrency")
    per_replica = max(1, int(conc) // replicas) if conc else None
    rate = r.get("request_rate")
    burst = r["scenario"] == "burst_all_at_once" or rate == "inf"
    n_burst = int(conc) if conc else 500  # trtllm 0.14 online table: 'with 500 requests'
    if burst:  # n requests at once: never more than n in flight, each prefilled once
        b = burst_speed(w, acc, w.gpus, inp, out, max(1, n_burst // replicas))
        if b is None:
            return Result(predicted=None, reason="the engine's speed is unknown here", **base)
        out_tps, ttft_s, tpot_s = b.output_tokens_per_s * replicas, b.ttft_s, b.itl_s
    else:
        if isinstance(rate, (int, float)) and kind == "latency":
            sp = steady_state(w, acc, w.gpus, inp, out, float(rate) / replicas)
        else:
            sp = serving_speed(w, acc, w.gpus, inp, out, per_replica)
        if sp.output_tokens_per_s is None:
            return Result(predicted=None, reason=sp.unknown, **base)
        out_tps, ttft_s, tpot_s = sp.output_tokens_per_s * replicas, first_token_s(sp), sp.loaded_tpot_s
    if isinstance(rate, (int, float)):
        out_tps = min(out_tps, float(rate) * out)
    if metric == "output_tokens_per_s" or metric == "mlperf_tokens_per_s":
        pred = out_tps
    elif metric == "total_tokens_per_s":
        pred = out_tps * (inp + out) / out
    elif metric == "input_tokens_per_s":
        pred = out_tps * inp / out
    elif metric == "ttft_ms_mean":
        pred = ttft_s * 1e3
    else:
        pred = tpot_s * 1e3
    if r.get("scope") == "per_gpu":
        pred /= gpus
    elif r.get("scope") == "per_node":
        pred /= gpus / 8
    return Result(predicted=pred, **base)


_BURSTS: dict[tuple, BurstReport] = {}


def _burst(w: Workload, acc: Accelerator, n: int, mix: str) -> BurstReport:
    """``size --burst N`` (``plan_workload``'s burst: :func:`burst_report`), with the row's length mix."""
    key = (w, acc.id, n, mix)
    if key not in _BURSTS:
        _BURSTS[key] = burst_report(w, acc, n, mix)
    return _BURSTS[key]


def clear_cache() -> None:
    """Forget the planned and simulated runs (a fit that changes engine constants calls this)."""
    _PLANS.clear()
    _SIMS.clear()
    _BURSTS.clear()


def predict_kv(r: dict) -> Result:
    base = dict(file="kv_capacity", id=r["id"], split=r["split"], kind="kv",
                measured=float(r.get("kv_tokens") or 0) or float(r.get("kv_cache_gib", 0)))
    arch = model(r["model"])
    if arch is None:
        return Result(predicted=None, reason=f"model {r['model']} has no shape", **base)
    gpu = r.get("gpu")
    try:
        acc = catalog().accelerator(gpu if gpu != "unknown" else "H100")
    except UserError:
        return Result(predicted=None, reason=f"accelerator {gpu} not in the catalog", **base)
    tp = int(r.get("tp") or 1)
    util = r.get("gpu_memory_utilization") or r.get("mem_fraction_static")
    util = util if isinstance(util, (int, float)) else None
    chunk = r.get("max_num_batched_tokens")
    max_len = r.get("max_model_len") if isinstance(r.get("max_model_len"), int) else None
    if max_len is None and r["engine"] == "vllm" and "V0" in str(r.get("engine_version")):
        max_len = arch.max_position  # vLLM's default max_model_len: the model's context
    if chunk is None and max_len and r["engine"] == "vllm" and "V0" in str(r.get("engine_version")):
        # vLLM V0 profiles one max_model_len sequence; from the autumn-2024 releases on, its
        # EngineArgs turn chunked prefill on (512-token chunks) when max_model_len > 32K
        m = re.search(r"(Jan|Feb|Mar|Apr|May|June|July|Aug|Sept|Oct|Nov|Dec)\w* (20\d\d)", str(r.get("engine_version")))
        months = ("Jan", "Feb", "Mar", "Apr", "May", "June", "July", "Aug", "Sept", "Oct", "Nov", "Dec")
        late = m is not None and (int(m.group(2)), months.index(m.group(1))) >= (2024, 8)
        chunk = max_len if max_len <= 32768 or not late else 512
    w = Workload(kind="inference", model=arch, precision=precision_of(r.get("weight_precision", ""), r["model"]),
                 gpus=tp, sharding="tensor" if tp > 1 else "data", engine=r["engine"],
                 kv_cache_dtype=kv_dtype_of(r.get("kv_cache_dtype", "auto")), gpu_memory_utilization=util,
                 max_num_batched_tokens=min(int(chunk), 10_000_000) if chunk else None,
                 max_num_seqs=r.get("max_num_seqs"))
    # the engine's start-up as the product reports it (``size --engine E``: the plan's EngineFit):
    # its KV pool for a context of max_model_len
    w = w.derive(prompt_len=(max_len or 4096) - 1, gen_len=1)
    try:
        eng = plan_workload(PlanRequest(w, acc.id, layout_given=True), catalog()).engine
    except UserError as e:  # the product refuses the setup (its capability table)
        return Result(predicted=None, reason=f"the product refuses it: {e}", **base)
    if eng is None:
        return Result(predicted=None, reason=f"{r['engine']} is not planned as a serving engine", **base)
    if r.get("kv_tokens"):
        pred = float(eng.kv_tokens)
    else:
        pred = eng.parts["kv_pool"] / (1 << 30)
    return Result(predicted=pred, **base)


def summary(results: list[Result], split: str, kind: str) -> tuple[int, float | None, float | None, int]:
    """(rows, median |error|, max |error|, inexpressible) of one split and kind."""
    sel = [r for r in results if r.split == split and r.kind == kind]
    errs = [abs(r.error) for r in sel if r.error is not None]
    return (len(sel), statistics.median(errs) if errs else None, max(errs) if errs else None,
            sum(1 for r in sel if r.predicted is None))


#: Engine releases the serving profiles no longer describe, with the reason. The profiles describe
#: the engines' current releases; each release here ran the same model on the same GPU 2-8x below a
#: later release in the set, so fitting constants to it would make every current estimate that much
#: too slow. Their rows stay in the set and in every figure, predicted with the current profiles
#: (bench_validation.py also prints them apart); the fit leaves them out.
#: * ROCm builds of 2024 - early 2025 (community builds, not AMD's own containers): AMD's rocm/vllm
#:   containers of Sep-Nov 2025 (serving_amd.toml) and its MLPerf v4.1 submission ran Llama 70B/405B
#:   2.5-5x faster on the same MI300X.
#: * The first DeepSeek-R1 (MLA, block-fp8 MoE) releases on H200 (dstack, 2025-03): TensorRT-LLM 1.x
#:   runs DeepSeek-R1-0528 on 8xH200 at 2-7x their throughput (serving.toml, trtllm1x rows), within
#:   the model's usual error.
SUPERSEDED_RELEASES = {
    "0.6.3.dev116+g151ef4ef (ROCm 6.1)": "vLLM 0.6.3 on ROCm 6.1 (dstack, 2024-10)",
    "0.7.3.dev138+g21f6ca217": "vLLM 0.7.3 on ROCm (dstack, 2025-03)",
    "0.4.2.post4": "SGLang 0.4.2 on ROCm (dstack, 2025-03)",
    "0.7.4.dev181+gf35f8e22": "vLLM 0.7.4, first FlashMLA release, DeepSeek-R1 on H200 (dstack, 2025-03)",
    "0.4.3.post2": "SGLang 0.4.3, DeepSeek-R1 on H200 (dstack, 2025-03)",
    "0.17.post1.dev (deepseek branch engine, bf16 checkpoint conversion)":
        "TensorRT-LLM 0.17 deepseek branch, bf16 conversion of DeepSeek-R1 on H200 (dstack, 2025-03)",
}


def superseded(r: dict) -> str:
    """Why a serving row measured an engine release the profiles no longer describe ('' if it did not)."""
    return SUPERSEDED_RELEASES.get(str(r.get("engine_version", "")), "")


#: the serving measurements: TensorRT-LLM/vLLM/SGLang/MLPerf tables, AMD's own ROCm vLLM tables,
#: and bursts compiled after burst_speed was written (each a file of its own, so that the split of
#: the files before it did not move when it was added)
SERVING_FILES = ("serving.toml", "serving_amd.toml", "serving_bursts.toml")


def serving_rows() -> list[dict]:
    return [r for name in SERVING_FILES for r in rows(name, "measurement")]


def serving_results() -> list[Result]:
    return [predict_serving(r) for r in serving_rows()]


def serving_latency_results() -> list[Result]:
    """serving_latency.toml (GPUStack's vllm bench serve runs: percentiles, ShareGPT mixes), apart."""
    return [predict_serving(r, "serving_latency") for r in rows("serving_latency.toml", "measurement")]


def kv_results() -> list[Result]:
    return [predict_kv(r) for r in rows("kv_capacity.toml", "capacity")]


__all__ = ["EXTRA_MODELS", "Result", "clear_cache", "estimate_memory", "kv_results", "serving_latency_results",
           "serving_results", "serving_rows", "summary"]


FT_MODELS = {
    "LLaMA-65B": ModelArch(id="llama-65b", name="LLaMA-65B", layers=80, hidden=8192, intermediate=22016, heads=64,
                           kv_heads=64, vocab=32000,
                           source="https://huggingface.co/huggyllama/llama-65b/blob/main/config.json"),
    "bigscience/bloomz-7b1": ModelArch(id="bloomz-7b1", name="bloomz-7b1", layers=30, hidden=4096,
                                       intermediate=16384, heads=32, kv_heads=32, vocab=250880,
                                       tied_embeddings=True, gated_mlp=False, attention_bias=True,
                                       source="https://huggingface.co/bigscience/bloomz-7b1/blob/main/config.json"),
}
#: memory components a metric leaves out (PyTorch allocator statistics vs NVML)
_NOT_IN_TORCH = ("driver_reserve", "cuda_context", "runtime_kernels")
GB = 1e9
GIB = float(1 << 30)
#: PEFT README examples: fp32 weights (no torch_dtype), twitter_complaints prompts (batch 8 of ~256
#: tokens assumed: the README does not say) unless the row states its settings (the T5 rows do)
PEFT_BATCH, PEFT_SEQ = 8, 256
#: the rows' short LoRA module names (q,k,v,o,gate,up,down) as the tool's targets
_LORA_TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
                 "down": "down_proj"}


def _ft_workload(r: dict, seq: int | None = None) -> tuple[Workload | None, str]:
    name = r["model"]
    arch = FT_MODELS.get(name) or model(name)
    if arch is None:
        return None, f"model {name} has no shape"
    fw = r["framework"]
    kind = {"full": "finetune", "lora": "lora", "qlora": "qlora"}[r["method"]]
    gpus = int(r.get("gpu_count") or 1)
    kw: dict = dict(kind=kind, model=arch, batch=int(r.get("batch_size") or 1),
                    seq_len=seq or r.get("seq_len"), gpus=gpus)
    if r.get("lora_targets"):
        kw["lora_targets"] = tuple(_LORA_TARGETS[t.strip()] for t in str(r["lora_targets"]).split(","))
    if r.get("target_len"):
        kw["target_len"] = int(r["target_len"])
    if r.get("lora_rank"):
        kw["lora_rank"] = int(r["lora_rank"])
    if fw == "torchtune":
        if r.get("packed") is False:
            return None, "unpacked dataset: sequence lengths are the dataset's, not stated"
        kw.update(framework="torchtune", master_weights="none", chunked_loss=r.get("chunked_loss", True),
                  grad_checkpointing=r.get("activation_checkpointing", True), compile=bool(r.get("compile")),
                  optimizer_in_backward=bool(r.get("optimizer_in_backward")))
        if gpus > 1:
            # torchtune's batch_size is per device; the tool's batch is the global batch
            kw.update(sharding="fsdp", batch=kw["batch"] * gpus)
        if str(r.get("optimizer", "")).lower().startswith("adamw8bit"):
            kw["optimizer"] = "adamw8bit"
        off = str(r.get("offload", ""))
        if off == "activations":
            kw["offload"] = ("activations",)
        elif "CPU offload" in off:
            kw.update(offload=("optimizer", "params"), optimizer_in_backward=True)
        if r["method"] == "full" and gpus == 1 and "optimizer" not in r:
            # 8B_full_single_device / 7B_full_low_memory: PagedAdamW8bit, optimizer step in backward
            kw.update(optimizer="paged_adamw8bit", optimizer_in_backward=True)
        if kw.get("seq_len") is None:
            kw["seq_len"] = 2048
    elif fw in ("unsloth", "hf+fa2"):
        kw.update(grad_checkpointing=True, master_weights="none")
        if fw == "unsloth":
            # the --framework unsloth preset (core.workload._stack_fields), 8-bit AdamW included:
            # the optimizer of every training example in the same README as the table
            kw.update(framework="unsloth", offload=("activations",), chunked_loss=True, optimizer="adamw8bit")
    elif fw.startswith("hf peft") or fw.startswith("qlora"):
        if fw.startswith("hf peft"):
            kw.update(precision="fp32", master_weights="none", batch=int(r.get("batch_size") or PEFT_BATCH),
                      seq_len=seq or r.get("seq_len") or PEFT_SEQ)
            if "deepspeed" in fw:
                # PEFT's DeepSpeed guide: ZeRO-3, offload_optimizer_device and offload_param_device cpu,
                # no stage3_* knobs (DeepSpeed's defaults; sizing/zero3.py)
                kw.update(framework="deepspeed", offload=("optimizer", "params"))
        else:
            kw.update(grad_checkpointing=True, optimizer="paged_adamw8bit", seq_len=512, batch=1)
    else:
        return None, f"framework {fw} not modelled"
    if kw.get("precision") == "fp32" and kind in ("lora", "qlora"):
        kw["master_weights"] = "none"
    return Workload(**kw), ""


def _memory_measured(r: dict, total: dict) -> float:
    """The tool's estimate in the row's own kind of memory (bytes)."""
    bd = total
    metric = r["metric"]
    drop: tuple[str, ...] = ()
    if metric in ("peak_memory_active", "gpu_memory"):
        drop = _NOT_IN_TORCH + ("allocator_slack",)
    elif metric.startswith("peak_memory_reserved") or metric == "peak_memory_per_gpu":
        drop = _NOT_IN_TORCH
    value = sum(v for k, v in bd.items() if k not in drop)
    return value


def predict_finetune(r: dict) -> Result:
    unit = GIB if r.get("unit", "").startswith("GiB") else GB
    metric = r["metric"]
    base = dict(file="finetune_memory", id=r["id"], split=r["split"], kind="memory", measured=float(r["value"]))
    if metric in ("oom", "fits_within"):
        return Result(predicted=None, reason=f"{metric}: a bound, checked by test_validation", **base)
    if metric == "max_seq_len_fitting":
        return _predict_max_seq(r, base)
    w, why = _ft_workload(r)
    if w is None:
        return Result(predicted=None, reason=why, **base)
    mem = estimate_memory(w, w.gpus)
    if metric.endswith("_model_init"):  # before any step: the stored weights (+ adapters) only
        return Result(predicted=mem.breakdown["weights"] / unit, **base)
    bd = dict(mem.breakdown)
    if w.optimizer == "paged_adamw8bit":
        bd.pop("optimizer_states", None)  # cudaMallocManaged: outside PyTorch's allocator statistics
    return Result(predicted=_memory_measured(r, bd) / unit, **base)


def _predict_max_seq(r: dict, base: dict) -> Result:
    """Longest sequence whose estimated peak fits ``gpu_memory_gb`` (bisection on the estimate)."""
    # a card sold as "N GB" has N GiB (8 GB = 8192 MiB); NVML shows ~1 % less than that
    cap = float(r["gpu_memory_gb"]) * GIB * 0.99
    lo, hi = 128, 1 << 21
    w0, why = _ft_workload(r, seq=lo)
    if w0 is None:
        return Result(predicted=None, reason=why, **base)
    if estimate_memory(w0).total_bytes > cap:
        return Result(predicted=0.0, **base)
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if estimate_memory(w0.derive(seq_len=mid)).total_bytes <= cap:
            lo = mid
        else:
            hi = mid
    return Result(predicted=float(lo), **base)


def finetune_results() -> list[Result]:
    return [predict_finetune(r) for r in rows("finetune_memory.toml", "run")]


def finetune_bounds() -> list[tuple[dict, float, float]]:
    """(row, estimated peak bytes, bound bytes) for the oom / fits_within rows."""
    out = []
    for r in rows("finetune_memory.toml", "run"):
        if r["metric"] not in ("oom", "fits_within"):
            continue
        w, _ = _ft_workload({**r, "seq_len": r.get("seq_len") or 512})
        if w is None:
            continue
        out.append((r, float(estimate_memory(w).total_bytes), float(r["value"]) * GIB))
    return out
