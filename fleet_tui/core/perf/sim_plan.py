"""The serving capacity plan and the burst, from the scheduler simulation (:mod:`.serving_sim`).

* :func:`replica_config` turns a workload on ``gpus`` × an accelerator into the simulator's plain
  inputs: the engine's KV pool in blocks of 16 tokens (:func:`~.engines.kv_pool`), its running
  limit (``max_num_seqs``) and token budget (``max_num_batched_tokens``), its scheduling policy and
  the roofline step time (:func:`~.step_time.step_model`).
* :func:`plan_capacity` (the plan ``size`` prints and ``recommend`` ranks by): the smallest
  replica count whose simulated percentiles meet the targets at the demanded rate split evenly over
  the replicas, and the latency simulated at that load (not at a replica's maximum). Without
  targets, the smallest count whose replicas keep up (the queue does not grow while requests
  arrive). The search starts at the analytic plan's count (:mod:`.serving_plan`), doubles until one
  passes, then bisects; each count is simulated with Poisson arrivals of the demand's length mix,
  enough requests for the queue to settle (:data:`PLAN_REQUESTS` at least, eight times what is in
  flight, at most :data:`MAX_REQUESTS`). The money is at the demanded rate.
* :func:`simulated_burst`: ``n`` requests at once on one replica.

A rate is "kept up with" when the mean first-token time of the last quarter of arrivals exceeds
the second quarter's by at most 2 % of the time between them plus a quarter of a request's median
end to end: an overloaded replica's queue, and so its waiting time, grows with the time requests keep
arriving.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from fleet_tui.core import pricing
from fleet_tui.core.perf.arrivals import Arrivals, burst, poisson
from fleet_tui.core.perf.engines import (
    engine_profile,
    engine_statement,
    expert_parallel,
    kv_pool,
)
from fleet_tui.core.perf.serving_plan import (
    DEFAULT_SLO_PERCENTILE,
    Demand,
    ServingPlan,
    SimLatency,
    replica_capacity,
    replicas_for,
    serving_plan,
)
from fleet_tui.core.perf.serving_sim import Policy, SchedulerConfig, SimResult, simulate
from fleet_tui.core.perf.step_time import step_model
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

BLOCK_SIZE = 16  # vLLM's default KV block (--block-size 16); SGLang's pages are tokens, TRT-LLM's 32/64
#: requests simulated per replica count tried: at least this many, and enough for the queue to settle
PLAN_REQUESTS = 400
MAX_REQUESTS = 4000
#: the same for each device group a ranking plans (bench/bench_recommend.py: the whole catalog
#: within its 2 s)
RANKING_REQUESTS = 200
RANKING_MAX_REQUESTS = 1000
#: the most requests a burst simulates; a larger burst repeats its steady waves (see simulated_burst)
BURST_LIMIT = 20_000
_POLICY: dict[str, Policy] = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}


@record
class Frontend:
    """An engine's API server: serial seconds per request before the scheduler sees it (HTTP,
    chat template, tokenizer), further seconds on its first token's path, and serial seconds per
    output token (detokenizing and streaming it) on the same core."""

    serial_s: float
    latency_s: float
    token_s: float = 0.0


#: vLLM (V1): one API-server process (HTTP, chat template, tokenizer; then the output processor:
#: incremental detokenizing and one SSE chunk per token), the engine core in its own process. Not
#: fitted on any validation row: 4 ms per request + 45 µs per output token, from two published
#: single-server ceilings: PR #17546 (one API server feeding DP=2, 2xA100, Llama-3.2-1B, ShareGPT at
#: 120 req/s offered) completed 10,000 requests in 130.74 s, 76.5 req/s at ~202 output tokens
#: (the ShareGPT mean, docs/serving.md): 13.1 ms per request; PR #41181 (--api-server-count 4,
#: 32 + 32 tokens) 740 req/s, 185 per server: at most 5.4 ms per request, taken as reached. Checked
#: against a third: PR
#: #11636 (V1 API server, 250 + 200 tokens) served 56 req/s within 3 % of the offline engine, under
#: this ceiling (77 req/s). SGLang's detokenizer is a process of its own; SGLang and TensorRT-LLM
#: keep the pairs bench/fit_frontend.py fits on their tune rows (grid 0-40 ms serial × 0-60 ms
#: latency, median |error| of each engine's replayed tune rows, a larger value kept only for a gain
#: of 1 point): SGLang 5 ms serial (53.9 % -> 51.3 % when fitted; on the current step model the
#: grid's best is 0 ms, 9.5 % either way), TensorRT-LLM (0.14 Triton backend and trtllm-serve 1.2)
#: 15 ms serial + 10 ms latency (25.7 % -> 15.1 %).
FRONTEND: dict[str, Frontend] = {"vllm": Frontend(0.004, 0.0, 45e-6), "sglang": Frontend(0.005, 0.0),
                                 "trtllm": Frontend(0.015, 0.010)}


def frontend(w: Workload) -> Frontend:
    """The API server in front of one replica of ``w``: its engine's costs, shared by
    ``--api-server-count`` processes (N cores taken as one N times as fast: the same ceiling)."""
    fe = FRONTEND.get(w.engine or "", Frontend(0.0, 0.0))
    n = w.api_server_count or 1
    return Frontend(fe.serial_s / n, fe.latency_s, fe.token_s / n) if n > 1 else fe


def replica_config(w: Workload, acc: Accelerator, gpus: int, seq_tokens: int) -> SchedulerConfig | None:
    """The simulator's inputs for one replica of ``gpus`` devices (None: the engine is not a
    continuous-batching one, a published rate is missing, or the pool holds no block). Expert
    parallel: one GPU's share (attention is data parallel; its step time is the GPU's)."""
    e = engine_profile(w)
    policy = _POLICY.get(e.id)
    step = step_model(w, acc, gpus)
    if policy is None or step is None:
        return None
    pool = kv_pool(w, acc, gpus, seq_tokens)
    blocks = pool.tokens // BLOCK_SIZE
    if blocks < 1:
        return None
    seqs, batched = scheduler_limits(w, acc)
    fe = frontend(w)
    return SchedulerConfig(kv_blocks=blocks, max_num_seqs=seqs, max_num_batched_tokens=batched, step=step,
                           block_size=BLOCK_SIZE, policy=policy, frontend_s=fe.serial_s,
                           frontend_latency_s=fe.latency_s, frontend_token_s=fe.token_s)


def scheduler_limits(w: Workload, acc: Accelerator) -> tuple[int, int]:
    """(running-request limit, tokens per iteration) the engine schedules with: the workload's
    ``max_num_seqs`` / ``max_num_batched_tokens`` where given, else the engine's defaults. vLLM V1's
    API server takes them from the device (``EngineArgs.get_batch_defaults``): 1,024 requests and
    8,192 tokens on a GPU of at least 70 GiB that is not an A100 (H100, H200, MI300X), 256 and
    2,048 otherwise; the others' are their profiles' (:mod:`.engines`)."""
    e = engine_profile(w)
    seqs, batched = e.max_seqs, e.batched_tokens
    if e.id == "vllm":
        big = acc.memory_gib >= 70 and "a100" not in acc.id.lower()
        seqs, batched = (1024, 8192) if big else (256, 2048)
    seqs = w.max_num_seqs or seqs
    return seqs, max(w.max_num_batched_tokens or batched, seqs)


def _ep_share(w: Workload, gpus: int) -> int:
    """GPUs that each run their own requests inside one replica (expert parallel), else 1."""
    return gpus if expert_parallel(w, gpus) else 1


def simulate_replica(w: Workload, acc: Accelerator, gpus: int, arrivals: Arrivals) -> SimResult | None:
    """``arrivals`` on one replica (None when it cannot be simulated: :func:`replica_config`)."""
    seq = arrivals.prompt_tokens + arrivals.gen_tokens
    cfg = replica_config(w, acc, gpus, seq if arrivals.mix == "fixed" else max(seq, 2048))
    return simulate(cfg, arrivals) if cfg is not None else None


def sustained(r: SimResult) -> bool:
    """The replica kept up with the arrivals (see the module docstring)."""
    return r.completed == r.requests - r.rejected and r.backlog_growth_s <= (
        0.02 * r.arrival_span_s / 2 + 0.25 * r.e2e.p50)


def _meets(r: SimResult, ttft_ms: float | None, tpot_ms: float | None, q: float) -> bool:
    return ((ttft_ms is None or r.ttft_at(q) * 1e3 <= ttft_ms)
            and (tpot_ms is None or r.tpot_at(q) * 1e3 <= tpot_ms))


def _ok(r: SimResult | None, ttft_ms: float | None, tpot_ms: float | None, q: float) -> bool:
    return r is not None and sustained(r) and _meets(r, ttft_ms, tpot_ms, q)


def _latency(r: SimResult, rate: float, mix: str) -> SimLatency:
    return SimLatency(rate_rps=rate, requests=r.requests, length_mix=mix, ttft_p50_s=r.ttft.p50,
                      ttft_p95_s=r.ttft.p95, ttft_p99_s=r.ttft.p99, tpot_p50_s=r.tpot.p50, tpot_p95_s=r.tpot.p95,
                      tpot_p99_s=r.tpot.p99, e2e_p50_s=r.e2e.p50, e2e_p95_s=r.e2e.p95, e2e_p99_s=r.e2e.p99,
                      output_tokens_per_s=r.output_tokens_per_s, queue_mean=r.queue_mean,
                      running_mean=r.running_mean, kv_use_mean=r.kv_use_mean, kv_use_max=r.kv_use_max,
                      preemptions=r.preemptions)


def _api_server_floor(w: Workload, rate: float, gen: int, notes: list[str]) -> int:
    """The fewest replicas whose API servers keep up with ``rate`` (noted), 0 when they cost nothing."""
    fe = frontend(w)
    work = fe.serial_s + fe.token_s * gen
    if work <= 0:
        return 0
    # a replica's API server is one serial core: below full use it keeps up, at or above it the
    # backlog grows without bound, however short a simulated run hides it
    servers = w.api_server_count or 1
    who = f"{servers} API servers take" if servers > 1 else "API server takes"
    notes.append(f"one replica's {who} at most {1 / work:,.0f} req/s of {gen:,} output tokens "
                 f"({fe.serial_s * servers * 1e3:g} ms per request + {fe.token_s * servers * 1e6:g} µs "
                 "per output token of one core each)")
    return math.floor(rate * work) + 1


def _fewest_replicas(ok: Callable[[int], bool], n: int, min_replicas: int) -> int | None:
    """The smallest count >= ``min_replicas`` that is ``ok``: doubling up from ``n`` (12 tries),
    then bisection; None when none of the doublings is."""
    lo, hi = min_replicas - 1, None  # lo fails (or is below the floor), hi passes
    for _ in range(12):
        if ok(n):
            hi = n
            break
        lo, n = n, n * 2
    if hi is None:
        return None
    if lo < min_replicas - 1 or (lo == min_replicas - 1 and hi > min_replicas):
        lo = min_replicas - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= min_replicas and ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _simulated_note(sim: SimResult, per: float, mix: str, share: float) -> str:
    """What the simulation of one replica at ``per`` req/s saw: latency percentiles, queue, KV use."""
    return (f"simulated {sim.requests:,} requests per replica at {per:.3g} req/s (Poisson, "
            f"{'lengths fixed' if mix == 'fixed' else mix + ' length mix'}): first token p50 "
            f"{sim.ttft.p50 * 1e3:,.0f} / p95 {sim.ttft.p95 * 1e3:,.0f} / p99 {sim.ttft.p99 * 1e3:,.0f} ms, "
            f"{sim.tpot.p50 * 1e3:,.1f} / {sim.tpot.p95 * 1e3:,.1f} / {sim.tpot.p99 * 1e3:,.1f} ms per token; "
            f"{sim.running_mean * share:.1f} running and {sim.queue_mean * share:.1f} queued on average, KV "
            f"pool {sim.kv_use_mean:.0%} used (peak {sim.kv_use_max:.0%})"
            + (f", {sim.preemptions} preemptions" if sim.preemptions else ""))


def plan_capacity(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, *,
                  rate_rps: float | None = None, output_tokens_per_s: float | None = None,
                  ttft_ms: float | None = None, tpot_ms: float | None = None,
                  percentile: float = DEFAULT_SLO_PERCENTILE, mix: str = "fixed",
                  usd_per_device_hour: float | None = None, requests: int = PLAN_REQUESTS,
                  max_requests: int = MAX_REQUESTS, min_replicas: int = 1) -> ServingPlan:
    """Replicas, devices and cost to serve the demand within the targets, from the simulation
    (see the module docstring): the smallest replica count that meets them, searched from the
    analytic plan's count (doubling up, then bisection)."""
    if rate_rps is None and output_tokens_per_s is None:
        raise ValueError("give a request rate or an output token rate")
    rate = float(rate_rps) if rate_rps is not None else float(output_tokens_per_s or 0.0) / gen
    targets = ttft_ms is not None or tpot_ms is not None
    share = _ep_share(w, gpus)
    notes = [engine_statement(w)]
    base = {"engine": w.engine, "prompt_tokens": prompt, "gen_tokens": gen, "rate_rps": rate,
                "output_tokens_per_s": rate * gen, "gpus_per_replica": gpus, "has_targets": targets,
                "slo_percentile": percentile}

    def unknown(why: str) -> ServingPlan:
        return ServingPlan(**base, concurrency_per_replica=0, replica_rps=None, replicas=None, devices=None,
                           in_flight=None, ttft_s=None, tpot_s=None, meets_slo=False, notes=tuple(notes),
                           unknown=why)

    min_replicas = max(min_replicas, _api_server_floor(w, rate, gen, notes))
    alone = simulate_replica(w, acc, gpus, burst(1, prompt, gen))
    if alone is None or not alone.completed:
        cap = replica_capacity(w, acc, gpus, prompt, gen)
        return unknown(cap.unknown or ("the KV cache holds no whole sequence" if alone is not None
                                       else "speed unknown"))
    possible = _meets(alone, ttft_ms, tpot_ms, percentile)
    tried: dict[int, SimResult] = {}

    def run(n: int) -> SimResult:
        if n not in tried:
            per = rate / n / share
            count = int(min(max_requests, max(requests, 8 * per * alone.e2e.mean)))
            got = simulate_replica(w, acc, gpus, poisson(per, count, prompt, gen, mix, 1))
            assert got is not None  # the lone request ran on the same configuration
            tried[n] = got
        return tried[n]

    def ok(n: int) -> bool:
        return _ok(run(n), ttft_ms, tpot_ms, percentile if possible else 100.0) if possible else sustained(run(n))

    analytic = replica_capacity(w, acc, gpus, prompt, gen, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    n = max(min_replicas, replicas_for(analytic, rate) or 1)
    hi = _fewest_replicas(ok, n, min_replicas)
    if hi is None:
        return unknown(f"no replica count up to {n * 2 ** 11:,} keeps up with {rate:g} req/s in the simulation")
    replicas = hi
    sim = run(replicas)
    meets = possible and _meets(sim, ttft_ms, tpot_ms, percentile)
    devices = replicas * gpus
    if targets and not possible:
        notes.append("the latency targets cannot be met on this device even with one request at a time")
    per = rate / replicas
    notes.append(_simulated_note(sim, per, mix, share))
    usd_month = usd_million = None
    if usd_per_device_hour is not None:
        usd_h = usd_per_device_hour * devices
        usd_month = pricing.monthly_cost(usd_h, "on-demand", pricing.Schedule.always_on())
        usd_million = pricing.cost_per_million_tokens(usd_h, rate * gen)
        notes.append("cost: on-demand, always on; per 1M output tokens at the demanded rate")
    # Little's law at the load asked: the simulation's own mean over its warm-up and drain is lower
    return ServingPlan(**base, concurrency_per_replica=max(1, round(per * sim.e2e.mean)),
                       replica_rps=per, replicas=replicas, devices=devices,
                       in_flight=rate * sim.e2e.mean, ttft_s=sim.ttft_at(percentile), tpot_s=sim.tpot_at(percentile),
                       meets_slo=meets, usd_per_month=usd_month, usd_per_million_tokens=usd_million,
                       notes=tuple(notes), simulated=_latency(sim, per, mix))


def serving_plan_for(w: Workload, acc: Accelerator, gpus: int, demand: Demand, *,
                     usd_per_device_hour: float | None = None) -> ServingPlan:
    """The one plan for a checked :class:`~.capacity.Demand`: simulated for a continuous-batching
    engine, the analytic plan of :mod:`.serving_plan` for Hugging Face generate (static batches) or
    when the demand turns the simulation off."""
    prompt, gen = int(w.prompt_len or 0), int(w.gen_len or 0)
    if not demand.simulate or (replica_config(w, acc, gpus, prompt + gen) is None
                               and engine_profile(w).batching != "continuous"):
        plan = serving_plan(w, acc, gpus, prompt, gen, rate_rps=demand.rate_rps,
                            output_tokens_per_s=demand.output_tokens_per_s, ttft_ms=demand.ttft_ms,
                            tpot_ms=demand.tpot_ms, usd_per_device_hour=usd_per_device_hour)
        return dataclasses.replace(plan, has_targets=demand.has_targets)
    return plan_capacity(w, acc, gpus, prompt, gen, rate_rps=demand.rate_rps,
                         output_tokens_per_s=demand.output_tokens_per_s, ttft_ms=demand.ttft_ms,
                         tpot_ms=demand.tpot_ms, percentile=demand.slo_percentile, mix=demand.length_mix,
                         usd_per_device_hour=usd_per_device_hour)


@record
class BurstReport:
    """``requests`` sent at once to a setup of ``replicas`` replicas (split evenly), simulated."""

    accelerator: str
    requests: int
    replicas: int
    gpus_per_replica: int
    concurrency: int = 0  # most requests running at once, all replicas
    ttft_s: float = 0.0  # mean
    ttft_p50_s: float = 0.0
    ttft_p95_s: float = 0.0
    ttft_p99_s: float = 0.0
    itl_s: float = 0.0  # mean time per output token after the first (TPOT)
    tpot_p50_s: float = 0.0
    tpot_p95_s: float = 0.0
    tpot_p99_s: float = 0.0
    output_tokens_per_s: float = 0.0  # every request's tokens over the slowest replica's duration
    duration_s: float = 0.0
    preemptions: int = 0
    kv_use_max: float = 0.0
    simulated_requests: int = 0  # per replica (at most BURST_LIMIT)
    unknown: str = ""

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def burst_report(w: Workload, acc: Accelerator, n: int, mix: str = "fixed") -> BurstReport:
    """``n`` requests at once on the workload's setup: its data-parallel replicas take
    ``ceil(n / replicas)`` each (the busiest sets the end). A replica's burst beyond
    :data:`BURST_LIMIT` is simulated as its first :data:`BURST_LIMIT` requests, which run in the
    same steady waves as the rest: the duration and the mean first-token time (which grows with a
    request's place in the queue) scale with the requests, throughput and per-token times do not."""
    gpus = w.replica_gpus
    replicas = max(1, w.gpus // gpus)
    # expert parallel: each attention rank of a replica runs its own share of the requests (as
    # plan_capacity splits a rate); the simulation is one rank's
    share = _ep_share(w, gpus)
    per = -(-n // (replicas * share))
    prompt, gen = int(w.prompt_len or 0), int(w.gen_len or 0)
    base = BurstReport(accelerator=acc.id, requests=n, replicas=replicas, gpus_per_replica=gpus)
    r = simulated_burst(w, acc, gpus, prompt, gen, per, mix)
    if r is None or not r.completed:
        why = ("the KV cache holds no whole sequence" if r is not None
               else f"no serving simulation for {acc.id} ({w.engine}: a published figure is missing or the "
                    "engine batches statically)")
        return dataclasses.replace(base, unknown=why)
    scale = per / r.requests
    duration = r.duration_s * scale
    return dataclasses.replace(
        base, concurrency=r.running_max * replicas * share, ttft_s=r.ttft.mean * scale, ttft_p50_s=r.ttft.p50 * scale,
        ttft_p95_s=r.ttft.p95 * scale, ttft_p99_s=r.ttft.p99 * scale, itl_s=r.tpot.mean, tpot_p50_s=r.tpot.p50,
        tpot_p95_s=r.tpot.p95, tpot_p99_s=r.tpot.p99, output_tokens_per_s=n * gen / duration, duration_s=duration,
        preemptions=round(r.preemptions * scale) * replicas * share, kv_use_max=r.kv_use_max,
        simulated_requests=r.requests)


def simulated_burst(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, n: int,
                    mix: str = "fixed") -> SimResult | None:
    """``n`` requests at once on one replica (None: it cannot be simulated). A burst beyond
    :data:`BURST_LIMIT` is simulated as its first :data:`BURST_LIMIT` requests: its throughput is
    theirs, and the caller scales its duration and mean waiting with the requests."""
    if n < 1:
        raise ValueError("a burst has at least one request")
    return simulate_replica(w, acc, gpus, burst(min(n, BURST_LIMIT), prompt, gen, mix))
