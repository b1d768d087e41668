"""The fix search on worked examples: each suggestion is verified by
re-sizing, the same hardware comes first, offload is proposed, and a setup that exists is named."""

from __future__ import annotations

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.sizing import check_fit
from fleet_tui.core.sizing.device_support import capacity_bytes
from fleet_tui.core.sizing.fit import COST_TIERS, suggest_fixes
from fleet_tui.core.sizing.memory import estimate_memory
from fleet_tui.core.workload import Workload


@pytest.fixture(scope="module")
def cat():
    return load_catalog(include_user=False)


def tier(s) -> int:
    return max(COST_TIERS.get(k, 9) for k in s.change.split("+"))


def verified(fixes, acc):
    for s in fixes:  # every suggestion fits when re-sized on its own devices
        assert estimate_memory(s.workload, s.gpus).total_bytes <= capacity_bytes(acc), s.description
    assert [tier(s) for s in fixes] == sorted(tier(s) for s in fixes)


def test_70b_qlora_on_2_l40s_fits_with_fsdp_on_these_2(cat):
    acc = cat.accelerator("L40S")
    w = Workload(kind="qlora", model=cat.model("llama-3.1-70b"), seq_len=2048, batch=4, gpus=2)
    fit = check_fit(w, acc, 2)
    assert not fit.fits
    fixes = fit.suggestions
    verified(fixes, acc)
    first = fixes[0]
    assert first.gpus == 2 and "FSDP" in first.description and "on these 2 devices" in first.description
    assert "--sharding fsdp" in first.render(lambda f: "--" + f.replace("_", "-"))


def test_checkpointing_is_paired_even_when_an_offload_fits_alone(cat):
    """70B QLoRA on 2x L40S at the CLI's defaults (batch 1, 2,048 tokens): offloading every saved
    activation over PCIe fits alone, but the advice must also name checkpointing with a layout on
    the same two devices (it once stopped at the offload and then jumped to 4 devices)."""
    acc = cat.accelerator("L40S")
    w = Workload(kind="qlora", model=cat.model("llama-3.1-70b"), seq_len=2048, batch=1, gpus=2)
    fixes = check_fit(w, acc, 2).suggestions
    verified(fixes, acc)
    # same-hardware maths changes (checkpointing with a layout) come before moving state over PCIe
    assert any(s.change == "offload_activations" for s in fixes)
    pair = next(s for s in fixes if s.change == "checkpointing+layout")
    assert fixes.index(pair) < next(i for i, s in enumerate(fixes) if s.change == "offload_activations")
    assert pair.gpus == 2 and pair.workload.grad_checkpointing
    assert fixes.index(pair) < min(i for i, s in enumerate(fixes) if s.gpus != 2)


def test_8b_full_finetune_on_2_a100_fits_with_fsdp_on_2(cat):
    acc = cat.accelerator("A100-80GB")
    w = Workload(kind="finetune", model=cat.model("llama-3.1-8b"), seq_len=2048, batch=8, gpus=2,
                 sharding="data")
    fixes = check_fit(w, acc, 2).suggestions
    verified(fixes, acc)
    assert fixes[0].change == "layout" and fixes[0].gpus == 2 and "FSDP" in fixes[0].description
    assert all(s.gpus >= 2 for s in fixes)
    more = [s for s in fixes if s.change == "gpus"]
    assert fixes.index(more[0]) > 0 if more else True  # more devices only after the same 2


def test_405b_on_a_t4_gets_a_concrete_layout(cat):
    acc = cat.accelerator("T4")
    w = Workload(kind="inference", model=cat.model("llama-3.1-405b"), seq_len=2048, precision="fp16")
    fixes = check_fit(w, acc, 1).suggestions
    assert fixes
    verified(fixes, acc)
    layouts = [s for s in fixes if s.change.startswith("gpus")]
    assert layouts and all(s.gpus > 1 and s.workload.tp and s.workload.tp > 1 for s in layouts)
    assert "TP8" in layouts[0].description


def test_offload_is_proposed_and_verified(cat):
    acc = cat.accelerator("A100-80GB")
    w = Workload(kind="finetune", model=cat.model("llama-3.1-8b"), seq_len=2048, batch=8)
    fixes = suggest_fixes(w, 1, acc, limit=12)
    verified(fixes, acc)
    off = [s for s in fixes if "offload" in s.change]
    assert off, [s.change for s in fixes]
    assert "optimizer" in off[0].workload.offload
    assert "{offload}" in off[0].template
    # offload keeps the devices and the maths: it comes before more devices
    more = [i for i, s in enumerate(fixes) if s.change == "gpus"]
    assert not more or fixes.index(off[0]) < more[0]


def test_activation_offload_alone_when_it_is_enough(cat):
    acc = cat.accelerator("L40S")
    w = Workload(kind="qlora", model=cat.model("llama-3.1-70b"), seq_len=2048, batch=4, gpus=2,
                 sharding="fsdp")
    fixes = check_fit(w, acc, 2).suggestions
    verified(fixes, acc)
    acts = [s for s in fixes if s.change == "offload_activations"]
    assert acts and acts[0].workload.offload == ("activations",) and acts[0].gpus == 2


def test_a_setup_that_exists_is_always_named(cat):
    acc = cat.accelerator("RTX4060")
    w = Workload(kind="finetune", model=cat.model("llama-3.1-405b"), seq_len=8192, batch=64,
                 precision="fp16")
    fixes = check_fit(w, acc, 1).suggestions
    assert fixes, "no change found although a catalog device fits with a change"
    verified(fixes, acc)
    assert fixes[0].gpus > 1


def test_a_change_that_fits_these_devices_only_split_another_way_is_named(cat):
    """70B LoRA on 2x L40S: QLoRA with checkpointing fits the same two devices only when they
    split the model (58 GiB a device as two data-parallel copies, 42 GiB as FSDP); the advice
    went from offloading the parameters straight to 8 devices, without the answer an expert gives."""
    acc = cat.accelerator("L40S")
    w = Workload(kind="lora", model=cat.model("llama-3.1-70b"), seq_len=2048, batch=4, gpus=2)
    fixes = check_fit(w, acc, 2).suggestions
    verified(fixes, acc)
    q = next(s for s in fixes if s.change == "checkpointing+qlora+layout")
    assert q.gpus == 2 and q.workload.kind == "qlora" and q.workload.grad_checkpointing
    assert estimate_memory(q.workload.derive(sharding="data", zero=None, tp=None, pp=None), 2).total_bytes \
        > capacity_bytes(acc)  # as the user's two data-parallel copies it would not fit
    flags = q.render(lambda f: "--" + f.replace("_", "-"))
    assert "--workload qlora" in flags and "--gpus 2" in flags and "--grad-checkpointing" in flags
    assert fixes.index(q) < min(i for i, s in enumerate(fixes) if s.gpus != 2)


def test_a_full_finetune_that_misfits_four_devices_gets_advice_on_those_four(cat):
    """8B full fine-tune on 4x A10G (24 GiB): the advice was only 8 A10Gs or bigger devices; LoRA,
    pure bf16 and offloading each fit the four with another split, cheaper than buying more."""
    acc = cat.accelerator("A10G")
    w = Workload(kind="finetune", model=cat.model("llama-3.1-8b"), seq_len=4096, batch=8, gpus=4)
    fixes = check_fit(w, acc, 4).suggestions
    verified(fixes, acc)
    same = [s for s in fixes if s.gpus == 4]
    assert {"lora+layout", "master_weights+layout"} <= {s.change for s in same}
    assert all(s.workload.tp or s.workload.zero or s.workload.sharding != "data" for s in same)
    others = [i for i, s in enumerate(fixes) if s.gpus != 4]  # more devices: only after every same-device fix
    assert not others or fixes.index(same[-1]) < min(others)


def test_a_layout_alone_is_not_repeated_as_a_pair(cat):
    """When checkpointing fits with another layout, its pairs are not offered again under a
    layout (checkpointing + micro-batches + FSDP said the same thing twice)."""
    acc = cat.accelerator("L40S")
    w = Workload(kind="qlora", model=cat.model("llama-3.1-70b"), seq_len=2048, batch=4, gpus=2)
    changes = [s.change for s in suggest_fixes(w, 2, acc, limit=20)]
    assert "checkpointing+layout" in changes
    assert not [c for c in changes if c.startswith("checkpointing+") and c.endswith("+layout")
                and c != "checkpointing+layout"]
    assert len(changes) == len(set(changes))


def test_no_change_is_offered_under_a_layout_that_fits_alone(cat):
    acc = cat.accelerator("A100-80GB")
    w = Workload(kind="finetune", model=cat.model("llama-3.1-8b"), seq_len=2048, batch=8, gpus=2,
                 sharding="data")
    changes = [s.change for s in suggest_fixes(w, 2, acc, limit=20)]
    # checkpointing paired with a layout search is the pairing's own (it was there before)
    assert changes[0] == "layout" and not [c for c in changes if c.endswith("+layout")
                                           and c != "checkpointing+layout"]
