"""Accelerator names as people type them and tools print them resolve to one catalog device, in
the core, so every front end takes the same spellings."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.catalog.names import index, name_key
from tests.cli_run import run


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


SPELLINGS = [
    # nvidia-smi --query-gpu=name, the Monitor's label, the catalogs' own instance GPU names
    ("NVIDIA H100 80GB HBM3", "H100"), ("H100 80GB", "H100"), ("h100_sxm", "H100"),
    ("H100SXM", "H100"), ("h100 80g", "H100"), ("H100-80GiB", "H100"),
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100"),
    ("a100 40gb", "A100"), ("NVIDIA H200", "H200"), ("nvidia l40s", "L40S"),
    ("Tesla T4", "T4"), ("NVIDIA A10G", "A10G"), ("A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"), ("RTX 6000 Ada", "RTX6000-Ada"),
    ("Quadro RTX 6000", "RTX6000"), ("RTX_A6000", "A6000"),
    # amd-smi's market names, hl-smi's product names
    ("AMD Instinct MI300X", "MI300X"), ("MI300X OAM", "MI300X"),
    ("HL-225", "Gaudi2"), ("Habana Labs HL-325L", "Gaudi3"),
    ("tpu v5e", "TPU-v5e"),
]


@pytest.mark.parametrize(("typed", "acc_id"), SPELLINGS)
def test_spellings_resolve(catalog, typed, acc_id):
    assert catalog.resolve_accelerator(typed) == acc_id
    assert catalog.accelerator(typed).id == acc_id


@pytest.mark.parametrize("typed", ["NVIDIA H200 NVL", "H100 94GB", "A100 80GB PCIe x", "H1OO"])
def test_what_names_no_catalog_device_is_not_guessed(catalog, typed):
    assert catalog.resolve_accelerator(typed) is None


def test_the_key_drops_case_separators_brands_and_packaging_only():
    assert name_key("NVIDIA H100 80GB HBM3") == name_key("h100-80g") == "h10080g"
    assert name_key("H100 PCIe") != name_key("H100 SXM")  # other devices keep apart
    assert name_key("H100 NVL") != name_key("H100")
    assert name_key("B300 262.5GB") == "b3002625g"


class _Acc:
    def __init__(self, acc_id, name, aliases=(), memory_gib=None):
        self.id, self.name, self.aliases, self.memory_gib = acc_id, name, aliases, memory_gib


def test_a_key_two_devices_share_is_dropped_and_ids_win():
    accs = {"X1": _Acc("X1", "Widget 80GB", memory_gib=80),
            "X2": _Acc("X2", "Widget 80 GB HBM3", memory_gib=80),
            "X3": _Acc("X3", "Other", aliases=("X1",))}
    keys = index(accs)
    assert "widget80g" not in keys  # both would claim it: ask rather than guess
    assert keys["x1"] == "X1"  # an id is never shadowed by another device's alias


@pytest.mark.parametrize("typed", ["NVIDIA H100 80GB HBM3", "H100 80GB", "h100_sxm"])
def test_every_front_end_takes_the_spellings(capsys, typed):
    code, out, err = run(capsys, "size", "--model", "llama-3.1-8b", "--gpu", typed, "--json")
    assert code == 0, err
    assert json.loads(out)["accelerator"] == "H100"
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--gpu", typed,
                         "--top", "50", "--json")
    assert code == 0, err
    offers = json.loads(out)["offers"]
    assert offers and {o["accelerator"] for o in offers} == {"H100"}
    code, out, err = run(capsys, "catalog", "instances", "--filter", f"accelerator={typed}",
                         "--json")
    assert code == 0, err
    assert {row["accelerator"] for row in json.loads(out)} == {"H100"}


def test_recommend_gpu_filters_and_names_the_flag(capsys):
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--gpu", "L40S,a10g",
                         "--top", "100", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert {o["accelerator"] for o in data["offers"]} == {"L40S", "A10G"}
    assert data["constraints"]["accelerators"] == ["A10G", "L40S"]
    code, out, err = run(capsys, "recommend", "--model", "llama-3.1-8b", "--gpu", "H1OO")
    assert code == 2 and "--gpu 'H1OO': unknown accelerator; did you mean H100?" in err
