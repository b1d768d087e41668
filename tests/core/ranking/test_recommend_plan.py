"""Ranking by the serving capacity plan: a demand and SLOs in, offers ordered by
the monthly bill of serving it, through the one plan formula of core/perf/serving_plan.py."""

from __future__ import annotations

import json
import math

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import FieldError
from fleet_tui.core.perf.serving_plan import (
    Demand,
    demand,
    replica_capacity,
    replicas_for,
    serving_plan,
)
from fleet_tui.core.perf.sim_plan import (
    RANKING_MAX_REQUESTS,
    RANKING_REQUESTS,
    plan_capacity,
)
from fleet_tui.core.pricing import HOURS_PER_MONTH
from fleet_tui.core.ranking import recommend
from fleet_tui.core.ranking.explanation import explain
from fleet_tui.core.ranking.export import offer_table
from fleet_tui.core.ranking.offers import UNIT_PLAN
from fleet_tui.core.ranking.serving import replica_sizes
from fleet_tui.core.workload import Workload
from tests.cli_run import run


@pytest.fixture(scope="module")
def cat():
    return load_catalog(include_user=False)


def chat(cat, model="llama-3.1-8b", **kw) -> Workload:
    base = dict(kind="inference", model=cat.model(model), batch=8, prompt_len=1024, gen_len=256)
    base.update(kw)
    return Workload(**base)


def test_demand_is_checked_once_by_the_core():
    assert demand() is None
    d = demand("20", None, "500", 30.0)
    assert d == Demand(20.0, None, 500.0, 30.0) and d.rate_for(256) == 20.0
    assert Demand(None, 2560.0).rate_for(256) == 10.0
    with pytest.raises(FieldError) as e:
        demand(None, None, 500)
    assert e.value.field == "ttft_ms"
    for bad in ("-1", "0", "abc", "inf"):
        with pytest.raises(FieldError) as e:
            demand(bad)
        assert e.value.field == "rate"
    with pytest.raises(FieldError):
        demand(1, 100)


def test_a_demand_needs_generation(cat):
    w = Workload(kind="inference", model=cat.model("llama-3.1-8b"), seq_len=512)
    with pytest.raises(FieldError) as e:
        recommend(w, cat, demand=Demand(rate_rps=5.0), clouds="aws")
    assert e.value.field == "rate"


def test_offers_are_ranked_by_the_plans_monthly_bill(cat):
    w = chat(cat)
    rec = recommend(w, cat, demand=demand(20, ttft_ms=500, tpot_ms=30), clouds="aws,gcp", top=None)
    assert rec.unit == UNIT_PLAN and rec.offers
    months = [o.usd_per_month for o in rec.offers]
    assert months == sorted(months)
    for o in rec.offers[:40]:
        p = o.plan
        assert p is not None and p.meets_slo and o.cost_per_unit == o.usd_per_month
        # whole instances, the fewest that hold the replicas the demand needs
        per_instance = int(o.accelerator_count) // p.gpus_per_replica
        assert per_instance >= 1 and o.instances == math.ceil(p.replicas / per_instance)
        assert p.replicas * p.replica_rps >= p.rate_rps * (1 - 1e-9)
        if o.pricing == "on-demand":  # always on: list price × instances × 730 h
            assert o.usd_per_month == pytest.approx(o.list_usd_per_hour * o.instances * HOURS_PER_MONTH)
        assert o.usd_per_million_tokens == pytest.approx(
            o.usd_per_hour / (p.output_tokens_per_s * 3600) * 1e6)
        assert p.ttft_s * 1e3 <= 500 and p.tpot_s * 1e3 <= 30 + 1e-9


def test_the_ranking_calls_the_one_simulated_plan(cat):
    w = chat(cat)
    rec = recommend(w, cat, demand=demand(12, tpot_ms=40), clouds="aws", top=3)
    o = rec.offers[0]
    acc = cat.accelerator(o.accelerator)
    g = o.plan.gpus_per_replica
    variant = w.derive(batch=1, gpus=g, sharding="tensor" if g > 1 else "data")
    alone = plan_capacity(variant, acc, g, 1024, 256, rate_rps=12, tpot_ms=40, requests=RANKING_REQUESTS,
                          max_requests=RANKING_MAX_REQUESTS)
    assert alone.simulated is not None and alone.slo_percentile == 95
    assert (alone.replicas, alone.ttft_s, alone.tpot_s) == (o.plan.replicas, o.plan.ttft_s, o.plan.tpot_s)


def test_the_ranking_with_the_simulator_off_calls_the_one_analytic_plan(cat):
    w = chat(cat)
    rec = recommend(w, cat, demand=demand(12, tpot_ms=40, simulate=False), clouds="aws", top=3)
    o = rec.offers[0]
    acc = cat.accelerator(o.accelerator)
    g = o.plan.gpus_per_replica
    variant = w.derive(batch=1, gpus=g, sharding="tensor" if g > 1 else "data")
    alone = serving_plan(variant, acc, g, 1024, 256, rate_rps=12, tpot_ms=40)
    assert (alone.replicas, alone.concurrency_per_replica, alone.replica_rps) == (
        o.plan.replicas, o.plan.concurrency_per_replica, o.plan.replica_rps)
    cap = replica_capacity(variant, acc, g, 1024, 256, tpot_ms=40)
    assert replicas_for(cap, 12) == o.plan.replicas


def test_more_demand_never_costs_less(cat):
    w = chat(cat)
    bills = []
    for rate in (1, 10, 50, 200):
        rec = recommend(w, cat, demand=demand(rate, tpot_ms=50), clouds="aws", top=1)
        bills.append(rec.offers[0].usd_per_month)
    assert bills == sorted(bills) and bills[-1] > bills[0]


def test_unreachable_slo_drops_offers_with_a_reason(cat):
    w = chat(cat)
    rec = recommend(w, cat, demand=demand(5, tpot_ms=0.5), clouds="aws")
    assert not rec.offers and rec.skipped_counts["slo_unmet_rows"] > 0
    assert any("cannot meet the targets at any replica count" in why and kind == "slo_unmet_rows"
               for _, kind, why in rec.plan_dropped)
    text = "\n".join(explain(rec))
    assert "No catalog offer fits" in text and "cannot meet the targets" in text
    # a looser target on the same demand keeps some of them
    rec2 = recommend(w, cat, demand=demand(5, tpot_ms=40), clouds="aws")
    assert rec2.offers and rec2.skipped_counts["slo_unmet_rows"] < rec.skipped_counts["slo_unmet_rows"]


def test_replicas_use_the_devices_of_one_instance():
    assert replica_sizes(8) == (1, 2, 4, 8)
    assert replica_sizes(1) == (1,)
    assert replica_sizes(6) == (1, 2, 6)


def test_a_big_model_is_one_replica_over_several_devices(cat):
    w = chat(cat, "llama-3.1-70b")
    rec = recommend(w, cat, demand=demand(None, 2000, tpot_ms=60), clouds="aws", top=None)
    small = [o for o in rec.offers if cat.accelerator(o.accelerator).memory_gib < 140]
    assert small
    for o in small:  # 140 GB of weights in bf16 fit no device under 140 GiB: a replica spans several
        assert o.plan.gpus_per_replica >= 2


def test_without_a_demand_nothing_changes(cat):
    rec = recommend(chat(cat), cat, clouds="aws", top=3)
    d = rec.to_dict()
    assert "demand" not in d and "plan_dropped" not in d
    assert all("serving_plan" not in o for o in d["offers"])
    assert "slo_unmet_rows" not in d["skipped"]


def test_current_setup_gets_its_plan(cat):
    rec = recommend(chat(cat), cat, demand=demand(20, tpot_ms=30), current=("p5.48xlarge", 1), top=3)
    cur = rec.current
    assert cur.plan is not None and cur.plan.replicas >= 1
    assert cur.cost_per_unit == cur.usd_per_month
    headers, rows = offer_table(rec)
    assert headers[8:11] == ["$/1M tok", "replicas", "SLO met"]
    assert rows[0][0] == "now" and rows[0][10] == "yes"


# ------------------------------------------------------------------------------------------------
# CLI

CHAT = ["recommend", "--model", "llama-3.1-8b", "--prompt-len", "1024", "--gen-len", "256"]


def test_cli_json_carries_the_plan(capsys):
    code, out, err = run(capsys, *CHAT, "--rate", "20", "--ttft-ms", "500", "--tpot-ms", "30",
                         "--cloud", "aws", "--top", "3", "--json", "--explain")
    assert code == 0, err
    d = json.loads(out)
    assert d["unit"] == UNIT_PLAN
    assert d["demand"] == {"rate_rps": 20.0, "output_tokens_per_s": None, "ttft_ms": 500.0, "tpot_ms": 30.0,
                           "slo_percentile": 95.0, "length_mix": "fixed", "simulate": True}
    o = d["offers"][0]
    assert o["serving_plan"]["meets_slo"] is True and o["serving_plan"]["replicas"] >= 1
    assert o["usd_per_million_tokens"] > 0
    assert any(line.startswith("Capacity plan for 20 req/s") for line in d["explain"])
    assert any(line.startswith("Dropped ") for line in d["explain"])


def test_cli_table_shows_plan_columns(capsys):
    code, out, err = run(capsys, *CHAT, "--tokens-per-s", "3000", "--tpot-ms", "40", "--cloud", "aws",
                         "--top", "3")
    assert code == 0, err
    assert "$/1M TOK" in out and "REPLICAS" in out and "SLO MET" in out
    assert "ranked by USD/month at the demand (3000 output tokens/s (p95 ≤ 40 ms per token))" in out


@pytest.mark.parametrize("extra, needle", [
    (["--ttft-ms", "500"], "--ttft-ms/--tpot-ms are targets of a capacity plan: give --rate or --tokens-per-s"),
    (["--rate", "-3"], "--rate '-3': a positive number"),
    (["--rate", "3", "--tokens-per-s", "5"], "not allowed with argument"),
])
def test_cli_bad_demand_is_exit_2(capsys, extra, needle):
    code, out, err = run(capsys, *CHAT, *extra)
    assert code == 2 and out == "" and needle in err


def test_cli_demand_without_generation_names_the_flags(capsys):
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--seq-len", "512", "--rate", "4")
    assert code == 2 and "--prompt-len" in err and "--rate" in err


def test_current_setup_is_planned_on_its_instance_type(cat):
    w = chat(cat)
    rec = recommend(w, cat, demand=demand(20, tpot_ms=30), current=("p5.48xlarge", 2), top=1)
    # the plan decides how many: one 8×H100 box holds the 1-GPU replicas 20 req/s need
    assert rec.current.instances == 1 and rec.current.plan.gpus_per_replica == 1
    rec = recommend(w, cat, demand=demand(20, tpot_ms=30), current=("g6.xlarge", 1), top=1)
    assert rec.current.plan is None and rec.current.cost_per_unit is None
    assert any("g6.xlarge cannot serve the demand" in n and "L4 cannot meet" in n for n in rec.notes)
    assert "The current setup cannot serve 20 req/s (p95 ≤ 30 ms per token): L4 cannot meet" in "\n".join(explain(rec))
