"""Requests offered to a serving replica: when each arrives and how long its prompt and output are.

Arrival patterns (:class:`Arrivals`): a **burst** (every request at time 0: a benchmark at
request rate "inf"), a **fixed rate** (a Poisson process: exponential gaps of mean ``1 / rate``,
seeded, as ``vllm bench serve --request-rate R`` sends them), a **closed loop** of ``concurrency``
clients (``--max-concurrency C`` at rate inf: each sends its next request when its last one ends),
each with a **length distribution**: every request the same (``"fixed"``) or a named mix
(:data:`LENGTH_MIXES`).

The ShareGPT-like mix
---------------------
Chat benchmarks sample ShareGPT_V3_unfiltered_cleaned_split.json with vLLM's filter
(``vllm/benchmarks/datasets.py``, ``ShareGPTDataset`` / ``is_valid_sequence``: a prompt or output
shorter than 4 tokens is dropped, so is a prompt over 1,024 tokens or a prompt + output over 2,048).
Its means are the published totals of such runs: ``vllm bench serve --dataset-name sharegpt
--num-prompts 1000`` sent 217,393 prompt tokens and generated 201,648 (gpustack performance lab,
Qwen3-14B on one H100, ``docs/performance-lab/qwen3-14b/h100.md`` at 7ae332a), a mean prompt of
217 and output of 202 tokens. The shape is not published with them: lengths are drawn log-normal
with sigma 1.0 (an assumption: a long right tail, median ~60 % of the mean), kept within vLLM's
filter bounds, the draw's scale set so that what is kept has the published means. With ``prompt_tokens`` /
``gen_tokens`` given, the mix keeps its shape and takes those means.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Literal

Pattern = Literal["burst", "poisson", "concurrency"]


@dataclass(frozen=True, slots=True)
class LengthMix:
    """A named distribution of request lengths (log-normal, cut to bounds, means as published)."""

    name: str
    prompt_mean: float  # tokens, as published
    gen_mean: float
    sigma: float  # log-normal shape of both lengths
    min_tokens: int  # shortest prompt / output kept
    prompt_max: int  # longest prompt kept
    total_max: int  # longest prompt + output kept
    source: str


SHAREGPT = LengthMix(
    name="sharegpt", prompt_mean=217.4, gen_mean=201.6, sigma=1.0, min_tokens=4, prompt_max=1024, total_max=2048,
    source=("means: vllm bench serve --dataset-name sharegpt --num-prompts 1000, 217,393 input and 201,648 "
            "generated tokens (github.com/gpustack/gpustack docs/performance-lab/qwen3-14b/h100.md); bounds: "
            "vLLM ShareGPTDataset filter (prompt/output >= 4, prompt <= 1024, prompt + output <= 2048); "
            "log-normal shape sigma 1.0 assumed"))

#: the named length mixes (``--length-mix``); "fixed" (every request the same) is not one of them
LENGTH_MIXES: dict[str, LengthMix] = {SHAREGPT.name: SHAREGPT}


@dataclass(frozen=True, slots=True)
class Arrivals:
    """What a simulation is offered: ``requests`` of mean ``prompt_tokens`` + ``gen_tokens``,
    all at once (``burst``) or at ``rate_rps`` (``poisson``), lengths ``fixed`` or a named mix."""

    pattern: Pattern
    requests: int
    prompt_tokens: int
    gen_tokens: int
    rate_rps: float | None = None  # poisson only
    mix: str = "fixed"
    seed: int = 0
    concurrency: int | None = None  # closed loop only: clients each with one request in flight

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError("an arrival pattern has at least one request")
        if self.prompt_tokens < 1 or self.gen_tokens < 1:
            raise ValueError("prompt and output lengths are at least one token")
        if self.pattern == "poisson" and not (self.rate_rps and self.rate_rps > 0 and math.isfinite(self.rate_rps)):
            raise ValueError("a Poisson arrival pattern needs a positive finite rate")
        if self.pattern == "concurrency" and not (self.concurrency and self.concurrency >= 1):
            raise ValueError("a closed loop needs at least one client")
        if self.mix != "fixed" and self.mix not in LENGTH_MIXES:
            raise ValueError(f"length mix {self.mix!r}: one of fixed, {', '.join(LENGTH_MIXES)}")


def burst(requests: int, prompt_tokens: int, gen_tokens: int, mix: str = "fixed", seed: int = 0) -> Arrivals:
    """``requests`` sent together at time 0."""
    return Arrivals("burst", requests, prompt_tokens, gen_tokens, None, mix, seed)


def poisson(rate_rps: float, requests: int, prompt_tokens: int, gen_tokens: int, mix: str = "fixed",
            seed: int = 0) -> Arrivals:
    """``requests`` arriving as a Poisson process of ``rate_rps`` per second (seeded)."""
    return Arrivals("poisson", requests, prompt_tokens, gen_tokens, float(rate_rps), mix, seed)


def closed_loop(concurrency: int, requests: int, prompt_tokens: int, gen_tokens: int, mix: str = "fixed",
                seed: int = 0) -> Arrivals:
    """``requests`` sent by ``concurrency`` clients, each sending its next when its last one ends."""
    return Arrivals("concurrency", requests, prompt_tokens, gen_tokens, None, mix, seed, int(concurrency))


@dataclass(frozen=True, slots=True)
class Trace:
    """The drawn requests, in arrival order: arrival time (s), prompt and output tokens. In a
    closed loop (``clients`` > 0) only the first ``clients`` have a time (0): the simulation sends
    each next one when a request ends."""

    times_s: tuple[float, ...]
    prompts: tuple[int, ...]
    gens: tuple[int, ...]
    clients: int = 0


def _lengths(seed: int, mix: LengthMix, n: int, prompt_mean: float, gen_mean: float,
             ) -> tuple[list[int], list[int]]:
    """``n`` (prompt, output) pairs of ``mix``'s shape at the means asked: drawn log-normal, kept
    within the mix's bounds (vLLM's filter), the draw's scale adjusted until what is kept has the
    mix's published means (six passes), then scaled to the means asked."""
    mu = -mix.sigma * mix.sigma / 2  # log-normal of mean 1
    scale_p, scale_g = mix.prompt_mean, mix.gen_mean
    kept_p: list[float] = []
    kept_g: list[float] = []
    for _ in range(6):
        rng = random.Random(seed)
        kept_p, kept_g = [], []
        while len(kept_p) < n:
            p = scale_p * rng.lognormvariate(mu, mix.sigma)
            g = scale_g * rng.lognormvariate(mu, mix.sigma)
            if mix.min_tokens <= p <= mix.prompt_max and g >= mix.min_tokens and p + g <= mix.total_max:
                kept_p.append(p)
                kept_g.append(g)
        scale_p *= mix.prompt_mean * n / sum(kept_p)
        scale_g *= mix.gen_mean * n / sum(kept_g)
    sp, sg = prompt_mean / mix.prompt_mean, gen_mean / mix.gen_mean
    return [max(1, round(p * sp)) for p in kept_p], [max(1, round(g * sg)) for g in kept_g]


@functools.lru_cache(maxsize=64)
def _unit_gaps(seed: int, n: int) -> tuple[float, ...]:
    """Arrival times of a Poisson process of rate 1 (seeded): a rate ``r`` divides them by ``r``,
    so a capacity search over rates draws them once."""
    rng = random.Random(seed)
    t, times = 0.0, []
    for _ in range(n):
        times.append(t)
        t += rng.expovariate(1.0)
    return tuple(times)


@functools.lru_cache(maxsize=64)
def _mixed(seed: int, mix: str, n: int, prompt_mean: float, gen_mean: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    p, g = _lengths(seed, LENGTH_MIXES[mix], n, prompt_mean, gen_mean)
    return tuple(p), tuple(g)


def draw(a: Arrivals) -> Trace:
    """The requests of ``a`` (the same ``seed``, the same trace)."""
    n = a.requests
    clients = 0
    if a.pattern == "burst":
        times: tuple[float, ...] = (0.0,) * n
    elif a.pattern == "concurrency":
        clients = min(n, int(a.concurrency or 1))
        times = (0.0,) * clients + (math.inf,) * (n - clients)
    else:
        rate = float(a.rate_rps or 0.0)
        times = tuple(t / rate for t in _unit_gaps(a.seed, n))
    if a.mix == "fixed":
        return Trace(times, (a.prompt_tokens,) * n, (a.gen_tokens,) * n, clients)
    prompts, gens = _mixed(a.seed + 1, a.mix, n, float(a.prompt_tokens), float(a.gen_tokens))
    return Trace(times, prompts, gens, clients)
