"""One question, one answer: ``size --json``, the Workload builder and the ranking agree on a grid of
workloads (inference under each engine, a serving plan, training, LoRA, QLoRA × 1, 2, 8 devices)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from fleet_tui.cli import main
from fleet_tui.commands._workload_args import flag
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.ranking import recommend
from fleet_tui.ui.builder import build_workload, compute

GIB = 2**30

#: (name, builder form fields, size flags): the same workload spelled both ways
KINDS = {
    "vllm": ({"b-kind": "inference", "b-engine": "vllm", "b-seq": "1024", "b-gen": "256", "b-batch": "64"},
             ["--workload", "inference", "--engine", "vllm", "--prompt-len", "1024", "--gen-len", "256",
              "--batch", "64"]),
    "trtllm": ({"b-kind": "inference", "b-engine": "trtllm", "b-seq": "512", "b-gen": "512", "b-batch": "512"},
               ["--workload", "inference", "--engine", "trtllm", "--prompt-len", "512", "--gen-len", "512",
                "--batch", "512"]),
    "sglang": ({"b-kind": "inference", "b-engine": "sglang", "b-seq": "2048", "b-gen": "128", "b-batch": "8"},
               ["--workload", "inference", "--engine", "sglang", "--prompt-len", "2048", "--gen-len", "128",
                "--batch", "8"]),
    "hf": ({"b-kind": "inference", "b-engine": "hf", "b-seq": "1024", "b-gen": "128", "b-batch": "4"},
           ["--workload", "inference", "--engine", "hf", "--prompt-len", "1024", "--gen-len", "128",
            "--batch", "4"]),
    "serving": ({"b-kind": "inference", "b-engine": "vllm", "b-seq": "1000", "b-gen": "200", "b-batch": "1",
                 "b-rate": "4", "b-tpot": "50"},
                ["--workload", "inference", "--engine", "vllm", "--prompt-len", "1000", "--gen-len", "200",
                 "--batch", "1", "--rate", "4", "--tpot-ms", "50"]),
    "training": ({"b-kind": "finetune", "b-seq": "2048", "b-batch": "8", "b-ckpt": True},
                 ["--workload", "finetune", "--seq-len", "2048", "--batch", "8", "--grad-checkpointing"]),
    "lora": ({"b-kind": "lora", "b-seq": "2048", "b-batch": "4"},
             ["--workload", "lora", "--seq-len", "2048", "--batch", "4"]),
    "qlora": ({"b-kind": "qlora", "b-seq": "2048", "b-batch": "4", "b-ckpt": True},
              ["--workload", "qlora", "--seq-len", "2048", "--batch", "4", "--grad-checkpointing"]),
}
MODELS = {"vllm": "llama-3.1-70b", "trtllm": "llama-3.1-8b", "sglang": "qwen2.5-72b", "hf": "llama-3.1-8b",
          "serving": "llama-3.1-8b", "training": "llama-3.1-8b", "lora": "llama-3.1-70b", "qlora": "llama-3.1-70b"}
GRID = [(kind, gpus) for kind in KINDS for gpus in (1, 2, 8)]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _size_json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["size", *argv, "--json"]) == 0
    return json.loads(out.getvalue())


def _form(kind: str, gpus: int) -> dict:
    base = {"b-model": MODELS[kind], "b-precision": "bf16", "b-accel": "H100", "b-gpus": str(gpus),
            "b-sharding": "auto", "b-optimizer": "adamw", "b-lora-rank": "16", "b-framework": "hf",
            "b-kv-dtype": "auto", "b-hours": "730"}
    return base | KINDS[kind][0]


def _argv(kind: str, gpus: int) -> list[str]:
    return ["--model", MODELS[kind], "--gpu", "H100", "--gpus", str(gpus), *KINDS[kind][1]]


@pytest.mark.parametrize("kind,gpus", GRID, ids=[f"{k}-{g}" for k, g in GRID])
def test_size_builder_and_ranking_give_one_answer(catalog, kind, gpus):
    cli = _size_json(_argv(kind, gpus))
    built = compute(catalog, _form(kind, gpus))
    assert built.error is None, built.error
    # the builder lays out the very report size prints: every verdict, layout and number the same
    assert built.report.to_dict(flag) == cli
    assert cli["verdict"]["status"] in (("starts", "does_not_start") if kind in ("vllm", "trtllm", "sglang",
                                                                                   "serving")
                                        else ("fits", "does_not_fit"))
    # the ranking: an offer of these devices in one instance is ranked exactly when the plan says it
    # fits, with the plan's layout, headroom and speed on the instance the plan prices
    w = built.report.workload
    rec = recommend(w.derive(gpus=1, sharding="data", tp=None, pp=None, zero=None, micro_batch=None)
                    if w.gpus == 1 else w, catalog)
    same = [o for o in rec.offers if o.accelerator == "H100" and o.gpus == gpus and o.instances == 1]
    if not cli["fits"]:
        assert not same, (kind, gpus, same[0].label if same else "")
        assert cli["suggestions"], "a misfit says what to change"
        return
    cost = cli["cost"]
    assert cost is not None and cost["instances"] == 1 or gpus > 8
    offer = next(o for o in same if o.instance_type == cost["instance_type"] and o.cloud == cost["cloud"])
    assert (offer.layout or None) == cli["workload"]["layout"]
    assert offer.headroom_gib == pytest.approx(cli["headroom_bytes"] / GIB, rel=1e-6)
    speed = cli["throughput"]["tokens_per_s"]
    assert offer.tokens_per_s == pytest.approx(speed, rel=1e-9) if speed else offer.tokens_per_s is None


def test_fixes_are_listed_once_per_effect(catalog):
    cli = _size_json(["--model", "llama-3.1-70b", "--workload", "lora", "--gpu", "L40S", "--gpus", "2",
                      "--grad-checkpointing"])
    lines = [s["description"] for s in cli["suggestions"]]
    assert lines and len(lines) == len(set(lines))
    effects = [(s["total_bytes"], s["gpus"], s["description"].split(" (")[0]) for s in cli["suggestions"]]
    assert len(effects) == len(set(effects))


def test_a_tensor_parallel_group_is_priced_inside_one_instance(catalog):
    cli = _size_json(["--model", "llama-3.1-405b", "--precision", "fp8", "--prompt-len", "1000", "--gen-len",
                      "200", "--gpu", "H100", "--gpus", "8"])
    assert cli["fits"] and cli["workload"]["layout"] == "TP8"
    assert cli["cost"]["instances"] == 1 and cli["cost"]["devices_per_instance"] >= 8


@pytest.mark.parametrize("argv", [
    ["--model", "llama-3.1-8b", "--prompt-len", "1024", "--gen-len", "256", "--batch", "16"],
    ["--model", "llama-3.1-70b", "--workload", "qlora", "--seq-len", "2048", "--batch", "4",
     "--grad-checkpointing"],
], ids=["serving", "qlora"])
def test_recommend_explains_its_top_offer_with_sizes_report(catalog, argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["recommend", *argv, "--top", "3", "--explain", "--json"]) == 0
    rec = json.loads(out.getvalue())
    top, plan = rec["offers"][0], rec["top_plan"]
    assert plan["accelerator"] == top["accelerator"] and plan["gpus"] == top["gpus"] and plan["fits"]
    assert (plan["workload"]["layout"] or "") == top["layout"]
    assert plan["throughput"]["tokens_per_s"] == pytest.approx(top["tokens_per_s"], rel=1e-6)
    cli = _size_json([*argv, "--gpu", top["accelerator"], "--gpus", str(top["gpus"])])
    for key in ("verdict", "memory", "throughput", "headroom_bytes"):
        assert cli[key] == plan[key], key


# --- fp8 weights on a GPU without fp8 tensor cores: one capability rule for every front end ---------

def _form_fp8(engine: str, accel: str = "A100", kind: str = "inference") -> dict:
    form = {"b-model": "llama-3.1-8b", "b-precision": "fp8", "b-accel": accel, "b-gpus": "1",
            "b-sharding": "auto", "b-optimizer": "adamw", "b-lora-rank": "16", "b-framework": "hf",
            "b-kv-dtype": "auto", "b-hours": "730", "b-kind": kind}
    if kind == "inference":
        form |= {"b-engine": engine, "b-seq": "1024", "b-gen": "256", "b-batch": "32"}
    else:
        form |= {"b-seq": "1024", "b-batch": "4"}
    return form


def _fp8_argv(engine: str, accel: str = "A100") -> list[str]:
    return ["--model", "llama-3.1-8b", "--precision", "fp8", "--gpu", accel, "--engine", engine,
            "--prompt-len", "1024", "--gen-len", "256", "--batch", "32"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fp8_weights_on_ampere_serve_weight_only_in_every_front_end(catalog, engine):
    cli = _size_json(_fp8_argv(engine))
    built = compute(catalog, _form_fp8(engine))
    assert built.error is None, built.error
    assert built.report.to_dict(flag) == cli
    assert cli["verdict"]["status"] == "starts"
    notes = cli["throughput"]["assumptions"]
    assert any("weight-only" in n and "FP8 Marlin" in n for n in notes), notes
    # the ranking offers the A100 for it, with the plan's speed
    rec = recommend(built.report.workload, catalog)
    a100 = [o for o in rec.offers if o.accelerator == "A100" and o.gpus == 1]
    assert a100, "the ranking refuses what size serves"
    offer = next(o for o in a100 if o.instance_type == cli["cost"]["instance_type"] and o.cloud == cli["cost"]["cloud"])
    assert offer.tokens_per_s == pytest.approx(cli["throughput"]["tokens_per_s"], rel=1e-9)


def test_weight_only_fp8_streams_one_byte_weights_at_the_16_bit_compute_rate():
    fp8, bf16 = (_size_json(["--model", "llama-3.1-8b", "--precision", p, "--gpu", "A100", "--engine", "vllm",
                             "--prompt-len", "1024", "--gen-len", "256", "--batch", "1"]) for p in ("fp8", "bf16"))
    assert fp8["memory"]["breakdown"]["weights"] < 0.6 * bf16["memory"]["breakdown"]["weights"]
    # decode at batch 1 streams the weights: the 1-byte weights are faster ...
    assert fp8["throughput"]["decode_tokens_per_s"] > 1.5 * bf16["throughput"]["decode_tokens_per_s"]
    # ... while prefill is compute-bound at the 16-bit rate (no fp8 tensor cores): never faster than bf16
    assert fp8["throughput"]["prefill_tokens_per_s"] <= bf16["throughput"]["prefill_tokens_per_s"]
    # on a GPU with fp8 tensor cores fp8 prefill is faster than bf16 and nothing runs weight-only
    h_fp8, h_bf16 = (_size_json(["--model", "llama-3.1-8b", "--precision", p, "--gpu", "H100", "--engine", "vllm",
                                 "--prompt-len", "1024", "--gen-len", "256", "--batch", "1"]) for p in ("fp8", "bf16"))
    assert h_fp8["throughput"]["prefill_tokens_per_s"] > h_bf16["throughput"]["prefill_tokens_per_s"]
    assert not any("weight-only" in n for n in h_fp8["throughput"]["assumptions"])


@pytest.mark.parametrize("engine", ["trtllm", "hf"])
def test_fp8_on_ampere_without_a_weight_only_kernel_is_refused_with_the_engines_that_have_one(
        catalog, capsys, engine):
    rc = main(["size", *_fp8_argv(engine)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "--precision" in err and "no fp8 tensor cores" in err and "--engine vllm" in err
    built = compute(catalog, _form_fp8(engine))
    assert built.report is None and built.error_field == "precision"
    assert "no fp8 tensor cores" in (built.error or "")
    rec = recommend(_fp8_workload(catalog, engine), catalog)
    assert not [o for o in rec.offers if o.accelerator in ("A100", "A100-80GB", "RTX3090", "A10")]
    assert [o for o in rec.offers if o.accelerator == "H100"], "fp8 stays offered where it has tensor cores"


def test_fp8_training_on_ampere_stays_refused_with_the_reason(catalog, capsys):
    rc = main(["size", "--model", "llama-3.1-8b", "--precision", "fp8", "--gpu", "A100", "--workload", "finetune",
               "--seq-len", "1024", "--batch", "4"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "--precision" in err and "no fp8 tensor cores" in err and "use bf16" in err
    built = compute(catalog, _form_fp8("vllm", kind="finetune"))
    assert built.report is None and "no fp8 tensor cores" in (built.error or "")
    rec = recommend(_fp8_workload(catalog, "vllm", kind="finetune"), catalog)
    assert not [o for o in rec.offers if (o.accelerator or "").startswith(("A100", "RTX3090", "A10"))]


def _fp8_workload(catalog, engine: str, kind: str = "inference"):
    """The builder's workload for the form (built before planning, so a refused one exists too)."""
    return build_workload(catalog, _form_fp8(engine, kind=kind))


def test_recommend_says_why_a_current_ampere_box_cannot_serve_fp8_under_tensorrt_llm(capsys):
    assert main(["recommend", "--model", "llama-3.1-8b", "--precision", "fp8", "--engine", "trtllm",
                 "--prompt-len", "1024", "--gen-len", "256", "--current", "p4d.24xlarge", "--top", "3"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "current setup" in x and "cannot run" in x)
    assert "no fp8 tensor cores" in line and "--engine vllm" in line
