"""Arrival patterns and length mixes offered to the scheduler simulation (core/perf/arrivals.py)."""

from __future__ import annotations

import statistics

import pytest

from fleet_tui.core.perf.arrivals import SHAREGPT, burst, draw, poisson


def test_a_burst_arrives_at_once_with_fixed_lengths():
    t = draw(burst(5, 100, 20))
    assert t.times_s == (0.0,) * 5 and t.prompts == (100,) * 5 and t.gens == (20,) * 5


def test_poisson_gaps_average_one_over_the_rate_and_are_seeded():
    t = draw(poisson(4.0, 4000, 100, 20, seed=1))
    gaps = [b - a for a, b in zip(t.times_s, t.times_s[1:])]
    assert statistics.mean(gaps) == pytest.approx(0.25, rel=0.05)
    assert statistics.pstdev(gaps) == pytest.approx(0.25, rel=0.08)  # exponential: sd = mean
    assert draw(poisson(4.0, 4000, 100, 20, seed=1)) == t and draw(poisson(4.0, 4000, 100, 20, seed=2)) != t


def test_the_sharegpt_mix_has_the_published_means_and_vllms_bounds():
    t = draw(burst(5000, round(SHAREGPT.prompt_mean), round(SHAREGPT.gen_mean), mix="sharegpt"))
    assert statistics.mean(t.prompts) == pytest.approx(SHAREGPT.prompt_mean, rel=0.02)
    assert statistics.mean(t.gens) == pytest.approx(SHAREGPT.gen_mean, rel=0.02)
    assert statistics.median(t.prompts) < 0.8 * statistics.mean(t.prompts)  # a long right tail
    assert max(t.prompts) <= SHAREGPT.prompt_max + 1 and min(t.prompts) >= SHAREGPT.min_tokens - 1


def test_a_mix_takes_the_means_asked():
    t = draw(burst(3000, 1000, 50, mix="sharegpt"))
    assert statistics.mean(t.prompts) == pytest.approx(1000, rel=0.02)
    assert statistics.mean(t.gens) == pytest.approx(50, rel=0.02)


@pytest.mark.parametrize("make", [
    lambda: burst(0, 10, 10), lambda: poisson(0.0, 10, 10, 10), lambda: poisson(float("inf"), 10, 10, 10),
    lambda: burst(10, 10, 10, mix="alpaca"), lambda: burst(10, 0, 10),
])
def test_bad_patterns_are_refused(make):
    with pytest.raises(ValueError):
        make()
