"""The scheduler simulation (core/perf/serving_sim.py) and its step time (core/perf/step_time.py):
conservation, the engines' policies, preemption, the step model against the analytic decode step."""

from __future__ import annotations

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.perf.arrivals import Trace, burst, draw, poisson
from fleet_tui.core.perf.engines import serving_speed
from fleet_tui.core.perf.serving_sim import SchedulerConfig, percentile, simulate
from fleet_tui.core.perf.step_time import step_model
from fleet_tui.core.workload import Workload


class FlatStep:
    """A step of fixed time per iteration plus time per token: easy to reason about."""

    def __init__(self, fixed_s: float = 0.01, per_token_s: float = 0.0):
        self.fixed_s, self.per_token_s = fixed_s, per_token_s

    def seconds(self, decodes: int, decode_ctx_sum: float, prefill_tokens: int, prefill_ctx_sum: float) -> float:
        return self.fixed_s + self.per_token_s * (decodes + prefill_tokens)


def config(blocks: int = 10_000, seqs: int = 64, batched: int = 2048, policy: str = "vllm",
           step=None) -> SchedulerConfig:
    return SchedulerConfig(kv_blocks=blocks, max_num_seqs=seqs, max_num_batched_tokens=batched,
                           step=step or FlatStep(), policy=policy)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["vllm", "sglang", "trtllm"])
def test_every_request_completes_with_all_its_tokens(policy):
    offered = poisson(50, 500, 300, 120, mix="sharegpt", seed=3)
    r = simulate(config(blocks=400, policy=policy), offered)
    assert r.completed == 500 and r.rejected == 0
    assert (r.output_tokens, r.input_tokens) == (sum(draw(offered).gens), sum(draw(offered).prompts))
    assert r.ttft.p50 <= r.ttft.p95 <= r.ttft.p99 and r.e2e.p50 <= r.e2e.p99
    assert 0 < r.kv_use_max <= 1 and r.running_max <= 64


def test_one_request_alone_is_its_prefill_then_one_step_per_token():
    r = simulate(config(step=FlatStep(0.01)), burst(1, 100, 50))
    # the prefill iteration makes the first token; 49 decode iterations the rest
    assert r.ttft.mean == pytest.approx(0.01)
    assert r.e2e.mean == pytest.approx(0.50)
    assert r.tpot.mean == pytest.approx(0.01)
    assert r.iterations == 50


def test_a_prompt_longer_than_the_token_budget_is_chunked():
    r = simulate(config(batched=512, step=FlatStep(0.01)), burst(1, 2000, 2))
    assert r.ttft.mean == pytest.approx(0.04)  # ceil(2000 / 512) = 4 prefill iterations


def test_the_running_limit_queues_the_rest():
    r = simulate(config(seqs=4, step=FlatStep(0.01)), burst(8, 16, 10))
    assert r.running_max == 4 and r.queue_max >= 4
    # the second four start when the first four end: their first token a whole request later
    assert r.ttft_sorted_s[-1] > r.ttft_sorted_s[0] + 9 * 0.01


def test_vllm_preempts_and_recomputes_when_the_pool_runs_out():
    # 20 blocks of 16 tokens: 320 tokens; eight requests of 32 + 64 tokens need 6 blocks each at the end
    tight = simulate(config(blocks=20, seqs=8, step=FlatStep(0.01)), burst(8, 32, 64))
    roomy = simulate(config(blocks=1000, seqs=8, step=FlatStep(0.01)), burst(8, 32, 64))
    assert tight.completed == 8 and tight.preemptions > 0 and roomy.preemptions == 0
    assert tight.kv_use_max == pytest.approx(1.0, abs=0.06)
    assert tight.duration_s > roomy.duration_s  # recomputation and fewer at a time


class CountingStep(FlatStep):
    """A flat step that counts the prompt tokens the iterations computed."""

    def __init__(self) -> None:
        super().__init__(0.001, 1e-4)
        self.prefill_tokens = 0

    def seconds(self, decodes: int, decode_ctx_sum: float, prefill_tokens: int, prefill_ctx_sum: float) -> float:
        self.prefill_tokens += prefill_tokens
        return super().seconds(decodes, decode_ctx_sum, prefill_tokens, prefill_ctx_sum)


def test_a_preempted_vllm_request_finds_its_own_blocks_cached():
    """vLLM V1 keeps a preempted request's freed blocks hashed (prefix caching, on by default): when
    it is readmitted before they are handed out again it recomputes only what was evicted, so a
    thrashing pool costs far less than a full recomputation (GPUStack's 32K-token burst of vLLM)."""
    def run(cached: bool) -> tuple[int, float, int]:
        step = CountingStep()
        cfg = SchedulerConfig(kv_blocks=60, max_num_seqs=8, max_num_batched_tokens=128, step=step,
                              prefix_caching=cached)
        r = simulate(cfg, burst(6, 320, 64))
        assert r.completed == 6 and r.output_tokens == 6 * 64
        return step.prefill_tokens, r.duration_s, r.preemptions

    cached, cached_s, cached_pre = run(True)
    full, full_s, full_pre = run(False)
    assert cached_pre > 0 and full_pre > 0
    # every prompt once, then what preemption lost: with the cache at least the last token each time
    assert 6 * 320 + cached_pre <= cached < full
    assert cached_s < full_s
    # TensorRT-LLM and SGLang schedule as before: the flag is vLLM's
    for policy in ("trtllm", "sglang"):
        a = simulate(config(blocks=60, seqs=8, batched=128, policy=policy, step=FlatStep(0.001, 1e-4)),
                     burst(6, 320, 64))
        b = simulate(SchedulerConfig(kv_blocks=60, max_num_seqs=8, max_num_batched_tokens=128,
                                     step=FlatStep(0.001, 1e-4), policy=policy, prefix_caching=False),  # type: ignore[arg-type]
                     burst(6, 320, 64))
        assert a.duration_s == b.duration_s


def test_trtllm_reserves_whole_sequences_and_never_preempts():
    r = simulate(config(blocks=20, seqs=8, policy="trtllm", step=FlatStep(0.01)), burst(8, 32, 64))
    assert r.completed == 8 and r.preemptions == 0
    assert r.running_max == 3  # 6 blocks each of 20


def test_sglang_keeps_prefill_and_decode_apart():
    # a flat step per iteration: a separate prefill iteration costs a decoding request one step
    step = FlatStep(0.01)
    mixed = simulate(config(step=step), poisson(20, 200, 64, 64, seed=1))
    apart = simulate(config(step=step, policy="sglang"), poisson(20, 200, 64, 64, seed=1))
    assert apart.tpot.mean > mixed.tpot.mean


def test_a_request_longer_than_the_pool_is_rejected_not_stalled():
    r = simulate(config(blocks=4, step=FlatStep(0.01)), Trace((0.0, 0.0), (16, 200), (16, 16)))
    assert (r.completed, r.rejected) == (1, 1)


def test_overload_shows_as_a_growing_backlog():
    under = simulate(config(seqs=8, step=FlatStep(0.01)), poisson(5, 400, 32, 16, seed=2))
    over = simulate(config(seqs=8, step=FlatStep(0.01)), poisson(200, 400, 32, 16, seed=2))
    assert over.backlog_growth_s > 10 * max(under.backlog_growth_s, 0.01)
    assert over.queue_mean > under.queue_mean


def test_the_same_seed_gives_the_same_answer():
    a = simulate(config(), poisson(30, 300, 200, 50, mix="sharegpt", seed=5))
    b = simulate(config(), poisson(30, 300, 200, 50, mix="sharegpt", seed=5))
    assert a == b


def test_percentile_is_linear_between_ranks():
    v = (1.0, 2.0, 3.0, 4.0, 5.0)
    assert percentile(v, 50) == 3.0 and percentile(v, 95) == pytest.approx(4.8) and percentile(v, 0) == 1.0


def test_config_refuses_a_budget_below_the_running_limit():
    with pytest.raises(ValueError):
        config(seqs=512, batched=256)


@pytest.fixture(scope="module")
def llama():
    cat = load_catalog(include_user=False)
    return Workload(kind="inference", model=cat.model("llama-3.1-8b"), batch=1, prompt_len=1000,
                    gen_len=1000), cat.accelerator("H100")


@pytest.mark.parametrize("b", [1, 64, 256])
def test_a_decode_only_step_is_the_analytic_decode_step(llama, b):
    w, acc = llama
    sp = serving_speed(w, acc, 1, 1000, 1000, b)
    step = step_model(w, acc, 1)
    assert step is not None
    assert step.seconds(b, b * 1500.0, 0, 0.0) == pytest.approx(sp.tpot_s, rel=0.01)


def test_prefill_beside_decodes_costs_more_than_decodes_alone(llama):
    w, acc = llama
    step = step_model(w, acc, 1)
    assert step is not None
    alone = step.seconds(64, 64 * 1500.0, 0, 0.0)
    mixed = step.seconds(64, 64 * 1500.0, 2048, 2048 * 1024.0)
    assert mixed > alone + 0.5 * 2048 / (serving_speed(w, acc, 1, 2048, 1).prefill_tokens_per_s or 1)


def test_a_closed_loop_keeps_its_clients_busy_and_no_more():
    from fleet_tui.core.perf.arrivals import closed_loop

    r = simulate(config(step=FlatStep(0.01)), closed_loop(4, 40, 16, 10))
    assert r.completed == 40 and r.running_max == 4 and r.queue_max == 0
    # ten rounds of four requests, one after another: each round a prefill and nine decodes
    assert r.duration_s == pytest.approx(10 * 10 * 0.01)
    assert r.ttft.p99 == pytest.approx(0.01)


def test_the_front_end_delays_first_tokens_and_caps_the_request_rate():
    from dataclasses import replace

    base = config(step=FlatStep(0.01))
    slow = replace(base, frontend_s=0.05, frontend_latency_s=0.02)
    alone = simulate(slow, burst(1, 16, 10))
    assert alone.ttft.mean == pytest.approx(0.01 + 0.05 + 0.02)
    # a burst reaches the scheduler one request per 50 ms: 100 of them take 5 s to get in
    many = simulate(slow, burst(100, 16, 2))
    assert many.duration_s == pytest.approx(100 * 0.05 + 0.02 + 2 * 0.01, abs=0.02)
    assert simulate(base, burst(100, 16, 2)).duration_s < 0.5


def test_the_api_server_pays_per_output_token_so_longer_answers_lower_its_request_ceiling():
    from dataclasses import replace

    server = replace(config(step=FlatStep(0.001)), frontend_s=0.004, frontend_token_s=45e-6)
    rates = {}
    for gen in (4, 200):
        r = simulate(server, burst(400, 16, gen))
        rates[gen] = r.completed / r.duration_s
        # the serial core is the bottleneck here: one request per (per-request + per-token work)
        assert rates[gen] == pytest.approx(1 / (0.004 + 45e-6 * gen), rel=0.05)
    assert rates[200] < 0.5 * rates[4]
    # the per-token work is what lowers it: without it the 200-token burst gets in at 1 / 4 ms
    flat = simulate(replace(server, frontend_token_s=0.0), burst(400, 16, 200))
    assert flat.completed / flat.duration_s > 2 * rates[200]
