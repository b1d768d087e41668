"""Sizing and speed against the 23 runs measured on a real H200 (tests/fixtures/h200/).

Memory: predict NVML's used bytes at the peak (weights-only rows: after loading) for every row; the
test fails above 10 % median or 25 % maximum absolute error.
Speed: prefill and training tokens/s within 25 % each, median <= 15 %. Decode rows are Hugging Face
eager (launch-bound) and the speed model describes an optimized serving engine, so they are only
checked to be slower than the model's estimate (never used to fit).
The tests print nothing; ``bench/bench_accuracy.py`` prints the per-run tables the README quotes.
"""

from __future__ import annotations

import json
import statistics
import sys

from tests.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from fleet_tui.core.modelspec import ModelArch, param_count
from fleet_tui.core.workload import Workload

ROOT = REPO
TRUTH = json.loads((ROOT / "tests/fixtures/h200/sizing_truth.json").read_text())


def _models() -> dict[str, ModelArch]:
    with open(ROOT / "catalogs/models.toml", "rb") as fh:
        return {m["id"]: ModelArch(**m) for m in tomllib.load(fh)["model"]}


MODELS = _models()


def _h200():
    try:
        from fleet_tui.core.catalog import load_catalog

        return load_catalog(include_user=False).accelerator("H200")
    except Exception:  # catalog not available: the measured device facts suffice
        from fleet_tui.core.specs import Accelerator

        return Accelerator(id="H200", vendor="NVIDIA", software_stack="CUDA", memory_gib=141,
                           memory_bandwidth_gbs=4800, architecture="Hopper",
                           peak_tflops={"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979})


def workload_for(row: dict) -> Workload:
    """The Workload that describes exactly what the ground-truth README says the run did."""
    m = MODELS[row["model"]]
    mode = row["mode"]
    if mode == "weights_bf16":
        return Workload(kind="inference", model=m, precision="bf16")
    if mode == "prefill_bf16":
        return Workload(kind="inference", model=m, batch=row["batch"], seq_len=row["seq"])
    if mode == "decode_bf16":
        return Workload(kind="inference", model=m, batch=row["batch"], prompt_len=row["prompt"],
                        gen_len=row["new_tokens"])
    common = dict(model=m, batch=row["batch"], seq_len=row["seq"], grad_checkpointing=row["grad_ckpt"],
                  optimizer="adamw")
    if mode == "train_full_amp_fp32master":
        return Workload(kind="finetune", master_weights="fp32", **common)
    if mode == "train_full_bf16":
        return Workload(kind="finetune", master_weights="none", **common)
    if mode == "train_lora_bf16":
        return Workload(kind="lora", master_weights="none", lora_rank=16,
                        lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"), **common)
    raise AssertionError(f"unknown mode {mode}")


def _label(r: dict) -> str:
    shape = f"b{r.get('batch', '-')}×{r.get('seq', r.get('prompt', '-'))}"
    ck = " ckpt" if r.get("grad_ckpt") else ""
    return f"{r['model']:<13} {r['mode']:<26} {shape:<9}{ck}"


def test_catalog_architectures_reproduce_measured_param_counts():
    for r in TRUTH["runs"]:
        if r["mode"] == "train_lora_bf16":
            from fleet_tui.core.footprint import lora_params

            w = workload_for(r)
            assert param_count(w.model) + lora_params(w.model, w) == r["params"]
        else:
            assert param_count(MODELS[r["model"]]) == r["params"], r["model"]


def memory_rows() -> list[tuple[str, float, float, float]]:
    """(run, predicted bytes, NVML-measured bytes, signed error %) for each of the 23 H200 runs."""
    from fleet_tui.core.sizing import estimate_memory

    rows = []
    for r in TRUTH["runs"]:
        truth = r["nvml_used_bytes"] if r["mode"] == "weights_bf16" else r["nvml_used_peak"]
        w = workload_for(r)
        if w.is_generation:  # the runs were Hugging Face generate, not a serving engine's reserve
            w = w.derive(engine="hf")
        pred = estimate_memory(w).total_bytes
        rows.append((_label(r), pred, truth, (pred - truth) / truth * 100))
    return rows


def memory_table(rows) -> str:
    return "\n".join(f"{label}  predicted {pred / 1e9:7.2f} GB  measured {truth / 1e9:7.2f} GB  {err:+6.1f} %"
                     for label, pred, truth, err in rows)


def test_memory_matches_nvml_on_h200():
    rows = memory_rows()
    errors = [abs(err) for *_, err in rows]
    median, worst = statistics.median(errors), max(errors)
    why = f"median |error| {median:.1f} %, max {worst:.1f} % (bench/bench_accuracy.py prints the table):\n"
    assert len(errors) == 23
    assert median <= 10.0, why + memory_table(rows)
    assert worst <= 25.0, why + memory_table(rows)


def test_old_rule_of_thumb_is_much_worse():
    """Sanity check of the yardstick the issue quotes: params × bytes × 1.5/1.2 is off by ~51 %."""
    errors = []
    for r in TRUTH["runs"]:
        truth = r["nvml_used_bytes"] if r["mode"] == "weights_bf16" else r["nvml_used_peak"]
        factor = 1.5 if r["mode"].startswith("train") else 1.2
        errors.append(abs(r["params"] * 2 * factor - truth) / truth * 100)
    assert statistics.median(errors) > 30


def speed_rows(acc=None) -> list[tuple[str, str, float, float, float | None, str]]:
    """(run, phase, predicted tok/s, measured tok/s, signed error % or None for decode, engine) per run
    with a speed. Decode runs were Hugging Face eager (launch-bound): shown, never a target."""
    from fleet_tui.core.perf import estimate_throughput

    acc = acc or _h200()
    rows = []
    for r in TRUTH["runs"]:
        if r["mode"] == "weights_bf16":
            continue
        t = estimate_throughput(workload_for(r), acc, 1)
        if r["mode"] == "decode_bf16":
            rows.append((_label(r), t.phase, t.tokens_per_s, r["decode_tokens_per_s"], None, t.engine))
            continue
        err = (t.tokens_per_s - r["tokens_per_s"]) / r["tokens_per_s"] * 100
        rows.append((_label(r), t.phase, t.tokens_per_s, r["tokens_per_s"], err, t.engine))
    return rows


def speed_table(rows) -> str:
    lines = []
    for label, _phase, pred, measured, err, _engine in rows:
        if err is None:
            lines.append(f"{label}  optimized-engine estimate {pred:9.0f} tok/s  "
                         f"HF eager measured {measured:9.1f} (not a target)")
        else:
            lines.append(f"{label}  predicted {pred:9.0f} tok/s  measured {measured:9.0f}  {err:+6.1f} %")
    return "\n".join(lines)


def test_speed_matches_h200_prefill_and_training():
    rows = speed_rows()
    table = "\n" + speed_table(rows)
    prefill = [abs(e) for _, phase, _, _, e, _ in rows if e is not None and phase == "prefill"]
    train = [abs(e) for _, phase, _, _, e, _ in rows if e is not None and phase == "training"]
    for label, phase, pred, measured, err, engine in rows:
        if err is None:  # decode: the estimate is of an optimized engine, faster than HF eager
            assert phase == "decode" and "vLLM" in engine, label
            assert pred > measured, f"{label}: estimate {pred:.0f} tok/s not above HF eager {measured:.1f}"
    assert len(prefill) == 7 and len(train) == 7, "a run was classified into the wrong phase" + table
    assert max(prefill + train) <= 25.0, "an error above 25 %" + table
    assert statistics.median(prefill) <= 15.0, f"prefill median {statistics.median(prefill):.1f} %" + table
    assert statistics.median(train) <= 15.0, f"training median {statistics.median(train):.1f} %" + table
