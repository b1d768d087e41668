"""A serving engine's scheduler, iteration by iteration: what a replica does with the requests it
is offered, and the latency each request sees.

:func:`simulate` runs one replica: a KV pool of ``kv_blocks`` blocks of ``block_size`` tokens, at
most ``max_num_seqs`` requests running and ``max_num_batched_tokens`` tokens per iteration, each
iteration's time from a :class:`StepTime` (the roofline step of :mod:`.step_time`). Its inputs are
plain numbers so that any planner can call it; :func:`fleet_tui.core.perf.serving_plan.simulate_replica`
builds them from a workload and an engine profile.

The scheduling policies (``policy``), as the engines' own schedulers do it:

* ``"vllm"`` (vLLM V1, ``vllm/v1/core/sched/scheduler.py``): no prefill or decode phase; each
  iteration first gives every running request its next tokens in order (a decode 1, a prompt in
  progress the next chunk of what the token budget leaves), allocating KV blocks as the tokens need
  them (``kv_cache_manager.allocate_slots``); when the pool is out, the most recently admitted
  running request is preempted (``running.pop()``): its blocks are freed and it goes back to the
  front of the queue to be recomputed, prompt and generated tokens. Prefix caching is on by default
  in V1, so the freed blocks keep their hashes: they go to the back of the free queue (a request's
  blocks tail first, ``kv_cache_manager.free``), behind the blocks without a hash, and the
  allocator takes from the front, so a preempted request that is readmitted before its blocks are
  handed out again finds its computed tokens cached (``get_computed_blocks``) and recomputes only
  what was evicted (the last token at least). Only in an iteration without a
  preemption are waiting requests admitted, first come first served, while the token budget and the
  running limit allow and their first chunk's blocks are free.
* ``"sglang"`` (SGLang ``scheduler.py`` / ``schedule_policy.py``): an iteration is either a prefill
  batch (waiting requests admitted up to the chunk budget; the decodes wait) or a decode batch of
  every running request; prefill goes first when a request can be admitted. Admission is
  conservative: the pool must keep room for ``new_token_ratio`` of every running request's
  remaining output (0.7 at start, decaying by 0.001 per decode iteration to 0.1, back to 0.7 after
  a retraction), ``SGLANG_INIT_NEW_TOKEN_RATIO`` and the ``schedule_conservativeness`` default 1.0. A
  decode that finds the pool full retracts the most recent request (recomputed later, all of it:
  ``ScheduleBatch.release_req`` frees its KV without inserting it into the radix tree).
* ``"trtllm"`` (TensorRT-LLM ``GUARANTEED_NO_EVICT``, the default capacity scheduler policy): a
  request is admitted only when its whole prompt + output fits in the free blocks, which it keeps
  to the end; nothing is ever evicted. Prompts are chunked beside the decodes as in vLLM.

Time only moves at iteration boundaries: a request that arrives during an iteration is scheduled at
the next one. Stretches with only decodes and nothing to admit (no arrival, no request finishing,
no new block short) are advanced many iterations at once, at the context midway through (the step
time is affine in context), which is what makes 10,000 requests a fraction of a second
(``bench/bench_serving_sim.py``).

Not modelled: prefix caching across requests (benchmarks with random prompts share no prefix;
a preempted vLLM request's own cached blocks are, above), speculative
decoding, CPU swap space, priorities other than first come first served, the detokenizer and
HTTP front end, vLLM's ``long_prefill_token_threshold`` (off by default), TensorRT-LLM's
``MAX_UTILIZATION`` policy, and variation in step time beyond the roofline's.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol

from fleet_tui.core.perf.arrivals import Arrivals, Trace, draw

Policy = Literal["vllm", "sglang", "trtllm"]

#: SGLang's admission reserve for running requests' remaining output: init 0.7
#: (SGLANG_INIT_NEW_TOKEN_RATIO), floor 0.7 × 0.14, decay (init − floor) / 600 per decode iteration
#: (python/sglang/srt/managers/scheduler.py, global_config.py)
SGLANG_INIT_RATIO = 0.7
SGLANG_MIN_RATIO = SGLANG_INIT_RATIO * 0.14
SGLANG_RATIO_DECAY = (SGLANG_INIT_RATIO - SGLANG_MIN_RATIO) / 600
#: SGLang clips a request's expected output at this many tokens when reserving for it
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
#: most iterations advanced at once in a decode-only stretch (the step time is taken at its middle)
MAX_JUMP = 256


class StepTime(Protocol):
    def seconds(self, decodes: int, decode_ctx_sum: float, prefill_tokens: int,
                prefill_ctx_sum: float) -> float: ...


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """One replica's scheduler: its KV pool, limits and policy, and the time of an iteration."""

    kv_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    step: StepTime
    block_size: int = 16
    policy: Policy = "vllm"
    #: the API server's work per request before the scheduler sees it (HTTP, chat template,
    #: tokenizer), one request after another: it caps the rate requests reach the engine
    frontend_s: float = 0.0
    #: time a request spends outside the GPU's queue besides that (the request path and the first
    #: token's way back), added to its first-token time
    frontend_latency_s: float = 0.0
    #: the API server's work per output token (detokenizing, one streamed chunk), on the same serial
    #: core as ``frontend_s``; booked when the request enters, so the request rate one server
    #: sustains is 1 / (frontend_s + frontend_token_s × output tokens)
    frontend_token_s: float = 0.0
    #: vLLM V1's ``enable_prefix_caching`` (on by default): a preempted request's blocks stay
    #: cached until handed out again (the module docstring); the other policies ignore it
    prefix_caching: bool = True

    def __post_init__(self) -> None:
        if self.kv_blocks < 1 or self.max_num_seqs < 1 or self.block_size < 1:
            raise ValueError("a replica needs at least one KV block, one running request and a block size")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM refuses the same (SchedulerConfig: max_num_batched_tokens >= max_num_seqs)
            raise ValueError("max_num_batched_tokens must be at least max_num_seqs")


@dataclass(frozen=True, slots=True)
class Percentiles:
    mean: float
    p50: float
    p95: float
    p99: float


def percentile(sorted_values: tuple[float, ...], q: float) -> float:
    """The ``q``-th percentile (0-100) of ascending values, linear between ranks (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _summary(values: tuple[float, ...]) -> Percentiles:
    if not values:
        return Percentiles(math.nan, math.nan, math.nan, math.nan)
    return Percentiles(sum(values) / len(values), percentile(values, 50), percentile(values, 95),
                       percentile(values, 99))


@dataclass(frozen=True, slots=True)
class SimResult:
    """What one replica did with the requests: throughput, per-request latency percentiles (TTFT:
    arrival to first token; TPOT: (end − first token) / (output − 1), vllm bench serve's; end to
    end: arrival to last token), the queue and the KV pool over time."""

    requests: int  # offered
    completed: int
    rejected: int  # longer than the whole KV pool holds (never admitted)
    duration_s: float  # first arrival to last completion
    output_tokens: int
    input_tokens: int
    output_tokens_per_s: float
    total_tokens_per_s: float
    request_rps: float
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    queue_mean: float  # requests waiting (time-weighted)
    queue_max: int
    running_mean: float  # requests running (time-weighted)
    running_max: int
    kv_use_mean: float  # share of the KV pool in use (time-weighted)
    kv_use_max: float
    preemptions: int
    iterations: int
    arrival_span_s: float  # first to last arrival
    #: mean first-token time of the last quarter of arrivals minus the second quarter's: grows
    #: with the arrival span when the replica cannot keep up
    backlog_growth_s: float
    ttft_sorted_s: tuple[float, ...]
    tpot_sorted_s: tuple[float, ...]
    e2e_sorted_s: tuple[float, ...]

    def ttft_at(self, q: float) -> float:
        return percentile(self.ttft_sorted_s, q)

    def tpot_at(self, q: float) -> float:
        return percentile(self.tpot_sorted_s, q)

    def e2e_at(self, q: float) -> float:
        return percentile(self.e2e_sorted_s, q)

    def to_dict(self) -> dict:
        out: dict = {}
        for k in self.__slots__:  # type: ignore[attr-defined]
            if k.endswith("_sorted_s"):
                continue
            v = getattr(self, k)
            out[k] = ({"mean": v.mean, "p50": v.p50, "p95": v.p95, "p99": v.p99}
                      if isinstance(v, Percentiles) else v)
        return out


def simulate(config: SchedulerConfig, arrivals: Arrivals | Trace) -> SimResult:
    """Run ``arrivals`` through one replica with ``config`` (see the module docstring)."""
    trace = draw(arrivals) if isinstance(arrivals, Arrivals) else arrivals
    return _Replica(config, trace).run()


class _Replica:
    """The simulation's state. Running decodes advance in lock step, one token per decode
    iteration, so a decoding request is kept as where it started (iteration ``s0``, context
    ``c0``, ``k0`` tokens generated) and nothing is touched per token: the sum of contexts, the
    blocks due this iteration (by the block phase ``(c0 − s0) mod block_size``) and the next
    request to finish (a heap) are kept incrementally."""

    def __init__(self, cfg: SchedulerConfig, trace: Trace):
        self.cfg = cfg
        self.bs = cfg.block_size
        self.times, self.prompts, self.gens = list(trace.times_s), trace.prompts, trace.gens
        n = len(self.times)
        self.released = trace.clients or n  # a closed loop sends the next request when one ends
        # when each request reaches the scheduler: through the serial front end, then its latency
        self.ready = [math.inf] * n
        self.frontend_free = -math.inf
        for k in range(self.released):
            self._through_frontend(k)
        self.n = n
        self.full = cfg.policy == "trtllm"  # the whole sequence reserved at admission
        self.produced = [0] * n  # tokens generated (while not decoding: so far)
        self.computed = [0] * n  # prefill progress
        self.held = [0] * n  # blocks held (prefilling, or reserved under full reservation)
        self.s0 = [0] * n
        self.c0 = [0] * n
        self.decoding = [False] * n
        self.epoch = [0] * n
        self.first = [math.nan] * n
        self.end = [math.nan] * n
        self.running: dict[int, None] = {}  # admission order (the last is preempted first)
        self.prefilling: list[int] = []
        self.waiting: deque[int] = deque()
        self.free = cfg.kv_blocks
        self.dstep = 0  # decode iterations so far
        self.dec_n = 0
        self.dec_sum = 0  # sum of (c0 - s0) over decoding requests
        self.rem_sum = 0  # sum of (gen - k0 + s0) over decoding requests (SGLang's reserve)
        self.phase = [0] * self.bs  # decoding requests per block phase
        self.finish: list[tuple[int, int, int]] = []  # (last decode iteration, id, epoch)
        self.ratio = SGLANG_INIT_RATIO
        #: vLLM: a waiting preempted request's blocks still cached in the free pool (part of
        #: ``free``), oldest preemption first; evicted as the pool hands out more blocks than the
        #: free blocks without a hash
        self.cached = [0] * n
        self.cached_order: deque[int] = deque()
        self.cached_sum = 0
        self.prefix_cache = cfg.policy == "vllm" and cfg.prefix_caching
        self.preemptions = 0
        self.rejected = 0
        self.iterations = 0

    # -- decoding requests ------------------------------------------------------------------

    def _start_decoding(self, i: int) -> None:
        """``i`` finished its prefill this iteration (its first or next token is out): it decodes
        from the next decode iteration."""
        s0, c0 = self.dstep, self.computed[i]
        k0 = self.produced[i]
        self.s0[i], self.c0[i], self.decoding[i] = s0, c0, True
        self.dec_n += 1
        self.dec_sum += c0 - s0
        self.rem_sum += self.gens[i] - k0 + s0
        if not self.full:
            self.phase[(c0 - s0) % self.bs] += 1
        heapq.heappush(self.finish, (s0 + self.gens[i] - k0 - 1, i, self.epoch[i]))

    def _stop_decoding(self, i: int) -> int:
        """Take ``i`` out of the decoding set before iteration ``dstep``; its blocks held."""
        s0, c0 = self.s0[i], self.c0[i]
        self.decoding[i] = False
        self.dec_n -= 1
        self.dec_sum -= c0 - s0
        self.rem_sum -= self.gens[i] - self.produced[i] + s0
        done = self.dstep - s0
        self.produced[i] += done
        self.computed[i] = c0 + done
        if self.full:
            return self.held[i]
        self.phase[(c0 - s0) % self.bs] -= 1
        return -(-(c0 + done) // self.bs)

    def _due_now(self, i: int) -> bool:
        """Whether decoding request ``i`` needs a new block in decode iteration ``dstep``."""
        return self.decoding[i] and not self.full and (self.c0[i] - self.s0[i] + self.dstep) % self.bs == 0

    def _preempt_last(self) -> int:
        """Preempt the most recently admitted running request; returns it."""
        i, _ = self.running.popitem()
        if self.decoding[i]:
            self.free += self._stop_decoding(i)
        else:
            self.prefilling.remove(i)
            self.free += self.held[i]
        if self.prefix_cache:  # its full blocks stay hashed in the free pool (the module docstring)
            kept = self.computed[i] // self.bs
            self.cached[i] = kept
            self.cached_sum += kept
            self.cached_order.append(i)
        self.held[i] = 0
        self.computed[i] = 0
        self.epoch[i] += 1
        self.preemptions += 1
        self.waiting.appendleft(i)
        return i

    def _evict(self) -> None:
        """The free pool shrank: blocks beyond the ones without a hash come from the oldest
        preempted requests' cached blocks."""
        while self.cached_sum > self.free:
            j = self.cached_order[0]
            take = min(self.cached[j], self.cached_sum - self.free)
            self.cached[j] -= take
            self.cached_sum -= take
            if not self.cached[j]:
                self.cached_order.popleft()

    def _reused(self, i: int) -> int:
        """Cached blocks a waiting request ``i`` starts from (vLLM recomputes its last token at least)."""
        kept = self.cached[i]
        return min(kept, (self._length(i) - 1) // self.bs) if kept else 0

    def _take_cached(self, i: int) -> int:
        """Admit ``i``'s cached blocks: they leave the free pool, held again; returns them."""
        kept = self.cached[i]
        if not kept:
            return 0
        reuse = self._reused(i)
        self.cached[i] = 0
        self.cached_sum -= kept
        self.cached_order.remove(i)
        self.free -= reuse
        self.held[i] = reuse
        self.computed[i] = reuse * self.bs
        return reuse

    def _due(self, k: int) -> int:
        """New blocks the decodes need over the next ``k`` decode iterations."""
        if self.full:
            return 0
        bs, s, total = self.bs, self.dstep, 0
        for p, c in enumerate(self.phase):
            if c:
                t0 = (-p - s) % bs
                if t0 < k:
                    total += c * (1 + (k - 1 - t0) // bs)
        return total

    # -- admission ----------------------------------------------------------------------------

    def _need_blocks(self, i: int, chunk: int) -> int:
        if self.full:
            return -(-(self.prompts[i] + self.gens[i]) // self.bs) - self.held[i]
        return -(-(self.computed[i] + chunk) // self.bs) - self.held[i]

    def _admission(self, i: int, budget: int) -> tuple[int, int, int]:
        """(cached blocks it starts from, first chunk, new blocks it needs) of admitting waiting ``i``."""
        reuse = self._reused(i)
        if not reuse:
            chunk = min(self._length(i), budget)
            return 0, chunk, self._need_blocks(i, chunk)
        chunk = min(self._length(i) - reuse * self.bs, budget)
        return reuse, chunk, -(-(reuse * self.bs + chunk) // self.bs) - reuse

    def _length(self, i: int) -> int:
        """Tokens ``i`` must (re)compute before its next token: its prompt and what it generated."""
        return self.prompts[i] + self.produced[i]

    def _sglang_room(self, i: int) -> bool:
        reserve = self.ratio * (self.rem_sum - self.dec_n * self.dstep + sum(
            min(self.gens[j] - self.produced[j], SGLANG_CLIP_MAX_NEW_TOKENS) for j in self.prefilling))
        need = self._length(i) + self.ratio * min(self.gens[i] - self.produced[i], SGLANG_CLIP_MAX_NEW_TOKENS)
        return self.free * self.bs - reserve >= need

    def _can_admit(self) -> bool:
        if not self.waiting or len(self.running) >= self.cfg.max_num_seqs:
            return False
        i = self.waiting[0]
        budget = self.cfg.max_num_batched_tokens - (self.dec_n if self.cfg.policy != "sglang" else 0)
        if budget <= 0:
            return False
        reuse, chunk, need = self._admission(i, budget)
        if need > self.free - reuse:
            return False
        return self.cfg.policy != "sglang" or self._sglang_room(i)

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> SimResult:
        cfg, bs = self.cfg, self.bs
        times, n = self.ready, self.n
        now, nxt = (self.times[0] if n else 0.0), 0
        done = 0
        q_area = run_area = kv_area = 0.0
        q_max = run_max = 0
        kv_peak = 0
        t_start = now
        finish = self.finish
        while done + self.rejected < n:
            while nxt < n and times[nxt] <= now:
                if -(-(self.prompts[nxt] + self.gens[nxt]) // bs) > cfg.kv_blocks:
                    self.rejected += 1  # the engine refuses a request longer than its pool
                    self._release(now)
                else:
                    self.waiting.append(nxt)
                nxt += 1
            if not self.running and not self.waiting:
                if nxt < n:
                    now = times[nxt]
                continue
            while finish and (finish[0][2] != self.epoch[finish[0][1]] or not self.decoding[finish[0][1]]):
                heapq.heappop(finish)
            admit = self._can_admit()
            if not self.prefilling and not admit and self.dec_n and (cfg.policy != "sglang" or not self.waiting):
                dt, k = self._jump(now, times[nxt] if nxt < n else math.inf)
            else:
                dt, k = self._iteration(admit), 1
            if dt <= 0.0:
                # nothing could run (a queue head waiting for blocks nothing will free): wait for the
                # next arrival; this cannot happen with a running request
                if nxt >= n:
                    raise RuntimeError("serving simulation stalled with requests waiting")
                now = max(now, times[nxt])
                continue
            used = cfg.kv_blocks - self.free
            q_area += len(self.waiting) * dt
            run_area += len(self.running) * dt
            kv_area += used * dt
            q_max = max(q_max, len(self.waiting))
            run_max = max(run_max, len(self.running))
            kv_peak = max(kv_peak, used)
            now += dt
            self.iterations += k
            # requests whose last token came out in this stretch (only at its last iteration)
            last = self.dstep - 1
            while finish and finish[0][0] <= last:
                _, i, ep = heapq.heappop(finish)
                if ep != self.epoch[i] or not self.decoding[i]:
                    continue
                self.free += self._stop_decoding(i)
                self.held[i] = 0
                del self.running[i]
                self.end[i] = now
                self._release(now)
                done += 1
            done += self._finish_prefills(now)
        return self._result(now - t_start, q_area, run_area, kv_area, q_max, run_max, kv_peak)

    def _through_frontend(self, k: int) -> None:
        cfg = self.cfg
        work = cfg.frontend_s + cfg.frontend_token_s * self.gens[k]
        self.frontend_free = max(self.times[k], self.frontend_free) + work
        self.ready[k] = self.frontend_free + cfg.frontend_latency_s

    def _release(self, now: float) -> None:
        """A closed loop's client whose request ended (or was refused) sends its next one now."""
        if self.released < self.n:
            self.times[self.released] = now
            self._through_frontend(self.released)
            self.released += 1

    def _finish_prefills(self, now: float) -> int:
        """Requests whose prompt completed in the iteration just run: a token each."""
        done = 0
        for i in [j for j in self.prefilling if self.computed[j] >= self._length(j)]:
            self.prefilling.remove(i)
            self.produced[i] += 1
            if math.isnan(self.first[i]):
                self.first[i] = now
            if self.produced[i] >= self.gens[i]:
                self.free += self.held[i]
                self.held[i] = 0
                del self.running[i]
                self.end[i] = now
                self._release(now)
                done += 1
            else:
                if not self.full:
                    self.held[i] = 0  # from now on its blocks follow from its context
                self._start_decoding(i)
        return done

    def _jump(self, now: float, next_arrival: float) -> tuple[float, int]:
        """Advance a decode-only stretch; returns (seconds, iterations)."""
        cfg = self.cfg
        k = MAX_JUMP
        if self.finish:
            k = min(k, self.finish[0][0] - self.dstep + 1)
        ctx_now = self.dec_sum + self.dec_n * self.dstep
        dt1 = cfg.step.seconds(self.dec_n, ctx_now, 0, 0.0)
        if next_arrival < math.inf:
            k = min(k, max(1, math.ceil((next_arrival - now) / dt1)))
        if cfg.policy == "sglang":
            k = min(k, 16)  # its admission reserve decays per iteration
        k = max(1, k)
        if self._due(k) > self.free:
            k = max(1, self.bs * (self.free // max(1, self.dec_n)))
            while k > 1 and self._due(k) > self.free:
                k //= 2
            if self._due(k) > self.free:
                return self._iteration(False), 1
        if k == 1:
            return self._iteration(False), 1
        dt = k * cfg.step.seconds(self.dec_n, ctx_now + self.dec_n * (k - 1) / 2, 0, 0.0)
        self.free -= self._due(k)
        self._evict()
        self.dstep += k
        if cfg.policy == "sglang":
            self.ratio = max(SGLANG_MIN_RATIO, self.ratio - k * SGLANG_RATIO_DECAY)
        return dt, k

    def _iteration(self, admit: bool) -> float:
        """One iteration (the policy's); returns its seconds (0: nothing ran)."""
        cfg = self.cfg
        if cfg.policy == "sglang":
            return self._sglang_iteration(admit)
        budget = cfg.max_num_batched_tokens
        preempted = False
        # decodes first: the blocks due this iteration, preempting from the back when short
        due = self._due(1)
        while due > self.free and self.running:
            due -= 1 if self._due_now(next(reversed(self.running))) else 0
            self._preempt_last()
            preempted = True
        budget -= self.dec_n
        self.free -= due
        self._evict()
        pre_tokens, pre_ctx = 0, 0.0
        # prompts in progress, in admission order
        for i in list(self.prefilling):
            if budget <= 0:
                break
            if i not in self.running:
                continue
            chunk = min(self._length(i) - self.computed[i], budget)
            need = self._need_blocks(i, chunk)
            while need > self.free and self.running:
                if self._due_now(next(reversed(self.running))):
                    self.free += 1  # its block of this iteration, taken above
                j = self._preempt_last()
                preempted = True
                if j == i:
                    break
            if i not in self.running:
                break
            self.free -= need
            self._evict()
            self.held[i] += need
            pre_ctx += chunk * (self.computed[i] + chunk / 2)
            self.computed[i] += chunk
            pre_tokens += chunk
            budget -= chunk
        if not preempted and admit:
            while budget > 0 and self.waiting and len(self.running) < cfg.max_num_seqs:
                i = self.waiting[0]
                reuse, chunk, need = self._admission(i, budget)
                if need > self.free - reuse:
                    break
                self.waiting.popleft()
                self.running[i] = None
                self.prefilling.append(i)
                start = self._take_cached(i) * self.bs
                self.free -= need
                self._evict()
                self.held[i] = reuse + need
                pre_ctx += chunk * (start + chunk / 2)
                self.computed[i] = start + chunk
                pre_tokens += chunk
                budget -= chunk
        dt = cfg.step.seconds(self.dec_n, self.dec_sum + self.dec_n * self.dstep, pre_tokens, pre_ctx)
        self.dstep += 1  # every iteration is a decode iteration for the requests decoding
        return dt

    def _sglang_iteration(self, admit: bool) -> float:
        cfg = self.cfg
        if admit or self.prefilling:  # a prefill batch: the chunk in progress, then new requests
            budget, pre_tokens, pre_ctx = cfg.max_num_batched_tokens, 0, 0.0
            for i in list(self.prefilling):
                chunk = min(self._length(i) - self.computed[i], budget)
                need = self._need_blocks(i, chunk)
                if need > self.free:
                    break
                self.free -= need
                self.held[i] += need
                pre_ctx += chunk * (self.computed[i] + chunk / 2)
                self.computed[i] += chunk
                pre_tokens += chunk
                budget -= chunk
            while budget > 0 and self._can_admit():
                i = self.waiting.popleft()
                chunk = min(self._length(i), budget)
                need = self._need_blocks(i, chunk)
                self.running[i] = None
                self.prefilling.append(i)
                self.free -= need
                self.held[i] = need
                pre_ctx += chunk * chunk / 2
                self.computed[i] = chunk
                pre_tokens += chunk
                budget -= chunk
            if pre_tokens:
                return cfg.step.seconds(0, 0.0, pre_tokens, pre_ctx)
        if not self.dec_n:
            return 0.0
        due = self._due(1)
        retracted = False
        while due > self.free and self.running:
            due -= 1 if self._due_now(next(reversed(self.running))) else 0
            self._preempt_last()
            retracted = True
        if retracted:
            self.ratio = SGLANG_INIT_RATIO
        if not self.dec_n:
            return 0.0
        self.free -= due
        dt = cfg.step.seconds(self.dec_n, self.dec_sum + self.dec_n * self.dstep, 0, 0.0)
        self.dstep += 1
        self.ratio = max(SGLANG_MIN_RATIO, self.ratio - SGLANG_RATIO_DECAY)
        return dt

    def _result(self, duration: float, q_area: float, run_area: float, kv_area: float, q_max: int,
                run_max: int, kv_peak: int) -> SimResult:
        served = [i for i in range(self.n) if not math.isnan(self.end[i])]
        q = len(served) // 4
        growth = 0.0
        if q:
            second = sum(self.first[i] - self.times[i] for i in served[q:2 * q]) / q
            last = sum(self.first[i] - self.times[i] for i in served[-q:]) / q
            growth = last - second
        ttft = tuple(sorted(self.first[i] - self.times[i] for i in served))
        tpot = tuple(sorted((self.end[i] - self.first[i]) / (self.gens[i] - 1) for i in served if self.gens[i] > 1))
        e2e = tuple(sorted(self.end[i] - self.times[i] for i in served))
        out = sum(self.gens[i] for i in served)
        inp = sum(self.prompts[i] for i in served)
        span = max(duration, 1e-12)
        blocks = self.cfg.kv_blocks
        return SimResult(
            requests=self.n, completed=len(served), rejected=self.rejected, duration_s=duration, output_tokens=out,
            input_tokens=inp, output_tokens_per_s=out / span, total_tokens_per_s=(out + inp) / span,
            request_rps=len(served) / span, ttft=_summary(ttft), tpot=_summary(tpot), e2e=_summary(e2e),
            queue_mean=q_area / span, queue_max=q_max, running_mean=run_area / span, running_max=run_max,
            kv_use_mean=kv_area / span / blocks, kv_use_max=kv_peak / blocks, preemptions=self.preemptions,
            iterations=self.iterations,
            arrival_span_s=(max(t for t in self.times if t < math.inf) - self.times[0]) if self.n else 0.0,
            backlog_growth_s=growth, ttft_sorted_s=ttft, tpot_sorted_s=tpot, e2e_sorted_s=e2e)
