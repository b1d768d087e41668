"""Catalog loading: bundled data, accelerator specs against the source CSV, user overrides, and
every class of bad input reported as file:line: field: message with nothing half-loaded."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from fleet_tui.core.catalog import Instance, build_catalog, load_catalog, validate_paths
from fleet_tui.core.errors import UserError
from tests.paths import TESTS

FIX = TESTS / "fixtures" / "catalog"
BAD = FIX / "bad"


@pytest.fixture(autouse=True)
def _isolated_user_dir(tmp_path, monkeypatch):
    """Each test gets an empty XDG config dir so a developer's own catalogs never leak in."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "fleet-tui" / "catalogs"


@pytest.fixture(scope="module")
def bundled():
    return load_catalog(include_user=False)


def test_bundled_catalog_loads_without_problems(bundled):
    assert bundled.problems == []
    assert len(bundled.instances) > 1000
    assert {"aws", "gcp", "azure", "lambda", "oci", "nebius"} <= set(bundled.clouds)


def _csv_rows():
    with open(FIX / "accelerators.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("row", _csv_rows(), ids=lambda r: r["accelerator"])
def test_every_csv_accelerator_present_with_its_numbers(bundled, row):
    acc = bundled.accelerator(row["accelerator"])  # the csv's own name resolves (name or alias)
    assert acc.memory_gib == pytest.approx(float(row["memory_gib"]))
    assert acc.source == row["source_url"]
    pairs = {"bf16_dense_tflops": "bf16", "fp16_dense_tflops": "fp16", "fp8_dense_tflops": "fp8",
             "int8_dense_tops": "int8", "fp32_tflops": "fp32"}
    for col, prec in pairs.items():
        if row[col].strip():
            assert acc.peak_tflops[prec] == pytest.approx(float(row[col])), prec
        else:
            assert prec not in acc.peak_tflops, f"{prec} must stay absent when the source has no figure"
    for col, attr in (("memory_bandwidth_gbs", "memory_bandwidth_gbs"), ("tdp_watts", "tdp_w"),
                      ("interconnect_bandwidth_gbs", "interconnect_bandwidth_gbs")):
        expected = float(row[col]) if row[col].strip() else None
        if expected is None and getattr(acc, attr) is not None:
            # a figure the CSV lacks may be added only as a documented catalog addition
            assert "[fleet-tui:" in acc.notes and attr in acc.notes, (acc.id, attr)
            continue
        assert getattr(acc, attr) == (pytest.approx(expected) if expected is not None else None)
    assert acc.software_stack in ("CUDA", "ROCm", "Neuron", "SynapseAI", "XLA")
    assert acc.as_of


def test_every_accelerator_states_what_it_runs_from_its_architecture(bundled):
    """Support comes from the architecture, not from which peaks happen to be published."""
    from fleet_tui.core.specs import architecture_precisions

    a10g = bundled.accelerator("A10G")
    assert a10g.peak_tflops == {} and a10g.supports("bf16") is True and a10g.supports("fp8") is False
    t4 = bundled.accelerator("T4")
    assert t4.supports("bf16") is False and t4.supports("fp8") is False and t4.supports("fp16") is True
    assert bundled.accelerator("H100").supports("fp8") is True
    for acc in bundled.accelerators.values():
        if acc.vendor.startswith(("NVIDIA", "AMD", "Intel", "Google")) or acc.software_stack == "Neuron":
            assert architecture_precisions(acc.architecture) is not None, (acc.id, acc.architecture)
        for p in acc.peak_tflops:  # a published peak never contradicts the architecture table
            assert acc.supports(p) is True, (acc.id, p)
            row = architecture_precisions(acc.architecture)
            assert row is None or p not in row.lacks, (acc.id, p)


# Devices in AWS's catalog that are not ML accelerators, kept visible but excluded from ranking:
# FPGAs (f1, f2) and the Radeon Pro V520 graphics GPU (g4ad).
NOT_ML_DEVICES = {"Radeon Pro V520", "Virtex UltraScale (VU9P)", "Virtex UltraScale+ (VU47P)"}


def test_every_bundled_instance_resolves_to_an_accelerator(bundled):
    unresolved = set()
    for inst in bundled.instances:
        assert inst.source and inst.as_of
        if inst.accelerator not in bundled.accelerators:
            unresolved.add(inst.accelerator)
            assert inst.excluded and any(f.startswith("unresolved-accelerator") for f in inst.flags), inst
            continue
        assert inst.accelerator_memory_gib > 0
    assert unresolved == NOT_ML_DEVICES


def test_every_bundled_offer_has_a_rankable_price_or_a_reason(bundled):
    for inst in bundled.instances:
        if inst.excluded is None:
            assert any(inst.price(p) for p in ("on-demand", "spot")), inst
        for p in ("on-demand", "spot", "reserved-1y", "reserved-3y"):
            v = inst.price(p)
            assert v is None or v > 0


def test_lookup_by_alias_and_case(bundled):
    assert bundled.accelerator("a100-80gb").id == "A100-80GB"
    assert bundled.accelerator("H100-MEGA").id == "H100"
    assert bundled.accelerator("tpu-v5litepod").id == "TPU-v5e"
    with pytest.raises(UserError, match="did you mean.*H100"):
        bundled.accelerator("H1000")


def test_find_instance_and_suggestions(bundled):
    rows = bundled.find_instance("P5.48XLARGE")
    assert len(rows) > 10 and all(r.instance_type == "p5.48xlarge" for r in rows)
    assert [r.region for r in bundled.find_instance("p5.48xlarge", "us-east-1")] == ["us-east-1"]
    with pytest.raises(UserError, match="p5.48xlarge"):
        bundled.find_instance("p5.48xlarg")
    with pytest.raises(UserError, match="region"):
        bundled.find_instance("p5.48xlarge", "mars-1")


def test_instance_price_helpers():
    inst = Instance(cloud="x", instance_type="t", region="r", accelerator="H100", accelerator_count=8,
                    accelerator_memory_gib=80, on_demand_usd_per_hour=40.0, spot_usd_per_hour=50.0,
                    excluded_pricing=("spot",))
    assert inst.price("on-demand") == 40.0
    assert inst.usd_per_gpu_hour("on-demand") == 5.0
    assert inst.price("spot") is None and inst.raw_price("spot") == 50.0
    assert inst.price("reserved-1y") is None
    with pytest.raises(UserError, match="pricing"):
        inst.price("monthly")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


OVERRIDE = """
meta.cloud = "aws"
instance = [
  {instance_type = "p5.48xlarge", region = "us-east-1", accelerator = "H100", accelerator_count = 8, on_demand_usd_per_hour = 1.5},
]

[[accelerator]]
id = "T4"
name = "My T4"
vendor = "NVIDIA"
software_stack = "CUDA"
memory_gib = 15

[[model]]
id = "tiny-test"
layers = 2
hidden = 64
intermediate = 128
heads = 4
kv_heads = 2
vocab = 1000
"""


def test_user_catalog_overrides_bundled_same_id(_isolated_user_dir):
    _write(_isolated_user_dir / "mine.toml", OVERRIDE)
    cat = load_catalog(reload=True)
    assert cat.problems == []
    (p5,) = cat.find_instance("p5.48xlarge", "us-east-1")
    assert p5.on_demand_usd_per_hour == 1.5
    assert len(cat.find_instance("p5.48xlarge")) > 1  # other regions still bundled
    assert cat.accelerator("t4").name == "My T4" and cat.accelerator("T4").memory_gib == 15
    assert cat.model("TINY-TEST").layers == 2
    # an accelerator redefined by the user is what instances now point at
    assert cat.find_instance("g4dn.xlarge")[0].accelerator == "T4"


def test_catalog_dir_wins_over_user(_isolated_user_dir, tmp_path):
    _write(_isolated_user_dir / "mine.toml", OVERRIDE)
    extra = tmp_path / "extra"
    _write(extra / "instances" / "aws.toml", OVERRIDE.split("[[accelerator]]")[0].replace("1.5", "2.5"))
    cat = load_catalog([extra], reload=True)
    assert cat.find_instance("p5.48xlarge", "us-east-1")[0].on_demand_usd_per_hour == 2.5
    with pytest.raises(UserError, match="not a directory"):
        load_catalog([tmp_path / "nope"])


def test_broken_user_file_is_reported_and_skipped_whole(_isolated_user_dir):
    _write(_isolated_user_dir / "good.toml", OVERRIDE)
    # valid accelerator + a bad instance in the same file: nothing from it may load
    _write(_isolated_user_dir / "broken.toml", """
[[accelerator]]
id = "ZZ-1"
vendor = "NVIDIA"
software_stack = "CUDA"
memory_gib = 10

[[instance]]
cloud = "aws"
instance_type = "zz.1"
region = "us-east-1"
accelerator = "ZZ-1"
accelerator_count = 1
on_demand_usd_per_hour = -3
""")
    cat = load_catalog(reload=True)
    assert any("broken.toml:" in p and "on_demand_usd_per_hour" in p for p in cat.problems)
    assert cat.resolve_accelerator("ZZ-1") is None
    assert not [i for i in cat.instances if i.instance_type == "zz.1"]
    assert cat.find_instance("p5.48xlarge", "us-east-1")[0].on_demand_usd_per_hour == 1.5  # the rest loads
    assert len(cat.instances) > 1000


def test_cache_reused_and_refreshed_on_edit(_isolated_user_dir):
    f = _write(_isolated_user_dir / "mine.toml", OVERRIDE)
    a = load_catalog()
    assert load_catalog() is a
    f.write_text(OVERRIDE.replace("1.5", "1.75") + "\n")
    b = load_catalog()
    assert b is not a and b.find_instance("p5.48xlarge", "us-east-1")[0].on_demand_usd_per_hour == 1.75
    assert load_catalog(reload=True) is not b


# -- each bad-input class gives the right file:line: field ------------------------------------

@pytest.mark.parametrize("name, line, field, words", [
    ("syntax.toml", 5, "syntax", "TOML syntax error"),
    ("wrong_type.toml", 6, "accelerator[0].memory_gib", "valid number"),
    ("unknown_key.toml", 6, "accelerator[0].memory_gb", "did you mean 'memory_gib'"),
    ("duplicate_id.toml", 8, "accelerator[1].id", "duplicate id"),
    ("missing_price.toml", 11, "instance[1].on_demand_usd_per_hour", "missing price"),
    ("nonpositive_price.toml", 9, "instance[0].on_demand_usd_per_hour", "must be > 0"),
    ("nonpositive_price.toml", 10, "instance[0].spot_usd_per_hour", "must be > 0"),
    ("instance_problems.toml", 5, "instance[1].accelerator_count", "must be a number"),
    ("instance_problems.toml", 6, "instance[2].colour", "unknown key"),
    ("instance_problems.toml", 7, "instance[3].instance_type", "duplicate offer"),
    ("instance_problems.toml", 8, "instance[4].accelerator", "unknown accelerator 'Z9000'"),
])
def test_bad_input_problem_names_file_line_field(name, line, field, words):
    problems, _ = validate_paths([BAD / name])
    prefix = f"{BAD / name}:{line}: {field}: "
    hits = [p for p in problems if p.startswith(prefix)]
    assert hits, f"no problem starting {prefix!r} in {problems}"
    assert words in hits[0]


def test_every_problem_is_reported_once(tmp_path):
    # An unknown accelerator in an otherwise valid file was listed twice (with two wordings).
    f = _write(tmp_path / "one.toml", '[[instance]]\ncloud = "x"\ninstance_type = "a"\nregion = "r"\n'
                                      'accelerator = "NOPE"\naccelerator_count = 1\n'
                                      'on_demand_usd_per_hour = 1.0\n')
    problems, _ = validate_paths([f])
    assert len(problems) == 1 and "unknown accelerator 'NOPE'" in problems[0]
    for name in ("instance_problems.toml", "nonpositive_price.toml"):
        problems, _ = validate_paths([BAD / name])
        places = [p.split(": ")[0] + p.split(": ")[1] for p in problems]
        assert len(places) == len(set(places)), problems


def test_bad_files_load_nothing_and_good_ones_still_do(tmp_path):
    d = tmp_path / "cat"
    shutil.copytree(BAD, d)
    _write(d / "ok.toml", OVERRIDE)
    cat = load_catalog([d], include_user=False, reload=True)
    assert len(cat.problems) >= 10
    assert cat.resolve_accelerator("X1") is None  # from the broken accelerator files
    assert not [i for i in cat.instances if i.cloud == "mycloud"]
    assert cat.find_instance("p5.48xlarge", "us-east-1")[0].on_demand_usd_per_hour == 1.5


def test_missing_required_instance_fields(tmp_path):
    f = _write(tmp_path / "x.toml", '[[instance]]\ninstance_type = "a"\naccelerator_count = 1\n'
                                    'on_demand_usd_per_hour = 1.0\n')
    cat = build_catalog([f])
    fields = {p.split(": ")[1] for p in cat.problems}
    assert {"instance[0].cloud", "instance[0].region", "instance[0].accelerator"} <= fields
    assert all(p.startswith(f"{f}:") for p in cat.problems)


def test_unknown_top_level_table_and_meta_key(tmp_path):
    f = _write(tmp_path / "x.toml", '[meta]\ncloud = "c"\nowner = "me"\n\n[[instanse]]\nid = "a"\n')
    cat = build_catalog([f])
    assert any(":3: meta.owner: unknown key" in p for p in cat.problems)
    assert any(":5: instanse: unknown table" in p and "did you mean 'instance'" in p for p in cat.problems)


def test_problem_inside_a_sub_table_points_at_its_line(tmp_path):
    f = _write(tmp_path / "a.toml", '[[accelerator]]\nid = "Q"\nvendor = "X"\nsoftware_stack = "CUDA"\n'
                                    'memory_gib = 4\n\n[accelerator.peak_tflops]\nbf16 = 10\nfp6 = 3\n')
    problems, _ = validate_paths([f])
    assert [p for p in problems if p.startswith(f"{f}:9: accelerator[0].peak_tflops.fp6: ")]


def test_every_bundled_cloud_is_in_the_clouds_registry(bundled):
    from fleet_tui.core.catalog.clouds import CLOUDS

    assert set(bundled.clouds) <= set(CLOUDS)
    reserved = {i.cloud for i in bundled.instances if i.reserved_estimated}
    assert reserved == {c.id for c in CLOUDS.values() if c.reserved is not None}


def test_a_registered_cloud_in_another_case_is_a_problem(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[[instance]]\ncloud = "AWS"\ninstance_type = "x"\nregion = "r"\naccelerator = "H100"\n'
                 'accelerator_count = 1\non_demand_usd_per_hour = 1.0\n')
    problems, _ = validate_paths([f])
    assert any(":2: instance[0].cloud: 'AWS' is the registered cloud 'aws'" in p for p in problems)
    f.write_text(f.read_text().replace('"AWS"', '"onprem"'))
    assert validate_paths([f])[0] == []
