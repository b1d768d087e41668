"""Training at scale: fabrics as data, the step model per layout, framework presets, the capability
table, and the published-runs validation set (tests/fixtures/validation/training_speed.toml)."""

from __future__ import annotations

import json
import random
import sys

import pytest

from fleet_tui.cli import main
from fleet_tui.core.capabilities import unsupported
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import FieldError
from fleet_tui.core.footprint import parallel_layout
from fleet_tui.core.interconnects import UNKNOWN_INTER_GBPS, default_fabric, fabric_for, parse_network, with_network
from fleet_tui.core.perf import estimate_throughput
from fleet_tui.core.perf.collectives import link_for
from fleet_tui.core.plan.build import PlanRequest, plan_workload
from fleet_tui.core.ranking import recommend
from fleet_tui.core.sizing import estimate_memory
from fleet_tui.core.sizing.fit import suggest_fixes
from fleet_tui.core.workload import parse_workload
from tests.paths import REPO

sys.path.insert(0, str(REPO / "bench"))
import training_rows as tr  # noqa: E402

GIB = 2**30


@pytest.fixture(scope="module")
def cat():
    return load_catalog([])


def wl(cat, **kw):
    return parse_workload(kw, cat)


# --- fabrics ---------------------------------------------------------------------------------------

def test_an_h100_job_across_nodes_is_not_assumed_to_crawl_over_10_gbit():
    fab = default_fabric("H100", "CUDA")
    assert fab.inter_known and fab.inter_gbps == 3200 and "assumed" in fab.inter_source
    assert "InfiniBand" in fab.describe(64) and "assumed" in fab.describe(64)


def test_a_device_without_a_reference_network_says_unknown():
    fab = default_fabric("L40S", "CUDA")
    assert not fab.inter_known and fab.inter_gbps == UNKNOWN_INTER_GBPS
    assert "unknown network" in fab.describe(16)


@pytest.mark.parametrize("text, gbps, per_device", [("3200G", 3200, False), ("3.2T", 3200, False),
                                                    ("400G/gpu", 400, True), ("efa-v2", 400, True),
                                                    ("ndr", 400, True), ("100", 100, False)])
def test_network_values(text, gbps, per_device):
    got, per, _ = parse_network(text)
    assert got == pytest.approx(gbps) and per is per_device


@pytest.mark.parametrize("text", ["fast", "0G", "1e9G", "400G/node/gpu"])
def test_bad_network_names_the_flag_and_what_is_allowed(text):
    with pytest.raises(FieldError) as e:
        parse_network(text)
    assert e.value.field == "network" and ("efa-v2" in str(e.value) or "outside" in str(e.value))


def test_cli_bad_network_exits_2(capsys):
    code = main(["size", "--model", "llama-3.1-8b", "--workload", "training", "--gpus", "16", "--gpu", "H100",
                 "--network", "fast"])
    err = capsys.readouterr().err
    assert code == 2 and "--network" in err and "Traceback" not in err


def test_hierarchical_collectives_use_every_nic_of_a_node():
    p5 = fabric_for("H100", 8, "aws", "p5.48xlarge")
    full_node = link_for(p5, 64, 1)  # 8 ranks per node: 8 NICs
    one_rank = link_for(p5, 8, 8)  # one rank per node (TP 8 inside): one NIC
    assert full_node.crosses_nodes and one_rank.crosses_nodes
    assert full_node.bytes_per_s == pytest.approx(8 * one_rank.bytes_per_s)


def test_a_slower_network_slows_fsdp_across_nodes(cat):
    w = wl(cat, model="llama-3.1-70b", workload="training", batch=64, seq_len=4096, gpus=64, sharding="fsdp",
           micro_batch=1, grad_checkpointing=True)
    h100 = cat.accelerator("H100")
    fast = estimate_throughput(w, h100, 64, with_network(default_fabric("H100", "CUDA"), "3200G"))
    slow = estimate_throughput(w, h100, 64, with_network(default_fabric("H100", "CUDA"), "100G"))
    assert slow.tokens_per_s < 0.5 * fast.tokens_per_s


def test_size_across_nodes_states_the_links_of_the_priced_offer(capsys):
    args = ["size", "--model", "llama-2-70b", "--workload", "training", "--batch", "2048", "--seq-len", "2048",
            "--gpus", "64", "--gpu", "H100", "--micro-batch", "8", "--grad-checkpointing", "--sharding", "fsdp",
            "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    links = d["throughput"]["links"]
    assert d["cost"]["instance_type"] in links and "between nodes" in links
    assert main(args + ["--network", "100G"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert "--network 100G" in slow["throughput"]["links"]
    assert slow["throughput"]["tokens_per_s"] < d["throughput"]["tokens_per_s"]


def test_size_and_recommend_agree_on_a_multi_node_job(cat):
    w = wl(cat, model="llama-2-70b", workload="training", batch=2048, seq_len=2048, grad_checkpointing=True)
    rec = recommend(w, cat, top=60)
    multi = next(o for o in rec.offers if o.instances > 1 and o.tokens_per_s)
    sized = plan_workload(PlanRequest(w.derive(gpus=multi.gpus, sharding="fsdp"), multi.accelerator), cat)
    assert sized.cost is not None and sized.cost.instance.instance_type == multi.instance_type
    assert sized.speed.tokens_per_s == pytest.approx(multi.tokens_per_s, rel=1e-6)


# --- the step model and layouts -------------------------------------------------------------------

def test_70b_fsdp_on_64_h100_within_25_percent_of_llm_foundry(cat):
    """llm-foundry: MPT-70B, 64 H100, FSDP full shard, activation checkpointing: 1,039 tokens/s/GPU
    (a 70B-class Llama here, with the default Transformers preset)."""
    w = wl(cat, model="llama-2-70b", workload="training", batch=2048, seq_len=2048, gpus=64, sharding="fsdp",
           micro_batch=8, grad_checkpointing=True)
    r = plan_workload(PlanRequest(w, "H100", layout_given=True), cat)
    assert r.verdict.ok and r.speed.tokens_per_s / 64 == pytest.approx(1039, rel=0.25)


def test_nemo_70b_tp4_pp4_cp2_fits_on_64_h100(cat):
    w = wl(cat, model="llama-3.1-70b", workload="training", batch=128, seq_len=8192, gpus=64, tp=4, pp=4, cp=2,
           vpp=5, sequence_parallel=True, micro_batch=1, precision="fp8", framework="nemo")
    r = plan_workload(PlanRequest(w, "H100", layout_given=True), cat)
    assert r.verdict.ok, r.verdict.message
    assert r.speed.tokens_per_s / 64 == pytest.approx(1533, rel=0.25)  # NeMo's published 1,533


def test_405b_on_16384_h100_reads_mfu_in_the_published_range(cat):
    w = wl(cat, model="llama-3.1-405b", workload="training", batch=2048, seq_len=8192, gpus=16384, tp=8, pp=16,
           vpp=7, sequence_parallel=True, micro_batch=1, framework="megatron")
    fab = with_network(default_fabric("H100", "CUDA"), "roce-400")
    thr = estimate_throughput(w, cat.accelerator("H100"), 16384, fab)
    assert 0.30 <= thr.mfu <= 0.45
    r = plan_workload(PlanRequest(w, "H100", layout_given=True), cat)  # what size prints: it fits, priced
    assert r.verdict.ok and r.cost is not None and 0.30 <= r.speed.mfu <= 0.45


def test_interleaving_shrinks_the_bubble(cat):
    base = dict(model="llama-3.1-70b", workload="training", batch=64, seq_len=4096, gpus=64, tp=8, pp=8,
                micro_batch=1, framework="megatron")
    h100 = cat.accelerator("H100")
    plain = estimate_throughput(wl(cat, **base), h100, 64)
    inter = estimate_throughput(wl(cat, **base, vpp=5), h100, 64)
    assert inter.tokens_per_s > 1.05 * plain.tokens_per_s  # bubble 7/71 -> 7/327 of the step


def test_context_parallel_splits_activations_and_is_checked(cat):
    base = dict(model="llama-3.1-8b", workload="training", batch=8, seq_len=32768, gpus=8, micro_batch=1,
                grad_checkpointing=True, framework="torchtitan")
    one = estimate_memory(wl(cat, **base, zero=3))
    cp = estimate_memory(wl(cat, **base, cp=4, zero=3))
    assert parallel_layout(wl(cat, **base, cp=4, zero=3), 8).cp == 4
    assert cp.breakdown["activations"] < one.breakdown["activations"] / 3
    with pytest.raises(FieldError):
        wl(cat, **{**base, "seq_len": 1000}, cp=3)  # 1000 tokens do not split into 6 chunks
    with pytest.raises(FieldError):
        wl(cat, model="llama-3.1-8b", seq_len=2048, cp=2)  # inference
    with pytest.raises(FieldError):
        wl(cat, **base, vpp=2)  # interleaving needs pipeline stages


# --- framework presets ----------------------------------------------------------------------------

def test_torchtitan_8b_on_8_h100_memory_near_the_measured_82_gib(cat):
    """torchtitan performance.md Table 1: 8B, FSDP 8, local batch 2 x 8192, selective AC: 82.4 GiB."""
    w = wl(cat, model="llama-3.1-8b", workload="training", batch=16, seq_len=8192, gpus=8, sharding="fsdp",
           framework="torchtitan")
    assert w.selective_checkpointing and w.master_weights == "fp32"
    total = estimate_memory(w).total_bytes / GIB
    assert total == pytest.approx(82.4, rel=0.15)


def test_presets_state_what_they_assume(cat):
    w = wl(cat, model="llama-3.1-8b", workload="training", batch=16, seq_len=4096, gpus=8, framework="torchtitan",
           sharding="fsdp")
    thr = estimate_throughput(w, cat.accelerator("H100"), 8)
    said = " ".join(thr.assumptions)
    assert "torchtitan" in thr.engine and "fp32 master weights" in said and "selective" in said


# --- the capability table -------------------------------------------------------------------------

def test_stacks_that_cannot_run_a_workload_say_why():
    assert "bitsandbytes" in unsupported("TPU-v6e", "XLA", "qlora")
    assert "inference only" in unsupported("Inferentia2", "Neuron", "lora")
    assert unsupported("A100", "CUDA", "training", precision="fp8")
    assert unsupported("H100", "CUDA", "training", precision="fp8") is None
    assert unsupported("MI300X", "ROCm", "qlora") is None


def test_no_qlora_is_ranked_on_a_tpu_or_inferentia(cat):
    w = wl(cat, model="llama-3.1-8b", workload="qlora", seq_len=2048)
    rec = recommend(w, cat, top=200, pricing="spot")
    stacks = {o.software_stack for o in rec.offers}
    assert stacks and not stacks & {"XLA", "Neuron"}


def test_no_fp8_fix_is_proposed_where_the_chip_lacks_it(cat):
    w = wl(cat, model="llama-3.1-70b", prompt_len=1000, gen_len=200, batch=8, gpus=4, engine="trtllm")
    for device in ("TPU-v5e", "A100"):
        fixes = suggest_fixes(w, 4, cat.accelerator(device))
        assert all(f.workload.precision != "fp8" for f in fixes), device
    # vLLM serves fp8 weights on an A100 weight-only (FP8 Marlin): there the fix is proposed
    fixes = suggest_fixes(w.derive(engine="vllm"), 4, cat.accelerator("A100"))
    assert any(f.workload.precision == "fp8" for f in fixes)


def test_size_refuses_qlora_on_a_tpu(capsys):
    code = main(["size", "--model", "llama-3.1-8b", "--workload", "qlora", "--seq-len", "2048", "--gpu", "TPU-v6e"])
    err = capsys.readouterr().err
    assert code == 2 and "bitsandbytes" in err


def test_eight_bit_adam_comes_before_offload_for_an_8b_full_finetune(cat):
    w = wl(cat, model="llama-3.1-8b", workload="finetune", seq_len=2048, batch=4)
    fixes = suggest_fixes(w, 1, cat.accelerator("H100"), limit=8)
    keys = [f.change for f in fixes]
    maths = [i for i, k in enumerate(keys) if {"optimizer", "master_weights"} & set(k.split("+"))]
    offload = [i for i, k in enumerate(keys) if k.startswith("offload")]
    assert maths and (not offload or max(maths) < min(offload)), keys


# --- the validation set ---------------------------------------------------------------------------

def test_the_split_is_the_stated_rule():
    rows = tr.rows()
    ids = sorted(r["id"] for r in rows)
    random.Random(32).shuffle(ids)
    hold = set(ids[:round(len(ids) / 3)])
    assert {r["id"] for r in rows if r["split"] == "holdout"} == hold
    assert all(r["source"].startswith("https://") and r.get("source_detail") for r in rows)


def test_the_set_covers_scales_fabrics_and_families():
    rows = tr.rows()
    sizes = {int(r["gpus"]) for r in rows}
    assert 1 in sizes and 8 in sizes and 64 in sizes and max(sizes) >= 512
    stacks = {r["accelerator"].split("-")[0] for r in rows}
    assert {"TPU", "Gaudi2"} <= stacks
    assert len({r["network"] for r in rows if r.get("network_gbps")}) >= 3


def test_held_out_published_runs_every_case_a_number_median_within_20_percent():
    held = [r for r in tr.results() if r.split == "holdout"]
    assert held and all(r.predicted is not None for r in held)
    n, median, within, _ = tr.summary(held)
    assert median <= 0.20 and within >= 0.75, (median, within)


def test_batch_per_device_is_what_the_per_device_frameworks_count(cat):
    w = wl(cat, model="llama-3.1-8b", workload="finetune", seq_len=2048, batch_per_device=2, gpus=8,
           framework="torchtune")
    assert w.batch == 16
    tp = wl(cat, model="llama-3.1-70b", workload="training", seq_len=2048, batch_per_device=2, gpus=16, tp=8)
    assert tp.batch == 4  # two data-parallel ranks
    with pytest.raises(FieldError):
        wl(cat, model="llama-3.1-8b", workload="finetune", seq_len=2048, batch_per_device=2, batch=4, gpus=8)


def test_the_layout_search_keeps_to_what_the_framework_runs(cat):
    h100 = cat.accelerator("H100")
    tune = plan_workload(PlanRequest(wl(cat, model="llama-3.1-8b", workload="finetune", seq_len=2048, batch=16,
                                        gpus=8, framework="torchtune"), "H100"), cat)
    lay = parallel_layout(tune.workload, 8)
    assert lay.zero == 3 and lay.tp == 1  # FSDP2 full shard, never TP × ZeRO-1
    nemo = plan_workload(PlanRequest(wl(cat, model="llama-3.1-70b", workload="training", seq_len=8192, batch=128,
                                        gpus=64, framework="nemo"), "H100"), cat)
    assert parallel_layout(nemo.workload, 64).zero in (0, 1) and nemo.verdict.ok
    assert h100 is not None
