"""`fleet-tui size` contract: JSON shape, table output, exit 2 with a message for every bad input."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from tests.paths import REPO

CONFIGS = REPO / "tests/fixtures/configs"


def run(capsys, *argv):
    rc = main(["size", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_contract_inference(capsys):
    rc, out, err = run(capsys, "--model", "llama-3.1-8b", "--workload", "inference", "--seq-len", "2048",
                       "--gpu", "H100", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert isinstance(d["memory"]["total_bytes"], int)
    assert d["memory"]["total_bytes"] == sum(d["memory"]["breakdown"].values())
    assert {"weights", "kv_cache", "logits", "cuda_context"} <= set(d["memory"]["breakdown"])
    assert d["fits"] is True
    assert d["throughput"]["phase"] == "prefill" and d["throughput"]["tokens_per_s"] > 0
    assert d["kv_capacity"]["tokens"] > 0
    assert isinstance(d["suggestions"], list) and d["memory"]["assumptions"]


def test_json_contract_generation_and_training(capsys):
    rc, out, _ = run(capsys, "--model", "llama-3.1-8b", "--prompt-len", "512", "--gen-len", "128",
                     "--batch", "16", "--gpu", "H200", "--json")
    d = json.loads(out)
    assert rc == 0 and d["throughput"]["phase"] == "decode"
    assert "vLLM" in d["throughput"]["engine"]
    rc, out, _ = run(capsys, "--params", "7B", "--workload", "finetune", "--seq-len", "2048", "--batch", "8",
                     "--gpu", "L4", "--tokens", "1e9", "--json")
    d = json.loads(out)
    # nothing that does not fit gets a speed
    assert rc == 0 and d["fits"] is False and d["throughput"] is None and d["training_run"] is None
    assert d["suggestions"] and all(s["total_bytes"] <= d["capacity_bytes"] for s in d["suggestions"]
                                    if s["change"] != "device")  # a bigger device has its own capacity


def test_json_without_gpu_has_null_fit_and_reference_speed(capsys):
    rc, out, _ = run(capsys, "--model", "mixtral-8x7b", "--workload", "lora", "--seq-len", "1024", "--json")
    d = json.loads(out)
    assert rc == 0 and d["fits"] is None and d["accelerator"] is None
    assert d["throughput"]["tokens_per_s"] > 0
    assert any("no --gpu" in a for a in d["throughput"]["assumptions"])


def test_model_config_path(capsys):
    rc, out, _ = run(capsys, "--model-config", str(CONFIGS / "qwen2.5-7b.json"), "--json")
    assert rc == 0 and json.loads(out)["workload"]["params"] == 7_615_616_512


@pytest.mark.parametrize("params,expected", [("7e9", 7e9), ("7B", 7e9), ("70b", 70e9), ("405M", 405e6)])
def test_params_spellings(capsys, params, expected):
    rc, out, _ = run(capsys, "--params", params, "--json")
    assert rc == 0
    assert json.loads(out)["workload"]["params"] == pytest.approx(expected, rel=0.02)


def test_text_output_has_table_verdict_and_suggestions(capsys):
    rc, out, _ = run(capsys, "--model", "llama-3.1-70b", "--prompt-len", "1024", "--gen-len", "256",
                     "--gpu", "H100")
    assert rc == 0
    assert "Memory per GPU" in out and "weights" in out and "total" in out
    # vLLM (the default engine) cannot start a 70B bf16 model on one 80 GB device, and says so
    assert "DOES NOT START" in out and "the engine says:" in out and "gpu_memory_utilization" in out
    assert "Smallest changes" in out and "--precision" in out


@pytest.mark.parametrize("argv,needle", [
    (["--params", "0"], "--params"),
    (["--params=-5B"], "--params"),
    (["--params", "lots"], "--params"),
    (["--params", "1e20"], "--params"),
    (["--params", "7B", "--batch", "0"], "--batch"),
    (["--params", "7B", "--batch=-1"], "--batch"),
    (["--params", "7B", "--batch", "two"], "--batch"),
    (["--params", "7B", "--seq-len", "99999999999"], "--seq-len"),
    (["--params", "7B", "--gpus", "0"], "--gpus"),
    (["--params", "7B", "--gen-len", "10"], "--prompt-len"),
    (["--params", "7B", "--prompt-len", "10"], "--gen-len"),
    (["--params", "7B", "--seq-len", "10", "--prompt-len", "5", "--gen-len", "5"], "either"),
    (["--model", "lama-3.1-8b"], "did you mean llama-3.1-8b"),
    (["--model", "llama-3.1-8b", "--gpu", "H1000"], "did you mean"),
    (["--model", "llama-3.2-1b", "--precision", "fp8", "--gpu", "T4", "--engine", "hf"],
     "T4 (Turing) has no fp8 tensor cores and Hugging Face has no weight-only fp8 kernel for it; vLLM serves"),
    (["--model", "llama-3.2-1b", "--precision", "fp8", "--gpu", "TPU-v5e"], "TPU-v5e (XLA) runs"),
    (["--model", "llama-3.1-8b", "--prompt-len", "9", "--gen-len", "9", "--api-server-count", "0"],
     "--api-server-count 0: out of range (allowed: 1 to 256)"),
    (["--model", "llama-3.1-8b", "--prompt-len", "9", "--gen-len", "9", "--engine", "sglang",
      "--api-server-count", "2"], "--api-server-count is a knob of vllm's API server"),
        (["--model", "llama-3.2-1b", "--gpu", "T4"], "T4 (Turing) has no bf16 support; use fp16"),
    (["--model", "llama-3.2-1b", "--gpu", "V100"], "V100 (Volta) has no bf16 support"),
    (["--model", "llama-3.1-8b", "--workload", "finetune", "--precision", "int4", "--seq-len", "512"], "qlora"),
    (["--model", "llama-3.1-8b", "--optimizer", "sgd"], "training"),
    (["--model", "llama-3.1-8b", "--lora-rank", "8"], "lora"),
    (["--model", "llama-3.1-8b", "--workload", "lora", "--lora-targets", "qproj", "--seq-len", "8"], "q_proj"),
    (["--model", "llama-3.1-8b", "--workload", "lora", "--lora-rank", "0", "--seq-len", "8"], "--lora-rank"),
    (["--model", "llama-3.1-8b", "--seq-len", "2000000"], "context window"),
    (["--model-config", "/definitely/not/here.json"], "no such file"),
    (["--model-config", str(CONFIGS / "broken-syntax.json")], "broken-syntax.json:5"),
    (["--model-config", str(CONFIGS / "broken-missing-keys.json")], "num_attention_heads"),
    (["--model", "llama-3.1-70b", "--gpus", "3", "--sharding", "tensor"], "heads"),
    (["--workload", "inference"], "--model"),
    (["--params", "7B", "--workload", "finetune", "--tokens", "0", "--seq-len", "8"], "--tokens"),
    (["--params", "7B", "--tokens", "1e9"], "training"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert needle in err
    assert "Traceback" not in err and out == ""


def test_argparse_choices_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["size", "--params", "7B", "--precision", "fp9"])
    assert exc.value.code == 2
    assert "--precision" in capsys.readouterr().err


def test_unknown_peak_gives_null_speed_with_the_missing_figure(capsys):
    # A10G: Ampere, runs bf16, but NVIDIA publishes no peak: no forward-pass speed is invented
    rc, out, err = run(capsys, "--model", "llama-3.1-8b", "--seq-len", "1024", "--gpu", "A10G", "--json")
    assert rc == 0, err
    t = json.loads(out)["throughput"]
    assert t["phase"] == "prefill" and t["tokens_per_s"] is None and t["mfu"] is None
    assert t["unknown"] == "no published bf16 peak for A10G"
    # decode is memory-bound: estimated from the bandwidth alone
    rc, out, _ = run(capsys, "--model", "llama-3.1-8b", "--prompt-len", "512", "--gen-len", "128",
                     "--gpu", "A10G", "--json")
    t = json.loads(out)["throughput"]
    assert rc == 0 and t["phase"] == "decode" and t["tokens_per_s"] > 0 and t["unknown"] is None
    assert t["prefill_tokens_per_s"] is None and t["time_to_first_token_s"] is None
    # training run length unknown too, said in words in the table
    rc, out, _ = run(capsys, "--model", "llama-3.1-8b", "--workload", "lora", "--seq-len", "1024",
                     "--grad-checkpointing", "--gpu", "A10G", "--tokens", "1e8")
    assert rc == 0 and "training speed unknown: no published bf16 peak for A10G" in out
    assert "time unknown" in out


def test_size_prices_a_setup_that_fits(capsys):
    from fleet_tui.cli import main

    assert main(["size", "--model", "llama-3.1-8b", "--prompt-len", "1024", "--gen-len", "256",
                 "--gpu", "H100", "--json"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    cost = d["cost"]
    assert d["fits"] and cost["usd_per_hour"] > 0
    assert cost["usd_per_month"] == pytest.approx(cost["usd_per_hour"] * 730, rel=1e-6)
    per_m = cost["usd_per_hour"] / (d["throughput"]["tokens_per_s"] * 3600) * 1e6
    assert cost["usd_per_million_tokens"] == pytest.approx(per_m, rel=1e-4)
    assert main(["size", "--model", "llama-3.1-8b", "--gpu", "H100"]) == 0
    assert "Cost: $" in capsys.readouterr().out


def test_a_fine_tune_of_millions_of_tokens_is_a_run_length(capsys):
    # --tokens 50M was refused as "between 100M and 100T parameters": a fine-tune's length is
    # millions of tokens, and a token count is no parameter count
    base = ("--model", "llama-3.1-8b", "--workload", "lora", "--seq-len", "1024", "--gpu", "H100", "--json")
    rc, out, err = run(capsys, *base, "--tokens", "50M")
    assert rc == 0, err
    short = json.loads(out)["training_run"]
    rc, out, _ = run(capsys, *base, "--tokens", "5e8")
    long = json.loads(out)["training_run"]
    assert short["tokens"] == 50_000_000 and short["hours"] > 0
    assert long["hours"] == pytest.approx(10 * short["hours"])  # the same rate, ten times the tokens
    rc, _, err = run(capsys, *base, "--tokens", "50 tokens")
    assert rc == 2 and "--tokens '50 tokens': not a token count" in err and "parameters" not in err


def test_unknown_gpu_names_the_flag_and_suggests(capsys):
    code, out, err = run(capsys, "--model", "llama-3.1-8b", "--gpu", "H1OO")
    assert code == 2 and out == ""
    assert "--gpu: unknown accelerator 'H1OO'" in err and "did you mean H100?" in err
    assert "Traceback" not in err
