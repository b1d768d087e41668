"""`fleet-tui recommend` through the real CLI entry point: JSON contract, formats, exit codes."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run

CHAT = ["recommend", "--model", "llama-3.1-8b", "--prompt-len", "1024", "--gen-len", "256",
        "--batch", "8"]


def test_json_contract(capsys):
    code, out, err = run(capsys, *CHAT, "--current", "p5.48xlarge", "--current-region", "us-east-1",
                         "--top", "4", "--explain", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) >= {"workload", "unit", "pricing", "schedule", "constraints", "current", "offers",
                      "fitting_offers", "considered_rows", "skipped", "notes", "explain"}
    assert d["unit"] == "USD/month" and len(d["offers"]) == 4
    o = d["offers"][0]
    for key in ("rank", "cloud", "instance_type", "region", "pricing", "usd_per_hour",
                "usd_per_month", "cost_per_unit", "unit", "tokens_per_s", "headroom_gib",
                "savings_usd_per_month", "savings_pct", "speedup", "risks", "flags", "reason"):
        assert key in o
    assert d["current"]["instance_type"] == "p5.48xlarge" and d["current"]["rank"] == 0
    assert [x["rank"] for x in d["offers"]] == [1, 2, 3, 4]
    assert d["offers"][0]["instance_type"] in "\n".join(d["explain"])


def test_constraints_reach_the_ranking(capsys):
    code, out, _ = run(capsys, *CHAT, "--serving", "batch", "--cloud", "aws", "--cloud", "gcp",
                       "--pricing", "any", "--no-spot", "--top", "30", "--json")
    assert code == 0
    d = json.loads(out)
    assert {o["cloud"] for o in d["offers"]} <= {"aws", "gcp"}
    assert all(o["pricing"] != "spot" for o in d["offers"])
    costs = [o["cost_per_unit"] for o in d["offers"]]
    assert costs == sorted(costs)


def test_schedule_and_budget(capsys):
    code, out, _ = run(capsys, *CHAT, "--schedule", "8x22", "--budget", "300", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["schedule"]["hours_per_month"] == 176
    assert all(o["usd_per_month"] <= 300 for o in d["offers"])


def test_table_and_markdown(capsys):
    code, out, _ = run(capsys, *CHAT, "--current", "g5.xlarge", "--top", "3")
    assert code == 0
    assert "now" in out and "SAVINGS" in out and "Top choice:" in out
    code, md, _ = run(capsys, *CHAT, "--top", "3", "--markdown", "--explain")
    assert code == 0
    assert "|---|" in md and "### Why" in md


@pytest.mark.parametrize("extra,needle", [
    (["--cloud", "awz"], "did you mean aws"),
    (["--current", "p5.48xlarg"], "p5.48xlarge"),
    (["--pricing", "lease"], "on-demand, spot"),
    (["--hours-per-month", "800"], "744"),
    (["--schedule", "25x10"], "hours per day"),
    (["--top", "0"], "--top"),
    (["--current-count", "2"], "--current"),
    (["--latency-target-ms", "-1"], "--latency-target-ms"),
])
def test_bad_input_is_exit_2_without_traceback(capsys, extra, needle):
    code, out, err = run(capsys, *CHAT, *extra)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert out == ""


def test_json_marks_offers_without_a_speed_estimate(capsys):
    # LoRA per run on AWS with the A10G box as the current setup: the A10G has no published bf16
    # peak, so its cost per run is null and the reason names the missing figure
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--workload", "lora",
                         "--seq-len", "1024", "--grad-checkpointing", "--training-tokens", "1e8",
                         "--cloud", "aws", "--current", "g5.2xlarge", "--top", "500", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["speed_unknown_offers"] >= 1
    cur = d["current"]
    assert cur["speed_unknown"] is True and cur["cost_per_unit"] is None and cur["tokens_per_s"] is None
    assert cur["speed_unknown_reason"] == "no published bf16 peak for A10G"
    offers = d["offers"]
    first_unknown = next(i for i, o in enumerate(offers) if o["speed_unknown"])
    assert all(o["cost_per_unit"] is not None for o in offers[:first_unknown])
    assert all(o["speed_unknown"] and o["cost_per_unit"] is None for o in offers[first_unknown:])
    code, out, _ = run(capsys, "recommend", "--model", "llama-3.1-8b", "--workload", "lora",
                       "--seq-len", "1024", "--grad-checkpointing", "--training-tokens", "1e8",
                       "--cloud", "aws", "--current", "g5.2xlarge", "--top", "3")
    assert code == 0 and "speed unknown" in out


def test_speed_unknown_note_names_only_the_devices_it_lists(capsys):
    # Under a $300/month budget the note once named 20 accelerators (from before the budget cut)
    # for 8 offers, and said they came "after the 0 offers with one".
    code, out, err = run(capsys, *CHAT, "--budget", "300", "--top", "50", "--json")
    assert code == 0, err
    d = json.loads(out)
    listed = {o["accelerator"] for o in d["offers"] if o.get("speed_unknown")}
    (note,) = [n for n in d["notes"] if "have no speed estimate" in n]
    named = note.split(" fitting offers on ")[1].split(" have no speed")[0].replace(" and ", ", ")
    assert listed and set(named.split(", ")) == listed
    assert "after the 0 offers" not in note


def test_core_field_errors_read_as_flags(capsys):
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--workload", "lora",
                         "--latency-target-ms", "5")
    assert (code, out) == (2, "")
    assert err == "fleet-tui: error: --latency-target-ms applies to inference workloads only\n"
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--pricing", "spot",
                         "--no-spot")
    assert err == "fleet-tui: error: --pricing spot contradicts spot_allowed=False (--no-spot)\n"
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--region", "mars-9")
    assert err.startswith("fleet-tui: error: --region 'mars-9': unknown region")


def test_training_tokens_take_the_forms_size_takes(capsys):
    # --training-tokens 50M was "not a number" while size --tokens took 20B
    argv = ("recommend", "--model", "llama-3.1-8b", "--workload", "lora", "--seq-len", "1024",
            "--cloud", "aws", "--top", "3", "--json")
    code, out, err = run(capsys, *argv, "--training-tokens", "50M")
    assert code == 0, err
    by_suffix = json.loads(out)
    code, out, _ = run(capsys, *argv, "--training-tokens", "50000000")
    assert by_suffix == json.loads(out)
    assert by_suffix["unit"] == "USD/run" and by_suffix["offers"][0]["cost_per_unit"] > 0
    code, _, err = run(capsys, *argv, "--training-tokens", "50 million")
    assert code == 2 and "--training-tokens '50 million': not a token count" in err
