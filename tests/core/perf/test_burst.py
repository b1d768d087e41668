"""A burst of n requests sent at once (a serving benchmark at request rate "inf"): never more than
n sequences in flight, each request prefilled once. The analytic waves (core/perf/serving_plan.burst_speed,
which bench/validation_rows.py predicts with) and what ``size --burst`` shows, the scheduler
simulation (core/perf/sim_plan.burst_report)."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.perf.engines import serving_speed
from fleet_tui.core.perf.serving_plan import burst_speed
from fleet_tui.core.perf.sim_plan import burst_report
from fleet_tui.core.workload import Workload

PROMPT, GEN = 202, 214


@pytest.fixture(scope="module")
def setup():
    cat = load_catalog(include_user=False)
    w = Workload(kind="inference", model=cat.model("llama-3.1-8b"), batch=1, prompt_len=PROMPT,
                 gen_len=GEN, engine="trtllm")
    return w, cat.accelerator("H100")


def test_one_request_is_its_prefill_then_its_own_decode(setup):
    w, acc = setup
    b, sp = burst_speed(w, acc, 1, PROMPT, GEN, 1), serving_speed(w, acc, 1, PROMPT, GEN, 1)
    assert (b.concurrency, b.waves) == (1, 1)
    assert b.ttft_s == pytest.approx(sp.ttft_s + sp.tpot_s)
    assert b.duration_s == pytest.approx(sp.ttft_s + GEN * sp.tpot_s)
    assert b.output_tokens_per_s == pytest.approx(sp.output_tokens_per_s)


def test_a_burst_that_fits_runs_in_one_wave_with_half_the_prefills_beside_each_sequence(setup):
    w, acc = setup
    n = 500  # the KV pool holds ~1,000 of these sequences on one H100
    b, sp = burst_speed(w, acc, 1, PROMPT, GEN, n), serving_speed(w, acc, 1, PROMPT, GEN, n)
    assert (b.concurrency, b.waves) == (n, 1)
    assert b.output_tokens_per_s == pytest.approx(sp.output_tokens_per_s)  # one wave: the same run
    assert b.itl_s == pytest.approx((n / 2 * sp.ttft_s + GEN * sp.tpot_s) / GEN)
    # a steady stream of arrivals puts every other request's prefill beside a sequence, a burst half
    assert sp.tpot_s < b.itl_s < sp.loaded_tpot_s
    # nor does it run more than n at once, whatever the pool holds
    assert serving_speed(w, acc, 1, PROMPT, GEN).concurrency > n


def test_more_requests_than_the_replica_holds_wait_for_earlier_waves(setup):
    w, acc = setup
    c = burst_speed(w, acc, 1, PROMPT, GEN, 100_000).concurrency
    n = 2 * c + c // 2
    b = burst_speed(w, acc, 1, PROMPT, GEN, n)
    assert (b.concurrency, b.waves) == (c, 3)
    full, rest = serving_speed(w, acc, 1, PROMPT, GEN, c), serving_speed(w, acc, 1, PROMPT, GEN, n - 2 * c)
    wave = c * full.ttft_s + GEN * full.tpot_s
    assert b.duration_s == pytest.approx(2 * wave + (n - 2 * c) * rest.ttft_s + GEN * rest.tpot_s)
    assert b.output_tokens_per_s == pytest.approx(n * GEN / b.duration_s)
    first, last = burst_speed(w, acc, 1, PROMPT, GEN, c), burst_speed(w, acc, 1, PROMPT, GEN, n - 2 * c)
    # the second wave starts when the first ends, the third after two: each waits that long more
    expected = (c * first.ttft_s + c * (wave + first.ttft_s) + (n - 2 * c) * (2 * wave + last.ttft_s)) / n
    assert b.ttft_s == pytest.approx(expected)
    ttfts = [burst_speed(w, acc, 1, PROMPT, GEN, k).ttft_s for k in (1, 10, c, c + 1, 3 * c)]
    assert ttfts == sorted(ttfts)


def test_an_empty_burst_is_refused(setup):
    w, acc = setup
    with pytest.raises(ValueError):
        burst_speed(w, acc, 1, PROMPT, GEN, 0)


def _size(capsys, *argv):
    rc = main(["size", "--model", "llama-3.1-8b", "--prompt-len", str(PROMPT), "--gen-len", str(GEN),
               "--gpu", "H100", "--engine", "trtllm", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_size_burst_reports_the_simulated_setup(capsys, setup):
    """``size --burst`` renders the scheduler simulation (core.perf.sim_plan.burst_report)."""
    w, acc = setup
    rc, out, err = _size(capsys, "--burst", "500", "--json")
    assert rc == 0, err
    b = json.loads(out)["burst"]
    core = burst_report(w, acc, 500)
    assert b == pytest.approx(core.to_dict())
    assert b["requests"] == 500 and b["replicas"] == 1 and b["accelerator"] == "H100"
    assert b["concurrency"] <= 500 and b["ttft_p50_s"] <= b["ttft_p95_s"] <= b["ttft_p99_s"]
    # two data-parallel replicas split the requests: each runs 250, as one replica's burst of 250
    rc, out, err = _size(capsys, "--burst", "500", "--gpus", "2", "--sharding", "data", "--json")
    two = json.loads(out)["burst"]
    half = burst_report(w, acc, 250)
    assert two["replicas"] == 2 and two["concurrency"] == 2 * half.concurrency
    assert two["duration_s"] == pytest.approx(half.duration_s)
    assert two["output_tokens_per_s"] == pytest.approx(500 * GEN / half.duration_s)
    rc, out, err = _size(capsys, "--burst", "500")
    assert rc == 0 and f"Burst of 500 requests at once on H100: {core.concurrency} run at a time at most" in out
    assert f"{core.itl_s * 1e3:,.1f} ms per token mean" in out
    rc, out, _ = _size(capsys, "--json")
    assert json.loads(out)["burst"] is None  # only when asked


@pytest.mark.parametrize("argv, needle", [
    (["--burst", "0"], "--burst: 0: must be a whole number"),
    (["--burst", "many"], "--burst: 'many' is not a whole number"),
])
def test_size_burst_bad_counts_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        _size(capsys, *argv)
    assert exc.value.code == 2 and needle in capsys.readouterr().err


def test_size_burst_needs_generation(capsys):
    rc = main(["size", "--model", "llama-3.1-8b", "--seq-len", "512", "--burst", "8"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "--burst" in err and "--prompt-len" in err and "Traceback" not in err


def test_a_huge_burst_is_computed_in_closed_form(setup):
    """Waves are summed in closed form: 10**12 requests take no longer than 10 (a per-wave loop
    took ~2 s at 10**9 and never ended at 10**12)."""
    w, acc = setup
    n = 10**12
    b = burst_speed(w, acc, 1, PROMPT, GEN, n)
    assert b.waves == -(-n // b.concurrency)
    assert b.output_tokens_per_s == pytest.approx(n * GEN / b.duration_s)
    # so many waves: a request waits, on average, for half of the whole burst
    assert b.ttft_s == pytest.approx(b.duration_s / 2, rel=1e-3)
    small = burst_speed(w, acc, 1, PROMPT, GEN, 3 * b.concurrency)
    assert b.itl_s == pytest.approx(small.itl_s)  # every wave is a full one: the same time between tokens


def test_a_huge_simulated_burst_is_its_first_requests_scaled(setup):
    """``size --burst`` simulates at most BURST_LIMIT requests a replica; beyond, the steady waves
    repeat: duration and mean waiting scale with the requests, throughput and per-token time do not."""
    from fleet_tui.core.perf.sim_plan import BURST_LIMIT

    w, acc = setup
    limit, huge = burst_report(w, acc, BURST_LIMIT), burst_report(w, acc, 10**12)
    assert huge.simulated_requests == BURST_LIMIT
    assert huge.duration_s == pytest.approx(limit.duration_s * 10**12 / BURST_LIMIT)
    assert huge.ttft_s == pytest.approx(limit.ttft_s * 10**12 / BURST_LIMIT)
    assert huge.output_tokens_per_s == pytest.approx(limit.output_tokens_per_s)
    assert huge.itl_s == pytest.approx(limit.itl_s)
