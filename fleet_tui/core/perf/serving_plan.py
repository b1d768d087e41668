"""Serving capacity plan: a demand and latency targets in, replicas, devices and money out.

:func:`serving_plan` is the one place the plan is computed; ``size`` prints it and the ranking can
call it per offer (pass the offer's price per device-hour).

Method
------
* One replica is ``gpus`` devices (tensor parallel inside it). At ``c`` sequences in flight each
  sequence gets a token every ``tpot(c)`` = the decode step plus the prefill work of the requests
  that keep joining (``c × prefill / gen`` per token: chunked prefill interleaves with decode), and
  a new request's first token ``ttft(c)`` (:func:`first_token_s`) = its own prefill and the decode
  step it runs beside (:func:`fleet_tui.core.perf.engines.serving_speed`), plus, when other
  sequences are in flight, half an iteration: it arrives while one runs and is scheduled at the
  next iteration boundary (iteration-level scheduling, Orca/vLLM/TensorRT-LLM in-flight batching).
* The replica runs at the largest ``c`` (at most what its KV pool and the engine's batch limit
  allow) whose ``tpot`` and ``ttft`` meet the targets (``tpot_ms``, ``ttft_ms``; none given: the
  largest ``c``).
* Little's law: a request stays ``W = ttft + gen × tpot`` seconds, so one replica serves
  ``c / W`` requests per second, and the demand keeps ``L = rate × W`` requests in flight.
* Replicas = ceil(rate / per-replica rate); devices = replicas × gpus.
* Money (with a price per device-hour) uses :mod:`fleet_tui.core.pricing`: always-on on-demand
  month (``monthly_cost``) and USD per 1M *output* tokens at the demanded rate
  (``cost_per_million_tokens``).

The plan is two steps, both public so that ranking reuses them instead of copying: the expensive
one, :func:`replica_capacity` (the operating point of one replica: a bisection over concurrency,
independent of the demand, so ranking memoises it per (accelerator, devices per replica)), and the
cheap one, :func:`replicas_for` (Little's law and the ceiling). :class:`Demand` is the demand and
its targets as the user gives them, checked once (``recommend`` and ``size`` take the same fields).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field

from fleet_tui.core import pricing
from fleet_tui.core.errors import FieldError
from fleet_tui.core.perf.arrivals import LENGTH_MIXES
from fleet_tui.core.perf.engines import engine_statement, serving_speed
from fleet_tui.core.records import record
from fleet_tui.core.serving_names import DEFAULT_SLO_PERCENTILE
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class SimLatency:
    """One replica's simulated latency and load at the planned rate per replica (seconds)."""

    rate_rps: float  # offered to one replica
    requests: int  # simulated
    length_mix: str
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p95_s: float
    tpot_p99_s: float
    e2e_p50_s: float
    e2e_p95_s: float
    e2e_p99_s: float
    output_tokens_per_s: float
    queue_mean: float
    running_mean: float
    kv_use_mean: float
    kv_use_max: float
    preemptions: int

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@record
class ServingPlan:
    engine: str
    prompt_tokens: int
    gen_tokens: int
    rate_rps: float  # demanded requests per second
    output_tokens_per_s: float  # demanded output tokens per second
    gpus_per_replica: int
    concurrency_per_replica: int  # sequences in flight per replica at the operating point
    replica_rps: float | None  # requests/s one replica sustains within the targets
    replicas: int | None
    devices: int | None
    in_flight: float | None  # Little's law: requests in flight across the fleet
    ttft_s: float | None
    tpot_s: float | None
    meets_slo: bool
    usd_per_month: float | None = None
    usd_per_million_tokens: float | None = None
    notes: tuple[str, ...] = field(default=())
    unknown: str = ""
    #: latency targets were given (``meets_slo`` means something only then)
    has_targets: bool = False
    #: the percentile ``ttft_s``/``tpot_s`` are at and the targets are checked at (None: the
    #: analytic plan's means)
    slo_percentile: float | None = None
    #: the scheduler simulation at the planned load per replica (None: the analytic plan)
    simulated: SimLatency | None = None

    @property
    def latency_label(self) -> str:
        """What ``ttft_s``/``tpot_s`` are: "p95 " (simulated, at the plan's percentile) or "mean "."""
        return f"p{self.slo_percentile:g} " if self.simulated is not None and self.slo_percentile else "mean "

    @property
    def slo_words(self) -> str:
        """" (meets the targets)" / " (misses the targets)", or "" when none were given."""
        if not self.has_targets:
            return ""
        return " (meets the targets)" if self.meets_slo else " (misses the targets)"

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("notes", "simulated")}
        return out | {"notes": list(self.notes),
                      "simulated": self.simulated.to_dict() if self.simulated is not None else None}


#: the percentile latency targets are checked at unless one is given (``--slo-percentile``)


@record
class Demand:
    """Serving demand and latency targets: ``rate_rps`` requests/s or ``output_tokens_per_s``
    (exactly one), optional ``ttft_ms`` / ``tpot_ms`` met at the ``slo_percentile``-th percentile
    of requests, request lengths ``length_mix`` ("fixed" or a named mix of
    :mod:`fleet_tui.core.perf.arrivals`). Build it with :func:`demand` (checked)."""

    rate_rps: float | None = None
    output_tokens_per_s: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    slo_percentile: float = DEFAULT_SLO_PERCENTILE
    length_mix: str = "fixed"
    #: plan with the scheduler simulation (:mod:`.sim_plan`); False: the analytic operating point
    simulate: bool = True

    def rate_for(self, gen: int) -> float:
        """Requests per second (an output token rate divided by the tokens each request generates)."""
        if self.rate_rps is not None:
            return float(self.rate_rps)
        return float(self.output_tokens_per_s or 0.0) / gen

    @property
    def has_targets(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None

    def label(self) -> str:
        what = (f"{self.rate_rps:g} req/s" if self.rate_rps is not None
                else f"{self.output_tokens_per_s:g} output tokens/s")
        p = f"p{self.slo_percentile:g} " if self.simulate else ""
        slo = [f"{p}first token ≤ {self.ttft_ms:g} ms"] if self.ttft_ms is not None else []
        slo += [f"{p}≤ {self.tpot_ms:g} ms per token"] if self.tpot_ms is not None else []
        return what + (f" ({', '.join(slo)})" if slo else "")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


# Sane bounds on a demand: a million requests (a billion output tokens) a second is beyond any one
# deployment; a typo such as --rate 1e12 planned 2.6e10 replicas.
MAX_RATE_RPS = 1e6
MAX_OUTPUT_TOKENS_PER_S = 1e9


def _positive(field_name: str, value, most: float | None = None, unit: str = "") -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(str(value).replace("_", ""))
    except ValueError:
        x = math.nan
    shown = repr(str(value)).replace("{", "{{").replace("}", "}}")
    if not (x > 0 and math.isfinite(x)):
        raise FieldError(field_name, "{" + field_name + "} " + shown + ": a positive number")
    if most is not None and x > most:
        raise FieldError(field_name, "{" + field_name + "} " + shown
                         + f": at most {most:,.0f} {unit} (a positive number)")
    return x


def demand(rate_rps=None, output_tokens_per_s=None, ttft_ms=None, tpot_ms=None, *,
           workload: Workload | None = None, slo_percentile=None, length_mix: str | None = None,
           simulate: bool = True) -> Demand | None:
    """The checked :class:`Demand` (None when no rate is given; targets alone are an error).
    Fields are named as the CLI's dests: ``rate``, ``tokens_per_s``, ``ttft_ms``, ``tpot_ms``,
    ``slo_percentile``, ``length_mix``."""
    rate = _positive("rate", rate_rps, MAX_RATE_RPS, "requests/s")
    tokens = _positive("tokens_per_s", output_tokens_per_s, MAX_OUTPUT_TOKENS_PER_S, "output tokens/s")
    ttft, tpot = _positive("ttft_ms", ttft_ms), _positive("tpot_ms", tpot_ms)
    pct = _positive("slo_percentile", slo_percentile)
    if pct is not None and not pct < 100:
        raise FieldError("slo_percentile", "{slo_percentile} " + f"{pct:g}" + ": a percentile above 0 and below 100")
    mix = length_mix or "fixed"
    if mix != "fixed" and mix not in LENGTH_MIXES:
        raise FieldError("length_mix", "{length_mix} " + repr(mix) + ": one of fixed, " + ", ".join(LENGTH_MIXES))
    if rate is None and tokens is None:
        if pct is not None:
            raise FieldError("slo_percentile", "{slo_percentile} is the percentile of a capacity plan's "
                             "targets: give {rate} or {tokens_per_s} too")
        if ttft is not None or tpot is not None:
            raise FieldError("ttft_ms", "{ttft_ms}/{tpot_ms} are targets of a capacity plan: give {rate} or "
                             "{tokens_per_s} too")
        return None
    if rate is not None and tokens is not None:
        raise FieldError("rate", "give {rate} or {tokens_per_s}, not both")
    if workload is not None and not workload.is_generation:
        raise FieldError("rate", "a capacity plan ({rate}/{tokens_per_s}) needs generation: {prompt_len} "
                         "and {gen_len}")
    return Demand(rate, tokens, ttft, tpot, pct if pct is not None else DEFAULT_SLO_PERCENTILE, mix, simulate)


@record
class ReplicaCapacity:
    """What one replica of ``gpus`` devices sustains within the latency targets."""

    gpus: int
    concurrency: int  # sequences in flight at the operating point (0: nothing fits or speed unknown)
    replica_rps: float | None  # requests/s it serves within the targets (None: speed unknown)
    latency_s: float | None  # how long a request stays (first token + generation)
    ttft_s: float | None
    tpot_s: float | None
    meets_slo: bool  # False: even one sequence in flight misses a target
    unknown: str = ""  # why there is no speed


def first_token_s(sp) -> float:
    """Mean time to first token of a request joining a replica that runs at ``sp`` (a
    ``ServingSpeed``): its prefill and the decode step of the iteration that runs it, plus, when
    other sequences are in flight, half an iteration (``loaded_tpot_s``, the time between a
    sequence's tokens under that load) waiting for the iteration in progress to end. Alone on an
    idle replica it starts at once. Against the TensorRT-LLM 0.14 online rows at 8 requests/s
    (tests/fixtures/validation, tune and holdout) the half iteration took the mean first-token
    time from 31-48 % under the measured to 13-35 % under."""
    wait = 0.5 * sp.loaded_tpot_s if sp.concurrency > 1 and sp.loaded_tpot_s else 0.0
    return sp.ttft_s + sp.tpot_s + wait


def replica_capacity(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, *,
                     ttft_ms: float | None = None, tpot_ms: float | None = None) -> ReplicaCapacity:
    """The operating point of one replica (see the module docstring); independent of the demand."""
    sp, met = _operating_point(w, acc, gpus, prompt, gen, ttft_ms / 1e3 if ttft_ms else None,
                               tpot_ms / 1e3 if tpot_ms else None)
    if sp.output_tokens_per_s is None or sp.tpot_s is None or not sp.concurrency:
        return ReplicaCapacity(gpus, 0, None, None, None, None, False, sp.unknown or "speed unknown")
    ttft = first_token_s(sp)
    latency = ttft + gen * (sp.loaded_tpot_s or sp.tpot_s)
    return ReplicaCapacity(gpus, sp.concurrency, sp.concurrency / latency, latency, ttft, sp.loaded_tpot_s, met)


def replicas_for(cap: ReplicaCapacity, rate_rps: float) -> int | None:
    """Replicas of ``cap`` that serve ``rate_rps`` requests/s (None when its speed is unknown)."""
    if not cap.replica_rps:
        return None
    return max(1, math.ceil(rate_rps / cap.replica_rps - 1e-9))


def _operating_point(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int,
                     ttft_s: float | None, tpot_s: float | None):
    """The largest concurrency per replica that meets the targets (bisection: latency grows with it)."""
    top = serving_speed(w, acc, gpus, prompt, gen)
    if top.output_tokens_per_s is None or top.concurrency == 0:
        return top, False

    def ok(sp) -> bool:
        ttft = first_token_s(sp)
        return (tpot_s is None or sp.loaded_tpot_s <= tpot_s) and (ttft_s is None or ttft <= ttft_s)

    if ok(top):
        return top, True
    lo_sp = serving_speed(w, acc, gpus, prompt, gen, 1)
    if not ok(lo_sp):
        return lo_sp, False
    lo, hi = 1, top.concurrency
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(serving_speed(w, acc, gpus, prompt, gen, mid)):
            lo = mid
        else:
            hi = mid
    return serving_speed(w, acc, gpus, prompt, gen, lo), True


def steady_state(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, rate_rps: float):
    """The serving speed of one replica offered ``rate_rps`` requests/s: the concurrency ``c`` with
    ``c = rate × (ttft(c) + gen × tpot(c))`` (Little's law; fixed-point iteration), capped at what
    the replica holds."""
    top = serving_speed(w, acc, gpus, prompt, gen)
    if top.output_tokens_per_s is None or top.concurrency == 0:
        return top
    c = 1
    for _ in range(50):
        sp = serving_speed(w, acc, gpus, prompt, gen, c)
        want = min(top.concurrency, max(1, math.ceil(rate_rps * (first_token_s(sp) + gen * (sp.loaded_tpot_s or 0.0)))))
        if want == c:
            break
        c = want
    return sp


@record
class BurstSpeed:
    """``n`` requests sent at once to one replica (a benchmark at request rate "inf")."""

    requests: int
    concurrency: int  # sequences the replica runs at once (its KV pool and batch limit, at most n)
    waves: int  # ceil(n / concurrency)
    ttft_s: float  # mean time to first token
    itl_s: float  # mean time between a sequence's tokens
    output_tokens_per_s: float  # n × gen / the time until the last request ends
    duration_s: float

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def burst_speed(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, n: int) -> BurstSpeed | None:
    """Mean first-token time, time between tokens and throughput when ``n`` requests arrive at once
    on one replica (None when the engine's speed is unknown).

    A burst is finite, which a steady state is not: it never has more than ``n`` sequences in
    flight, and each request's prefill runs once. The replica admits the requests in waves of the
    concurrency ``c`` it holds (min(n, KV pool, batch limit)); with equal lengths a wave's sequences
    end together and the next wave starts then.
    * Inside a wave the prompts' prefills run one after another (chunked prefill interleaves them
      with the decode steps of the sequences already started): the k-th request's first token waits
      for k prefills (mean (c+1)/2), and wave j waits for the j waves before it.
    * A sequence's tokens share the replica's time with the prefills that come after its own (mean
      c/2 of them), not with a steady stream of arrivals: mean time between tokens
      = (c/2 × prefill + gen × step) / gen, against (c × prefill + gen × step) / gen in a steady
      state (``loaded_tpot_s``).
    * Throughput: n × gen tokens over the waves' run time (c × prefill + gen × step each; the last
      wave holds what remains).
    """
    if n < 1:
        raise ValueError("a burst has at least one request")
    sp = serving_speed(w, acc, gpus, prompt, gen, n)
    if sp.output_tokens_per_s is None or not sp.concurrency:
        return None
    c = sp.concurrency
    full, last = divmod(n, c)

    def wave(k: int, s) -> tuple[float, float, float]:
        """A wave of k: its length, and the sums over its requests of first-token time (from
        the wave's start) and of time between tokens (its own prefills, then decode beside the
        prefills after each one's)."""
        return (k * s.ttft_s + gen * s.tpot_s, k * ((k + 1) / 2 * s.ttft_s + s.tpot_s),
                k * (k / 2 * s.ttft_s + gen * s.tpot_s) / gen)

    length, ttft_one, itl_one = wave(c, sp)
    # full waves j = 0..full-1 start after j waves: closed form, so a burst of 10**12 costs no more
    elapsed = full * length
    ttft_sum = full * ttft_one + c * length * full * (full - 1) / 2
    itl_sum = full * itl_one
    waves = full
    if last:
        rest = serving_speed(w, acc, gpus, prompt, gen, last)
        if rest.output_tokens_per_s is None:
            return None
        r_length, r_ttft, r_itl = wave(last, rest)
        ttft_sum += last * elapsed + r_ttft
        itl_sum += r_itl
        elapsed += r_length
        waves += 1
    return BurstSpeed(n, c, waves, ttft_sum / n, itl_sum / n, n * gen / elapsed, elapsed)


def serving_plan(w: Workload, acc: Accelerator, gpus: int, prompt: int, gen: int, *,
                 rate_rps: float | None = None, output_tokens_per_s: float | None = None,
                 ttft_ms: float | None = None, tpot_ms: float | None = None,
                 usd_per_device_hour: float | None = None) -> ServingPlan:
    """Replicas, devices and cost to serve ``rate_rps`` requests/s (or ``output_tokens_per_s``) of
    ``prompt`` + ``gen`` tokens on replicas of ``gpus`` × ``acc`` within the latency targets."""
    if rate_rps is None and output_tokens_per_s is None:
        raise ValueError("give a request rate or an output token rate")
    rate = float(rate_rps) if rate_rps is not None else float(output_tokens_per_s or 0.0) / gen
    cap = replica_capacity(w, acc, gpus, prompt, gen, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    return plan_from_capacity(w, cap, prompt, gen, rate, usd_per_device_hour=usd_per_device_hour)


def plan_from_capacity(w: Workload, cap: ReplicaCapacity, prompt: int, gen: int, rate: float, *,
                       usd_per_device_hour: float | None = None, replicas: int | None = None) -> ServingPlan:
    """The plan for ``rate`` requests/s on replicas of ``cap`` (``replicas``: at least that many,
    e.g. when whole instances hold more replicas than the demand needs)."""
    demand_tok = rate * gen
    notes = [engine_statement(w)]
    gpus = cap.gpus
    base = {"engine": w.engine, "prompt_tokens": prompt, "gen_tokens": gen, "rate_rps": rate,
                "output_tokens_per_s": demand_tok, "gpus_per_replica": gpus}
    if cap.replica_rps is None:
        return ServingPlan(**base, concurrency_per_replica=0, replica_rps=None, replicas=None, devices=None,
                           in_flight=None, ttft_s=None, tpot_s=None, meets_slo=False, notes=tuple(notes),
                           unknown=cap.unknown or "speed unknown")
    latency = cap.latency_s or 0.0
    c = cap.concurrency
    replicas = max(replicas or 0, replicas_for(cap, rate) or 1)
    devices = replicas * gpus
    if not cap.meets_slo:
        notes.append("the latency targets cannot be met on this device even with one sequence in flight")
    notes.append(f"{c} sequences in flight per replica; each request stays {latency:.2f} s "
                 f"(Little's law: {rate * latency:.1f} in flight for {rate:g} req/s)")
    usd_month = usd_million = None
    if usd_per_device_hour is not None:
        usd_h = usd_per_device_hour * devices
        usd_month = pricing.monthly_cost(usd_h, "on-demand", pricing.Schedule.always_on())
        usd_million = pricing.cost_per_million_tokens(usd_h, demand_tok)
        notes.append("cost: on-demand, always on; per 1M output tokens at the demanded rate")
    return ServingPlan(**base, concurrency_per_replica=c, replica_rps=cap.replica_rps, replicas=replicas,
                       devices=devices, in_flight=rate * latency, ttft_s=cap.ttft_s, tpot_s=cap.tpot_s,
                       meets_slo=cap.meets_slo, usd_per_month=usd_month, usd_per_million_tokens=usd_million,
                       notes=tuple(notes))
