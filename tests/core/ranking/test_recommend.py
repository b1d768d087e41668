"""Recommendations: ranking order, constraints, excluded/flagged rows, savings, explain, fit property.

Most tests use a small catalog written to a temporary directory (bundled accelerators and models +
a handful of instances with chosen prices) so every expectation is computed from the inputs, and a
few run the bundled catalog end to end. Sizing and speed are the real engine's.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_tui.core import paths
from fleet_tui.core.catalog import build_catalog, load_catalog
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.pricing import HOURS_PER_MONTH, Schedule, SpotAssumptions
from fleet_tui.core.ranking import UNIT_MONTH, UNIT_RUN, evaluate_setup, recommend
from fleet_tui.core.ranking.explanation import explain
from fleet_tui.core.ranking.migration import migration_report
from fleet_tui.core.workload import Workload

TOY = """
instance = [
  {cloud = "aws", instance_type = "big.8x", region = "us-east-1", accelerator = "H100", accelerator_count = 8.0, on_demand_usd_per_hour = 50.0, spot_usd_per_hour = 20.0, reserved_1y_usd_per_hour = 35.0, reserved_3y_usd_per_hour = 25.0, reserved_estimated = true},
  {cloud = "aws", instance_type = "mid.1x", region = "us-east-1", accelerator = "L40S", accelerator_count = 1.0, on_demand_usd_per_hour = 2.0, spot_usd_per_hour = 0.8},
  {cloud = "aws", instance_type = "mid.1x", region = "us-west-2", accelerator = "L40S", accelerator_count = 1.0, on_demand_usd_per_hour = 2.2},
  {cloud = "aws", instance_type = "a10g.4x", region = "us-east-1", accelerator = "A10G", accelerator_count = 4.0, on_demand_usd_per_hour = 5.6},
  {cloud = "gcp", instance_type = "t4.1x", region = "us-central1", accelerator = "T4", accelerator_count = 1.0, on_demand_usd_per_hour = 0.5, spot_usd_per_hour = 0.2},
  {cloud = "gcp", instance_type = "h100.1x", region = "us-central1", accelerator = "H100", accelerator_count = 1.0, on_demand_usd_per_hour = 9.0},
  {cloud = "aws", instance_type = "inf2.1x", region = "us-east-1", accelerator = "Inferentia2", accelerator_count = 1.0, on_demand_usd_per_hour = 0.76},
  {cloud = "testcloud", instance_type = "mi.8x", region = "eu-1", accelerator = "MI300X", accelerator_count = 8.0, on_demand_usd_per_hour = 30.0},
  {cloud = "testcloud", instance_type = "bad.1x", region = "eu-1", accelerator = "L4", accelerator_count = 1.0, excluded = "zero price in the source"},
  {cloud = "testcloud", instance_type = "flag.1x", region = "eu-1", accelerator = "L4", accelerator_count = 1.0, on_demand_usd_per_hour = 0.01, flags = ["price-outlier: 0.02x the median"]},
  {cloud = "testcloud", instance_type = "spotflag.1x", region = "eu-1", accelerator = "L4", accelerator_count = 1.0, on_demand_usd_per_hour = 0.02, spot_usd_per_hour = 0.015, flags = ["spot-outlier: spot 0.2x the median"]},
  {cloud = "azure", instance_type = "slice.a10", region = "eastus", accelerator = "A10", accelerator_count = 0.5, on_demand_usd_per_hour = 0.9},
]
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> object:
    d: Path = tmp_path_factory.mktemp("toycat")
    (d / "toy.toml").write_text(TOY)
    bundled = paths.bundled_catalog_dir()
    cat = build_catalog([bundled / "accelerators.toml", bundled / "models.toml", d / "toy.toml"])
    assert not cat.problems, cat.problems
    return cat


@pytest.fixture(scope="module")
def bundled():
    return load_catalog(include_user=False)


def chat(cat, model="llama-3.1-8b", **kw) -> Workload:
    base = dict(kind="inference", model=cat.model(model), precision="bf16", batch=8,
                prompt_len=1024, gen_len=256, serving="interactive")
    base.update(kw)
    return Workload(**base)


def batch_gen(cat, model="llama-3.1-8b", **kw) -> Workload:
    return chat(cat, model, serving="batch", **kw)


# ------------------------------------------------------------------------------------------------
# ranking order and units


def test_batch_inference_is_ranked_by_cost_per_million_tokens(toy):
    rec = recommend(batch_gen(toy), toy, pricing="any")
    assert rec.unit == "USD/1M output tokens"
    costs = [o.cost_per_unit for o in rec.offers]
    assert costs == sorted(costs) and len(costs) >= 4
    for o in rec.offers:
        assert o.cost_per_unit == pytest.approx(o.usd_per_hour / (o.tokens_per_s * 3600 / 1e6))
        assert o.usd_per_month == pytest.approx(o.usd_per_hour * HOURS_PER_MONTH)
    assert [o.rank for o in rec.offers] == list(range(1, len(rec.offers) + 1))


def test_interactive_serving_is_ranked_by_monthly_bill(toy):
    rec = recommend(chat(toy), toy, hours_per_month=400)
    assert rec.unit == UNIT_MONTH
    months = [o.cost_per_unit for o in rec.offers]
    assert months == sorted(months)
    for o in rec.offers:
        assert o.cost_per_unit == pytest.approx(o.list_usd_per_hour * o.instances * 400)


def test_training_with_token_count_is_ranked_per_run(toy):
    w = Workload(kind="lora", model=toy.model("llama-3.1-8b"), batch=2, seq_len=2048,
                 grad_checkpointing=True)
    per_token = recommend(w, toy)
    per_run = recommend(w, toy, training_tokens=1e8)
    assert per_token.unit == "USD/1M training tokens" and per_run.unit == UNIT_RUN
    ranked = [o for o in per_run.offers if not o.speed_unknown]
    costs = [o.cost_per_unit for o in ranked]
    assert costs == sorted(costs) and None not in costs
    # offers without a speed estimate (A10G: no published bf16 peak) come after every ranked one
    assert list(per_run.offers)[:len(ranked)] == ranked
    # the two rankings agree (a run is a fixed number of tokens) on the offers they share
    assert [o.instance_type for o in per_run.offers][:3] == [o.instance_type for o in per_token.offers][:3]


def test_top_limits_the_offers_but_counts_them_all(toy):
    full = recommend(batch_gen(toy), toy, pricing="any")
    top2 = recommend(batch_gen(toy), toy, pricing="any", top=2)
    assert len(top2.offers) == 2 and top2.fitting_offers == full.fitting_offers
    assert [o.label for o in top2.offers] == [o.label for o in full.offers[:2]]


# ------------------------------------------------------------------------------------------------
# constraints


def test_cloud_region_vendor_and_stack_constraints(toy):
    w = batch_gen(toy)
    assert {o.cloud for o in recommend(w, toy, clouds=["gcp"]).offers} == {"gcp"}
    assert {o.region for o in recommend(w, toy, regions="us-west-2").offers} == {"us-west-2"}
    assert {o.vendor for o in recommend(w, toy, vendors="amd").offers} == {"AMD"}
    assert {o.software_stack for o in recommend(w, toy, stacks=["Neuron"]).offers} <= {"Neuron"}
    both = recommend(w, toy, clouds="aws,gcp")
    assert {o.cloud for o in both.offers} == {"aws", "gcp"}
    assert both.skipped_counts["filtered_rows"] > 0


def test_unknown_names_are_user_errors_listing_what_is_allowed(toy):
    w = batch_gen(toy)
    with pytest.raises(UserError, match="aws"):
        recommend(w, toy, clouds=["awz"])
    with pytest.raises(FieldError, match="region 'mars-1': unknown region") as err:
        recommend(w, toy, regions=["mars-1"])
    assert err.value.field == "region"
    assert err.value.render(lambda f: "--" + f).startswith("--region 'mars-1'")
    with pytest.raises(UserError, match="pricing"):
        recommend(w, toy, pricing="lease")
    with pytest.raises(UserError, match="big.8x"):
        recommend(w, toy, current=("big.8xx", 1))


def test_budget_drops_dearer_offers(toy):
    w = chat(toy)
    budget = 1000.0
    rec = recommend(w, toy, budget_usd_per_month=budget, pricing="any")
    assert rec.offers and all(o.usd_per_month <= budget for o in rec.offers)
    assert rec.skipped_counts["over_budget_offers"] > 0


def test_latency_target_drops_slow_offers(toy):
    w = chat(toy)
    free = recommend(w, toy)
    lat = sorted(o.latency_ms for o in free.offers)
    target = lat[len(lat) // 2]
    rec = recommend(w, toy, latency_target_ms=target)
    assert rec.offers and all(o.latency_ms <= target for o in rec.offers)
    assert rec.fitting_offers < free.fitting_offers
    with pytest.raises(UserError, match="inference"):
        recommend(Workload(kind="lora", model=toy.model("llama-3.1-8b"), seq_len=512), toy,
                  latency_target_ms=50)


def test_spot_not_allowed_removes_spot(toy):
    rec = recommend(batch_gen(toy), toy, pricing="any", spot_allowed=False)
    assert rec.offers and all(o.pricing != "spot" for o in rec.offers)
    with pytest.raises(UserError):
        recommend(batch_gen(toy), toy, pricing="spot", spot_allowed=False)


def test_spot_offers_carry_interruption_overhead_and_risk(toy):
    w = Workload(kind="lora", model=toy.model("llama-3.2-1b"), batch=1, seq_len=512)
    spot = SpotAssumptions(interruptions_per_hour=0.1, checkpoint_interval_h=2, restart_h=0.5)
    rec = recommend(w, toy, pricing="spot", spot=spot)
    assert rec.offers
    for o in rec.offers:
        assert o.spot_overhead_pct == pytest.approx(100 * 0.1 * (1 + 0.5))
        assert o.usd_per_hour == pytest.approx(o.list_usd_per_hour * o.instances / (1 - 0.15))
        assert any("spot" in r for r in o.risks)


def test_reserved_on_a_dev_box_bills_the_whole_month(toy):
    w = chat(toy, model="llama-3.2-1b")
    rec = recommend(w, toy, pricing="reserved-1y", hours_per_month=Schedule.daily(8, 22))
    big = [o for o in rec.offers if o.instance_type == "big.8x"]
    assert big, "big.8x has a reserved price"
    assert big[0].usd_per_month == pytest.approx(35.0 * HOURS_PER_MONTH)
    assert big[0].reserved_estimated and any("estimated" in r for r in big[0].risks)
    assert "below" in big[0].reason  # 176 h is below the 70% break-even


# ------------------------------------------------------------------------------------------------
# catalog anomalies


def test_excluded_rows_never_appear_and_are_counted(toy):
    rec = recommend(chat(toy, model="llama-3.2-1b"), toy, pricing="any")
    assert all(o.instance_type != "bad.1x" for o in rec.offers)
    assert rec.skipped_counts["excluded_rows"] == 1
    assert any("excluded" in n for n in rec.notes)


def test_flagged_rows_carry_their_flag(toy):
    rec = recommend(chat(toy, model="llama-3.2-1b"), toy)
    flagged = [o for o in rec.offers if o.instance_type == "flag.1x"]
    assert flagged
    o = flagged[0]
    assert o.flags == ("price-outlier: 0.02x the median",)
    assert any("price-outlier" in r for r in o.risks)
    assert "catalog flag: " in o.reason


def test_a_flag_naming_a_pricing_option_stays_with_that_option(toy):
    rec = recommend(chat(toy, model="llama-3.2-1b"), toy, pricing="any")
    rows = {o.pricing: o for o in rec.offers if o.instance_type == "spotflag.1x"}
    assert set(rows) == {"on-demand", "spot"}
    assert rows["spot"].flags == ("spot-outlier: spot 0.2x the median",)
    assert "catalog flag: " in rows["spot"].reason
    assert rows["on-demand"].flags == () and "flagged" not in rows["on-demand"].reason
    assert rows["on-demand"].instance.flags  # the row keeps every flag


def test_gpu_slice_gets_its_share_of_memory(toy):
    small = recommend(chat(toy, model="llama-3.2-1b", batch=1, prompt_len=128, gen_len=32), toy)
    big = recommend(chat(toy, model="llama-3.1-8b"), toy)
    slices_small = [o for o in small.offers if o.instance_type == "slice.a10"]
    assert all(o.instance_type != "slice.a10" for o in big.offers)  # 16 GB of weights > 12 GB
    if slices_small:  # a 1B model may fit half an A10 (12 GB)
        assert slices_small[0].devices.startswith("0.5×")


# ------------------------------------------------------------------------------------------------
# current setup, savings, explain


def test_savings_and_speedup_against_current(toy):
    rec = recommend(batch_gen(toy), toy, current=("big.8x", 1))
    cur = rec.current
    assert cur.is_current and cur.rank == 0 and cur.fits
    assert cur.usd_per_hour == pytest.approx(50.0)
    for o in rec.offers:
        frac = 1 - o.cost_per_unit / cur.cost_per_unit
        assert o.savings_pct == pytest.approx(100 * frac)
        assert o.savings_usd_per_month == pytest.approx(cur.usd_per_month * frac)
        assert o.speedup == pytest.approx(o.tokens_per_s / cur.tokens_per_s)


def test_current_count_multiplies_cost(toy):
    one = recommend(chat(toy), toy, current=("mid.1x", 1), current_region="us-east-1")
    two = recommend(chat(toy), toy, current=("mid.1x", 2), current_region="us-east-1")
    assert two.current.usd_per_month == pytest.approx(2 * one.current.usd_per_month)
    assert two.current.gpus == 2


def test_explain_names_winner_and_why_oversized_current_loses(toy):
    rec = recommend(chat(toy), toy, current=("big.8x", 1))
    text = "\n".join(explain(rec))
    assert rec.best.instance_type in text
    assert "big.8x" in text
    assert "memory" in text and "price" in text


def test_explain_when_current_cannot_run_it(toy):
    w = chat(toy, model="llama-3.1-70b")
    rec = recommend(w, toy, current=("t4.1x", 1))
    assert not rec.current.fits and rec.current.misfit
    text = "\n".join(explain(rec))
    assert "cannot run" in text
    assert all(o.fits for o in rec.offers)


def test_explain_when_nothing_fits(toy):
    w = chat(toy, model="llama-3.1-405b", precision="fp32")
    rec = recommend(w, toy, max_instances=1)
    assert rec.offers == ()
    assert "No catalog offer fits" in explain(rec)[0]


def test_results_are_immutable(toy):
    rec = recommend(batch_gen(toy), toy, top=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.offers[0].usd_per_hour = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.unit = "x"
    # a read-only sequence (made lazily): no item assignment, no append; copies as a tuple
    from collections.abc import MutableSequence, Sequence

    assert isinstance(rec.offers, Sequence) and not isinstance(rec.offers, MutableSequence)
    with pytest.raises(TypeError):
        rec.offers[0] = None
    assert not hasattr(rec.offers, "append")
    import copy
    import pickle

    assert copy.deepcopy(rec.offers) == tuple(rec.offers)
    assert pickle.loads(pickle.dumps(rec.offers)) == tuple(rec.offers)


def test_json_dict_is_plain_and_finite(toy):
    import json

    rec = recommend(batch_gen(toy), toy, current=("big.8x", 1), top=3)
    d = rec.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["offers"][0]["rank"] == 1
    assert d["current"]["is_current"] is True
    assert set(d) >= {"unit", "offers", "current", "skipped", "fitting_offers", "schedule"}


# ------------------------------------------------------------------------------------------------
# migration report


def test_migration_report_to_neuron_is_high_complexity(toy):
    w = chat(toy, model="llama-3.2-1b")
    rep = migration_report(w, toy, ("big.8x", 1), ("inf2.1x", 1))
    assert rep.complexity == "high"
    assert any("Neuron" in r for r in rep.risks)
    assert rep.savings_pct is not None and rep.savings_pct > 0
    assert rep.to_dict()["complexity"] == "high"


def test_migration_report_same_cloud_same_stack_is_low(toy):
    w = chat(toy, model="llama-3.2-1b")
    rep = migration_report(w, toy, ("big.8x", 1), ("mid.1x", 1))
    assert rep.complexity == "low"
    assert "both fit" in rep.memory_check


def test_evaluate_setup_prices_in_the_chosen_region(toy):
    off, notes = evaluate_setup(chat(toy), toy, ("mid.1x", 1), region="us-west-2")
    assert off.region == "us-west-2" and off.list_usd_per_hour == pytest.approx(2.2)
    off, notes = evaluate_setup(chat(toy), toy, ("mid.1x", 1))
    assert off.region == "us-east-1"  # the cheapest
    assert any("cheapest region" in n for n in notes)


# ------------------------------------------------------------------------------------------------
# the bundled catalog


def test_bundled_catalog_ranks_and_skips_excluded(bundled):
    rec = recommend(batch_gen(bundled), bundled, pricing="any", top=20,
                    current=("p5.48xlarge", 1), current_region="us-east-1")
    assert rec.offers and rec.fitting_offers > 100
    assert rec.skipped_counts["excluded_rows"] == sum(1 for i in bundled.instances if i.excluded)
    excluded = {i.key for i in bundled.instances if i.excluded}
    assert all((o.cloud, o.instance_type, o.region) not in excluded for o in rec.offers)
    assert rec.best.savings_pct > 0


# ------------------------------------------------------------------------------------------------
# property: a recommendation never includes an offer that does not fit

MODELS = ["llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "mistral-7b", "gemma-2-9b",
          "llama-3.1-70b", "mixtral-8x7b"]


@st.composite
def workloads(draw):
    kind = draw(st.sampled_from(["inference", "inference", "training", "finetune", "lora", "qlora"]))
    model = draw(st.sampled_from(MODELS))
    batch = draw(st.integers(1, 64))
    if kind == "inference":
        precision = draw(st.sampled_from(["bf16", "fp16", "fp8", "int8", "int4"]))
        prompt = draw(st.integers(16, 8192))
        gen = draw(st.integers(1, 2048))
        return dict(kind=kind, model=model, precision=precision, batch=batch, prompt_len=prompt,
                    gen_len=gen, serving=draw(st.sampled_from(["interactive", "batch"])))
    precision = "int4" if kind == "qlora" else draw(st.sampled_from(["bf16", "fp16"]))
    return dict(kind=kind, model=model, precision=precision, batch=batch,
                seq_len=draw(st.integers(64, 8192)),
                grad_checkpointing=draw(st.booleans()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(spec=workloads())
def test_every_ranked_offer_fits(toy, spec):
    from fleet_tui.core.sizing import check_fit

    spec = dict(spec)
    spec["model"] = toy.model(spec["model"])
    w = Workload(**spec)
    rec = recommend(w, toy, pricing="any")
    for o in rec.offers:
        assert o.fits
        acc = toy.accelerator(o.accelerator)
        if o.accelerator_count < 1:
            continue  # slices are checked against a scaled device
        variant = o.fit.workload  # the layout the offer was sized on (tp, pp, zero, micro-batch)
        assert variant.gpus == o.gpus or variant.tp is not None
        assert check_fit(variant, acc, o.gpus).fits, o.label
        assert o.usd_per_hour >= 0 and o.usd_per_month >= 0
        # never an invented or zero speed: either a positive estimate or marked unknown with a reason
        assert o.tokens_per_s is None or o.tokens_per_s > 0
        if o.speed_unknown:
            assert o.speed_unknown_reason and o.tokens_per_s is None or rec.unit == UNIT_MONTH
        if o.cost_per_unit is None:
            assert o.speed_unknown and rec.unit != UNIT_MONTH
        else:
            assert o.cost_per_unit >= 0 and math.isfinite(o.cost_per_unit)
    ranked = [o for o in rec.offers if o.cost_per_unit is not None]
    assert list(rec.offers)[:len(ranked)] == ranked  # unknown-speed offers never ahead


# ------------------------------------------------------------------------------------------------
# offers whose speed is unknown (a spec figure the estimate needs is not published)

UNKNOWN_TOY = """
instance = [
  {cloud = "aws", instance_type = "cheap.a10g", region = "us-east-1", accelerator = "A10G", accelerator_count = 1.0, on_demand_usd_per_hour = 0.01},
  {cloud = "aws", instance_type = "l40s.1x", region = "us-east-1", accelerator = "L40S", accelerator_count = 1.0, on_demand_usd_per_hour = 2.0},
  {cloud = "aws", instance_type = "h100.1x", region = "us-east-1", accelerator = "H100", accelerator_count = 1.0, on_demand_usd_per_hour = 9.0},
  {cloud = "lambda", instance_type = "cheap.4090", region = "us-1", accelerator = "RTXA5000", accelerator_count = 1.0, on_demand_usd_per_hour = 0.02},
]
"""


@pytest.fixture(scope="module")
def unknown_toy(tmp_path_factory) -> object:
    d: Path = tmp_path_factory.mktemp("unknowncat")
    (d / "toy.toml").write_text(UNKNOWN_TOY)
    bundled = paths.bundled_catalog_dir()
    cat = build_catalog([bundled / "accelerators.toml", bundled / "models.toml", d / "toy.toml"])
    assert not cat.problems, cat.problems
    return cat


def lora8b(cat) -> Workload:
    return Workload(kind="lora", model=cat.model("llama-3.1-8b"), batch=1, seq_len=1024,
                    grad_checkpointing=True)


def test_unknown_speed_never_outranks_a_known_one(unknown_toy):
    # per run: the A10G (no published bf16 peak) and the RTX A5000 (nothing but memory; row named
    # cheap.4090 from when the 4090 had no published figures) are the
    # cheapest per hour by far, yet come after every offer whose cost per run is known
    rec = recommend(lora8b(unknown_toy), unknown_toy, training_tokens=1e8)
    types = [o.instance_type for o in rec.offers]
    assert types[:2] == ["l40s.1x", "h100.1x"] or types[:2] == ["h100.1x", "l40s.1x"]
    assert set(types[2:]) == {"cheap.a10g", "cheap.4090"}
    assert types[2] == "cheap.a10g"  # among the unknown ones: cheapest per hour first
    assert rec.fitting_offers == 4 and rec.speed_unknown_offers == 2
    for o in rec.offers[2:]:
        assert o.speed_unknown and o.cost_per_unit is None and o.tokens_per_s is None
        assert "no published" in o.speed_unknown_reason and o.accelerator in o.speed_unknown_reason
        assert "speed unknown" in o.reason
    assert [o.rank for o in rec.offers] == [1, 2, 3, 4]
    assert rec.best.instance_type in ("l40s.1x", "h100.1x") and rec.best.cost_per_unit > 0
    assert any("no speed estimate" in n for n in rec.notes)
    assert any("no speed estimate" in line for line in explain(rec))
    # top: ranked offers first; the unknown ones only fill a page the ranked ones leave
    assert [o.instance_type for o in recommend(lora8b(unknown_toy), unknown_toy,
                                               training_tokens=1e8, top=2).offers] == types[:2]
    assert [o.instance_type for o in recommend(lora8b(unknown_toy), unknown_toy,
                                               training_tokens=1e8, top=3).offers] == types[:3]
    d = rec.to_dict()
    assert d["speed_unknown_offers"] == 2
    assert d["offers"][3]["speed_unknown"] is True and d["offers"][3]["cost_per_unit"] is None
    assert d["offers"][0]["speed_unknown"] is False and d["offers"][0]["speed_unknown_reason"] == ""


def test_decode_needs_only_bandwidth_so_the_a10g_is_ranked_for_batch_generation(unknown_toy):
    rec = recommend(batch_gen(unknown_toy), unknown_toy)
    by_type = {o.instance_type: o for o in rec.offers}
    a10g = by_type["cheap.a10g"]
    assert not a10g.speed_unknown and a10g.tokens_per_s > 0 and a10g.cost_per_unit > 0
    assert rec.best.instance_type == "cheap.a10g"  # $0.01/h: the cheapest per token
    assert by_type["cheap.4090"].speed_unknown  # no bandwidth published: listed last
    assert rec.offers[-1].instance_type == "cheap.4090"


def test_interactive_serving_puts_unknown_speed_after_every_known_one(unknown_toy):
    rec = recommend(chat(unknown_toy), unknown_toy)
    assert rec.unit == UNIT_MONTH
    types = [o.instance_type for o in rec.offers]
    rtx = next(o for o in rec.offers if o.instance_type == "cheap.4090")
    assert rtx.speed_unknown and rtx.tokens_per_s is None
    # priced per month all the same, but it cannot be shown to keep up: after every known offer,
    # although $0.02/h is cheaper than some of them
    assert rtx.cost_per_unit == pytest.approx(0.02 * HOURS_PER_MONTH)
    assert types[-1] == "cheap.4090" and types[0] == "cheap.a10g"
    assert all(not o.speed_unknown for o in rec.offers[:-1])
    assert rec.speed_unknown_offers == 1
    assert any("keep up with the load" in n for n in rec.notes)
    assert "keep up with the load" in " ".join(explain(rec))
    # a latency target cannot be checked without a speed: counted, not guessed
    rec = recommend(chat(unknown_toy), unknown_toy, latency_target_ms=1000)
    assert "cheap.4090" not in {o.instance_type for o in rec.offers}
    assert rec.skipped_counts["latency_unknown_rows"] == 1


def test_current_setup_with_unknown_speed_is_not_compared_by_invented_numbers(unknown_toy):
    rec = recommend(lora8b(unknown_toy), unknown_toy, training_tokens=1e8, current=("cheap.a10g", 1))
    cur = rec.current
    assert cur.fits and cur.speed_unknown and cur.cost_per_unit is None
    assert all(o.savings_pct is None and o.speedup is None for o in rec.offers)
    assert any("speed unknown" in n for n in rec.notes)
    text = " ".join(explain(rec))
    assert "cannot be compared" in text and "no published bf16 peak for A10G" in text


def test_no_offer_reports_zero_tokens_per_second(bundled):
    for w, kw in ((chat(bundled), {}), (batch_gen(bundled, "llama-3.1-70b"), {}),
                  (lora8b(bundled), {"training_tokens": 1e8})):
        rec = recommend(w, bundled, pricing="any", **kw)
        speeds = [o.tokens_per_s for o in rec.offers]
        assert speeds and all(s is None or s > 0 for s in speeds)
        assert all((s is None) == o.speed_unknown for s, o in zip(speeds, rec.offers))


def test_offers_read_like_a_tuple(toy):
    rec = recommend(batch_gen(toy), toy, pricing="any")
    full = tuple(rec.offers)
    assert rec.offers[-1] is full[-1] and rec.offers[1:3] == full[1:3] and rec.offers == full
    # one row per instance type (its regions folded in); every region when asked
    assert len(rec.offers) <= rec.fitting_offers
    assert sum(o.regions for o in rec.offers) == rec.fitting_offers
    every = recommend(batch_gen(toy), toy, pricing="any", expand_regions=True)
    assert len(every.offers) == every.fitting_offers
    with pytest.raises(IndexError):
        rec.offers[len(full)]


def test_money_is_one_format_for_tables_and_sentences():
    from fleet_tui.core.ranking import money

    assert [money(x) for x in (None, float("nan"), 0.012345, 1.5, 123.456, 999.994, 1234.5, -250.0)] \
        == ["n/a", "n/a", "$0.0123", "$1.50", "$123.46", "$999.99", "$1,234", "-$250.00"]


def test_offers_are_priced_by_pricing_py(toy):
    """Ranking prices through pricing.py: every offer agrees with quote() and the unit-cost
    formulas, so the tests of pricing.py test what ranking shows."""
    from fleet_tui.core.pricing import break_even_utilization, cost_per_million_tokens, quote

    schedule = Schedule(400)
    spot = SpotAssumptions()
    rec = recommend(batch_gen(toy), toy, pricing="any", hours_per_month=schedule, spot=spot)
    assert {o.pricing for o in rec.offers} >= {"on-demand", "spot"}
    for o in rec.offers:
        q = quote(o.instance, o.pricing, schedule, spot=spot, stateless=True)
        assert o.usd_per_month == pytest.approx(q.usd_per_month * o.instances, rel=1e-12)
        assert o.usd_per_hour == pytest.approx(q.usd_per_hour * o.instances, rel=1e-12)
        assert o.spot_overhead_pct == pytest.approx(100 * q.spot_overhead)
        if o.tokens_per_s:
            assert o.cost_per_unit == pytest.approx(
                cost_per_million_tokens(o.usd_per_hour, o.tokens_per_s), rel=1e-12)
        if o.break_even_utilization is not None:
            assert o.break_even_utilization == break_even_utilization(
                o.list_usd_per_hour, o.instance.price("on-demand"))


def test_input_errors_name_their_field_not_a_flag(toy):
    """The core names the field (the CLI's argparse dest); the front end words it."""
    cases = [
        (dict(top=0), "top", "top must be a whole number >= 1, got 0"),
        (dict(budget_usd_per_month=-5.0), "budget",
         "budget must be a number of USD per month > 0, got -5.0"),
        (dict(latency_target_ms=0), "latency_target_ms",
         "latency_target_ms must be a number > 0, got 0"),
        (dict(pricing="spot", spot_allowed=False), "pricing",
         "pricing spot contradicts spot_allowed=False (no_spot)"),
        (dict(current=("big.8xlarge", 0)), "current_count",
         "current_count must be a whole number >= 1, got 0"),
    ]
    for kwargs, field, text in cases:
        with pytest.raises(FieldError) as err:
            recommend(batch_gen(toy), toy, **kwargs)
        assert (err.value.field, str(err.value)) == (field, text)
        assert "--" not in err.value.template
