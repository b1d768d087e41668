"""The tool against third-party published measurements it was not fitted on.

Rows: tests/fixtures/validation/*.toml, each with ``split = "tune"`` (the engine and training-stack
constants were fitted on these, bench/fit_serving.py) or ``"holdout"`` (never fitted on). The
harness that turns a row into the tool's workload is bench/validation_rows.py; bench/bench_validation.py
prints every row's error. Assertions here are on the holdout rows.

Serving rows are answered by the product's own path (the plan's engine verdict, ``size --burst``'s
simulation, the capacity plan's simulation of a rate); docs/serving.md, "Accuracy on published serving
measurements", has the table. Where they stand:

* fine-tuning memory, holdout median |error| <= 10 %: met (4.2 %).
* KV capacity (engine start-up logs, as the plan reports the engine), holdout median <= 10 %: met (5.1 %, 7 of 8 rows).
* serving throughput, holdout median <= 15 %: met on the current engine releases (14.6 %, 105 rows);
  NOT met over every release (18.2 %: the 12 holdout rows of superseded releases, all 39-563 % high,
  hold it up); strict xfail plus guards.
* the H200 memory check (tests/core/sizing/test_sizing_accuracy.py, <= 5 % median) is unchanged there.
* at most 2 inexpressible rows per set: met; 2 serving rows on the holdout side (the LMSYS
  prefill/decode-disaggregated rows) and 1 KV row (fp8 weights on an RTX 3090, which the product's
  capability table refuses), listed below so that a new one fails the test.
"""

import importlib.util
import statistics
import sys
from types import SimpleNamespace

import pytest

from tests.paths import REPO

BENCH = REPO / "bench"


def _harness():
    spec = importlib.util.spec_from_file_location("validation_rows", BENCH / "validation_rows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("validation_rows", module)
    spec.loader.exec_module(module)
    return module


vr = _harness()

# The rows the tool cannot express, and why (holdout side).
INEXPRESSIBLE_HOLDOUT = {
    # prefill/decode disaggregation over 12 nodes with large-scale expert parallelism
    "sglang-lmsys-deepseek-96xh100-pd-ep-2000in-input_tokens_per_s",
    "sglang-lmsys-deepseek-96xh100-pd-ep-2000in-output_tokens_per_s",
}


@pytest.fixture(scope="module")
def results():
    return vr.serving_results() + vr.kv_results() + vr.finetune_results()


def _holdout(results, file, kind):
    return [r for r in results if r.file == file and r.kind == kind and r.split == "holdout"]


def test_finetune_memory_holdout_median_within_10_percent(results):
    n, median, _, _ = vr.summary([r for r in results if r.file == "finetune_memory"], "holdout", "memory")
    assert n >= 15
    assert median <= 0.10, f"holdout median {median:.1%}"


def test_kv_capacity_holdout_median_within_10_percent(results):
    """The bar for vLLM KV capacity (memory: <= 10 % median error), on 8 holdout rows."""
    n, median, _, _ = vr.summary([r for r in results if r.file == "kv_capacity"], "holdout", "kv")
    assert n >= 8
    assert median <= 0.10, f"holdout median {median:.1%}"


def test_kv_capacity_holdout_does_not_get_worse(results):
    _, median, _, _ = vr.summary([r for r in results if r.file == "kv_capacity"], "holdout", "kv")
    assert median <= 0.06, f"holdout median {median:.1%} (5.5 % after the profile-run model, 26 rows)"


@pytest.mark.xfail(strict=True, reason="the product's simulated path: 18.2 % on the holdout rows (14.6 % on the "
                   "current engine releases); see docs/serving.md")
def test_serving_throughput_holdout_median_within_15_percent(results):
    n, median, _, _ = vr.summary([r for r in results if r.file == "serving"], "holdout", "throughput")
    assert n >= 110
    assert median <= 0.15, f"holdout median {median:.1%}"


def test_serving_throughput_holdout_does_not_get_worse(results):
    """Every serving row as the product answers it (the burst or rate simulation), serving.toml alone
    and all serving files: 18.9 % and 18.2 % when this guard was set (18.9 % and 19.1 % before the
    CDNA refit, vLLM's cached blocks after a preemption and the engines' prefill rates)."""
    ids = {r["id"] for r in vr.rows("serving.toml", "measurement")}
    n, median, _, _ = vr.summary([r for r in results if r.file == "serving" and r.id in ids], "holdout",
                                 "throughput")
    assert n >= 100
    assert median <= 0.20, f"holdout median {median:.1%}"
    _, median, _, _ = vr.summary([r for r in results if r.file == "serving"], "holdout", "throughput")
    assert median <= 0.19, f"holdout median {median:.1%}"


def test_serving_throughput_of_current_releases_holdout_median_within_15_percent(results):
    """The engine releases the profiles describe (every row but validation_rows.SUPERSEDED_RELEASES'):
    14.6 % over 105 holdout rows when this was set (17.3 % before the CDNA refit, vLLM's cached
    blocks after a preemption and the engines' prefill rates)."""
    old = {r["id"] for r in vr.serving_rows() if vr.superseded(r)}
    n, median, _, _ = vr.summary([r for r in results if r.file == "serving" and r.id not in old], "holdout",
                                 "throughput")
    assert n >= 100
    assert median <= 0.15, f"holdout median {median:.1%}"


def test_prefill_heavy_bursts_run_at_the_engines_prefill_rate(results):
    """GPUStack's bursts of 2K, 4K and 32K-token prompts on one H100 (vLLM bf16, SGLang FP8), tune and
    holdout: attention is 3 % of the work at 2K and a third at 32K, and one prefill rate per engine
    (engines.ENGINE_PREFILL_SCALE) meets all of them, the 32K one because a preempted vLLM request
    finds its blocks cached (they read 1.8-2.3x high before, the 32K one matched only through
    recomputing every preempted prompt)."""
    rows = [r for r in results if r.file == "serving" and r.id.startswith("gpustack-qwen3-14b-h100-")
            and r.id.endswith("output_tokens_per_s") and any(f"-{p}-" in r.id for p in (2000, 4000, 32000))]
    assert len(rows) == 5 and {r.split for r in rows} == {"tune", "holdout"}  # serving_bursts.toml
    assert all(abs(r.error) <= 0.20 for r in rows), [(r.id, f"{r.error:+.0%}") for r in rows]


def test_every_serving_row_is_answered_by_the_products_plan(results):
    """A burst row's figure is ``size --burst N``'s: the harness's number is the plan report's."""
    from fleet_tui.core.plan import PlanRequest, plan_workload

    row = next(r for r in vr.serving_rows() if r["id"].startswith("trtllm014-online-llama-3.1-8b-h100")
               and "qpsinf" in r["id"] and r["metric"] == "output_tokens_per_s")
    w, _, _, _ = vr._serving_workload(row)  # noqa: SLF001 (the harness's own mapping)
    report = plan_workload(PlanRequest(w.derive(batch=vr.ONLINE_REQUESTS), "H100", layout_given=True,
                                       burst=vr.ONLINE_REQUESTS), vr.catalog())
    got = next(r for r in results if r.id == row["id"])
    assert report.burst is not None and got.predicted == pytest.approx(report.burst.output_tokens_per_s)


def test_first_token_under_load_waits_for_the_iteration_in_progress(results):
    """A request that joins a busy replica waits, on average, half an iteration before its prefill
    is scheduled (the analytic plan's ``first_token_s``). The rows measured under load (a request
    rate) are now answered by the simulation, which schedules each arrival into the next iteration
    itself: median |error| over these 11 rows, tune and holdout, 60 % (the TensorRT-LLM 0.14 8B
    first tokens read 1.7-1.9x high through the fitted front-end latency, docs/serving.md)."""
    from fleet_tui.core.perf.serving_plan import first_token_s

    loaded = [r for r in vr.serving_rows() if r["metric"] == "ttft_ms_mean"
              and isinstance(r.get("request_rate"), (int, float))]
    by_id = {r.id: r for r in results if r.file == "serving"}
    assert len(loaded) >= 8 and {r["split"] for r in loaded} == {"tune", "holdout"}
    errors = []
    for row in loaded:
        got = by_id[row["id"]]
        assert got.predicted is not None, row["id"]
        errors.append(abs(got.predicted / got.measured - 1))
    median = statistics.median(errors)
    assert median <= 0.65, f"median {median:.1%} over {len(errors)} rows"

    def speed(concurrency):  # what first_token_s reads of a ServingSpeed
        return SimpleNamespace(ttft_s=0.020, tpot_s=0.010, loaded_tpot_s=0.016, concurrency=concurrency)

    assert first_token_s(speed(1)) == pytest.approx(0.030)  # an idle replica starts it at once
    assert first_token_s(speed(12)) == pytest.approx(0.030 + 0.008)  # half of a 16 ms iteration


def test_a_burst_has_at_most_its_requests_in_flight_and_half_the_prefills_beside_each(results):
    """TensorRT-LLM 0.14's table at QPS INF sends its 500 requests at once. Taken as a steady state
    at the concurrency the KV pool holds (629-1,024 sequences) every time between tokens read 54-204 %
    high; a burst never has more than its 500 in flight, and a sequence shares the replica only
    with the prefills after its own (burst_speed). The 8 rows, tune and holdout: median 16 %."""
    rows = [r for r in results if r.file == "serving" and r.kind == "latency"
            and r.id.startswith("trtllm014-online") and "-qpsinf-itl" in r.id]
    assert len(rows) == 8 and {r.split for r in rows} == {"tune", "holdout"}
    errors = sorted(abs(r.error) for r in rows)
    assert statistics.median(errors) <= 0.25 and errors[-1] <= 0.5, [(r.id, f"{r.error:+.0%}") for r in rows]


def test_mi300x_is_estimated_from_amds_current_releases_not_superseded_builds(results):
    """AMD's own rocm/vllm containers (Sep-Nov 2025) and its MLPerf v4.1 submission, holdout side:
    each within 40 % (with the CDNA constants fitted to the 2024 - early 2025 community builds the
    same rows were 2.5-5x too slow). The simulated burst runs at AMD's stated max seqs (1,500-3,200);
    refitted through this path (bench/fit_serving.py --only CDNA, tune rows) AMD's table reads within
    15 % (it read 14-35 % high with the constants the analytic model fitted at 256 sequences)."""
    amd = [r for r in results if r.file == "serving" and r.kind == "throughput" and r.split == "holdout"
           and (r.id.startswith("amd-rocm-") or r.id.startswith("mlperf41-amd-"))]
    assert len(amd) >= 8
    assert all(abs(r.error) <= 0.40 for r in amd), [(r.id, f"{r.error:+.0%}") for r in amd if abs(r.error) > 0.40]
    table = [r for r in amd if r.id.startswith("amd-rocm-")]
    assert len(table) == 8 and all(abs(r.error) <= 0.15 for r in table), [(r.id, f"{r.error:+.0%}") for r in table]


def test_superseded_releases_are_named_and_left_out_of_the_fit():
    spec = importlib.util.spec_from_file_location("fit_serving", BENCH / "fit_serving.py")
    assert spec is not None and spec.loader is not None
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    assert fit.TUNE and not any(vr.superseded(r) for r in fit.TUNE)
    versions = {r["engine_version"] for r in vr.serving_rows() if vr.superseded(r)}
    assert versions == set(vr.SUPERSEDED_RELEASES)  # every named release is in the set
    assert {r["gpu"] for r in vr.serving_rows() if vr.superseded(r)} == {"MI300X", "H200"}


def test_tune_rows_fit_better_than_holdout_rows_but_not_per_row(results):
    """Few constants with physical meaning, not one factor per row: the tune error stays well above
    zero (a per-row fit would drive it to ~0)."""
    _, tune, _, _ = vr.summary([r for r in results if r.file == "serving"], "tune", "throughput")
    assert 0.05 < tune <= 0.15


def test_inexpressible_rows_are_the_documented_ones(results):
    missing = {r.id for r in results if r.split == "holdout" and r.predicted is None
               and not r.reason.startswith("no published")}
    assert missing == INEXPRESSIBLE_HOLDOUT


def test_no_serving_row_lacks_a_catalog_figure(results):
    """GH200 (96 GB HBM3: the variant TensorRT-LLM's table names) and RTX PRO 6000 now carry their
    cited dense peaks and bandwidth (catalogs/accelerators.toml), so no row is left at 'no published'."""
    gaps = [r.id for r in results if r.predicted is None and r.reason.startswith("no published")]
    assert gaps == []


def test_405b_qlora_fits_8x80gb_with_torchtune_as_done_routinely():
    from fleet_tui.core.sizing import check_fit

    row = next(r for r in vr.rows("finetune_memory.toml", "run")
               if r["id"] == "torchtune-readme-llama31-405b-qlora-8xa100")
    w, _ = vr._ft_workload(row)  # noqa: SLF001 (the harness's own mapping)
    fit = check_fit(w, vr.catalog().accelerator("A100-80GB"), 8)
    assert fit.fits, fit.message


def test_unsloth_rows_are_sized_as_the_cli_preset_sizes_them():
    """The harness's Unsloth workload is what `size --framework unsloth` builds from the same
    flags (8-bit AdamW included), so the table's errors are the CLI's."""
    from fleet_tui.core.sizing.memory import estimate_memory
    from fleet_tui.core.workload import parse_workload

    for row in (r for r in vr.rows("finetune_memory.toml", "run") if r["framework"] == "unsloth"):
        w, _ = vr._ft_workload({**row, "seq_len": 4096})  # noqa: SLF001 (the harness's own mapping)
        cli = parse_workload({"model": w.model.id, "workload": "qlora", "framework": "unsloth", "seq_len": 4096,
                              "lora_rank": row["lora_rank"], "lora_targets": ",".join(w.lora_targets)},
                             vr.catalog())
        assert cli.optimizer == w.optimizer == "adamw8bit", row["id"]
        assert estimate_memory(cli).total_bytes == estimate_memory(w).total_bytes, row["id"]


def test_every_tune_serving_row_gives_a_number(results):
    """No tune row is left without a number either (the inexpressible ones are the holdout pair)."""
    missing = [r.id for r in results if r.file == "serving" and r.split == "tune" and r.predicted is None]
    assert missing == []


def test_attention_dp_expert_parallel_rows_are_planned_over_every_rank(results):
    """TensorRT-LLM's attention-DP + expert-parallel ("DEP") rows: a replica spans all its GPUs and a
    burst is split over its attention ranks. Counted as one GPU they had no number; sent to one rank
    they read 5-8x low (-75 to -86 %); now the median is within 25 % and none below -45 %."""
    dep = [r for r in results if r.file == "serving" and "-dep" in r.id]
    assert len(dep) >= 30 and all(r.predicted is not None for r in dep)
    errors = [r.error for r in dep if r.error is not None]
    assert statistics.median(abs(e) for e in errors) <= 0.25
    assert min(errors) >= -0.45, min(errors)
