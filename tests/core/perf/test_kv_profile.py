"""vLLM's start-up profile run: what it charges before the KV pool (fleet_tui.core.perf.profile_run)."""

import pytest

from fleet_tui.core import calibration as cal
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.footprint import activation_bytes, forward_transient
from fleet_tui.core.perf import profile_run
from fleet_tui.core.perf.engines import kv_pool
from fleet_tui.core.sizing import kv_capacity
from fleet_tui.core.workload import parse_workload

CAT = load_catalog([])
H100 = CAT.accelerator("H100")


def wl(**kw):
    return parse_workload({"model": "llama-3.1-8b", "prompt_len": 1000, "gen_len": 200, **kw}, CAT)


def test_a_larger_batched_token_budget_costs_the_pool_its_forward_activations():
    small, large = wl(max_num_batched_tokens=8192), wl(max_num_batched_tokens=65536)
    a, b = kv_pool(small, H100, 1, 1200), kv_pool(large, H100, 1, 1200)
    arch, act = large.arch, activation_bytes(large)
    forward = forward_transient(arch, 65536, act, 1)
    assert forward > profile_run.sampler_peak_bytes(arch, 256)  # the forward sets the peak at 64k tokens
    assert a.free_bytes - b.free_bytes == pytest.approx(forward - a.parts["activation_peak"]
                                                        + cal.CUBLAS_WORKSPACE_BYTES)
    assert kv_capacity(large, H100).tokens < kv_capacity(small, H100).tokens


def test_the_sampler_peak_does_not_shrink_with_tensor_parallelism():
    """llm-d-planner's vllm 0.19 sweep logs 1.89 GiB of activation peak for Llama-3.1-8B at TP 1, 2 and 4:
    the sampler's full-vocabulary logits, gathered whole on the sampling rank."""
    peaks = [kv_pool(wl(gpus=n, max_num_seqs=1024), H100, n, 1200).parts["activation_peak"] for n in (1, 2, 4)]
    assert peaks[0] == peaks[1] == peaks[2]
    assert peaks[0] / cal.GiB == pytest.approx(1.89, abs=0.05)


def test_more_sequences_per_step_cost_the_pool_their_logits():
    few, many = kv_pool(wl(), H100, 1, 1200), kv_pool(wl(max_num_seqs=1024), H100, 1, 1200)
    assert many.free_bytes < few.free_bytes
    assert many.parts["activation_peak"] == pytest.approx(
        profile_run.sampler_peak_bytes(wl().arch, 1024) + cal.CUBLAS_WORKSPACE_BYTES)


def test_max_num_seqs_is_a_knob_of_the_serving_engines_only():
    with pytest.raises(Exception, match="max_num_seqs"):
        parse_workload({"model": "llama-3.1-8b", "prompt_len": 10, "gen_len": 10, "engine": "hf",
                        "max_num_seqs": 64}, CAT)
