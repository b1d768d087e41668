"""The SkyPilot importer on row subsets of the shared CSVs: output format, GCP pricing rules, and
every anomaly of catalog-sources/README.md flagged or excluded (never ranked silently)."""

from __future__ import annotations

import sys

import pytest

from fleet_tui.core.catalog import build_catalog, catalog_files, load_catalog
from fleet_tui.core.catalog.importers.gcp import gcp_bundled_accelerator, tpu_chips
from fleet_tui.core.catalog.importers.skypilot import import_skypilot
from fleet_tui.core.errors import FieldError, UserError
from tests.paths import TESTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIX = TESTS / "fixtures" / "catalog" / "skypilot"
CSVS = sorted(FIX.glob("*/*.csv"))


@pytest.fixture(autouse=True)
def _isolated_user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("instances")
    reports = import_skypilot(CSVS, out_dir=out, catalog=load_catalog(include_user=False))
    from fleet_tui.core import paths

    cat = build_catalog(catalog_files(paths.bundled_catalog_dir())[:1] + sorted(out.glob("*.toml")))
    return out, {r.cloud: r for r in reports}, cat


def one(cat, itype, region):
    rows = cat.find_instance(itype, region)
    assert len(rows) == 1
    return rows[0]


def test_output_files_are_valid_catalogs_with_provenance(imported):
    out, reports, cat = imported
    assert set(reports) == {"aws", "gcp", "azure", "runpod", "vast", "lambda"}
    assert cat.problems == []
    for f in out.glob("*.toml"):
        data = tomllib.loads(f.read_text())
        assert data["meta"]["cloud"] == f.stem
        assert "@" in data["meta"]["source"]  # repository path @ commit from SOURCE.txt
        assert "GENERATED" in f.read_text().splitlines()[0]
        assert f.stat().st_mode & 0o044  # readable by others like any source file
    gcp = tomllib.loads((out / "gcp.toml").read_text())
    assert gcp["meta"]["as_of"] == "2026-05-20"
    assert not list(out.glob(".*.tmp"))  # atomic write leaves no temp file


def test_zones_collapse_to_one_offer_per_region_spot_is_cheapest_zone(imported):
    _, _, cat = imported
    g6 = one(cat, "g6.xlarge", "us-east-1")
    src = [ln.split(",") for ln in (FIX / "aws" / "vms_gpu_rows.csv").read_text().splitlines()[1:]
           if ln.startswith("g6.xlarge,")]
    assert g6.zones == len(src)
    assert g6.spot_usd_per_hour == min(float(r[7]) for r in src)
    assert g6.on_demand_usd_per_hour == float(src[0][6])
    assert g6.accelerator == "L4" and g6.accelerator_memory_gib == pytest.approx(22888 / 1024, abs=1e-3)


def test_price_only_extract_borrows_accelerator_columns(imported):
    _, _, cat = imported
    rows = cat.find_instance("p5.48xlarge")
    assert len(rows) > 10  # every region of the spread extract
    assert {r.accelerator for r in rows} == {"H100"} and {r.accelerator_count for r in rows} == {8}


def test_gcp_offer_is_vm_plus_gpu_row_of_the_same_zone(imported):
    _, _, cat = imported
    text = (FIX / "gcp" / "vms.csv").read_text().splitlines()
    vm = next(ln.split(",") for ln in text if ln.startswith("a3-highgpu-8g,") and ",us-central1," in ln)
    gpu = next(ln.split(",") for ln in text if ln.startswith(",,,H100,8,") and ",us-central1," in ln)
    a3 = one(cat, "a3-highgpu-8g", "us-central1")
    assert a3.on_demand_usd_per_hour == pytest.approx(float(vm[8]) + float(gpu[-2]))
    assert a3.accelerator == "H100" and a3.accelerator_count == 8 and a3.vcpus == 208
    t4 = one(cat, "n1-standard-8+1xT4", "us-central1")
    assert t4.accelerator == "T4" and t4.vcpus == 8


def test_gcp_family_and_tpu_rules():
    assert gcp_bundled_accelerator("a3-megagpu-8g") == ("H100-MEGA", 8)
    assert gcp_bundled_accelerator("a3-ultragpu-8g-nolssd") == ("H200", 8)
    assert gcp_bundled_accelerator("g2-standard-48") == ("L4", 4)
    assert gcp_bundled_accelerator("n1-standard-8") is None
    assert tpu_chips("tpu-v5p-8") == ("TPU-v5p", 4.0)
    assert tpu_chips("tpu-v5litepod-8") == ("TPU-v5e", 8.0)
    assert tpu_chips("tpu-v6e-1") == ("TPU-v6e", 1.0)


# -- anomalies -----------------------------------------------------------------------------------

def has_flag(inst, prefix):
    return any(f.startswith(prefix) for f in inst.flags)


def test_zero_vm_price_excludes_the_offer(imported):
    _, _, cat = imported
    a4 = cat.find_instance("a4-highgpu-8g")
    assert a4 and all(i.excluded and has_flag(i, "zero-price") for i in a4)
    assert all(i.price("on-demand") is None and i.price("spot") is None for i in a4)


def test_tpu_placeholder_price_dropped_and_flagged(imported):
    _, _, cat = imported
    v6 = cat.find_instance("tpu-v6e-1")
    flagged = [i for i in v6 if has_flag(i, "placeholder-price")]
    assert flagged
    for i in v6:
        for p in ("on-demand", "spot"):
            assert i.price(p) != 700.0


def test_spot_at_or_above_on_demand_is_excluded_from_ranking(imported):
    _, _, cat = imported
    h200 = cat.find_instance("Standard_ND96isr_H200_v5")
    assert h200 and all(has_flag(i, "spot>=on-demand") and i.price("spot") is None for i in h200)
    assert all(i.price("on-demand") for i in h200)
    # GCP A100-80GB: the GPU row's spot is above its on-demand in us-central1
    a2 = one(cat, "a2-ultragpu-1g", "us-central1")
    assert has_flag(a2, "spot>=on-demand") and a2.price("spot") is None


def test_missing_on_demand_and_missing_accelerator(imported):
    _, _, cat = imported
    p5e = cat.find_instance("p5e.48xlarge")
    assert p5e and all(has_flag(i, "no-on-demand-price") and i.price("on-demand") is None for i in p5e)
    assert all(i.price("spot") for i in p5e)
    (trn2,) = cat.find_instance("trn2.48xlarge")
    assert trn2.accelerator == "Trainium2" and trn2.excluded


def test_cross_region_outliers_flag_gcp_h100_two_price_levels(imported):
    _, _, cat = imported
    a3 = {i.region: i for i in cat.find_instance("a3-highgpu-8g")}
    prices = sorted(i.on_demand_usd_per_hour for i in a3.values())
    assert prices[-1] / prices[0] > 1.8  # the two levels are in the fixture
    low = [i for i in a3.values() if i.on_demand_usd_per_hour < 60]
    high = [i for i in a3.values() if i.on_demand_usd_per_hour >= 60]
    assert low and high
    flagged_side = low if len(low) < len(high) else high
    assert all(has_flag(i, "price-outlier") for i in flagged_side)


def test_unit_bugs_fixed_and_flagged(imported):
    _, _, cat = imported
    rp = one(cat, "1x_A100-80GB_SECURE", "US")
    assert rp.accelerator_memory_gib == 80 and has_flag(rp, "unit-fix")
    vast8 = cat.find_instance("8x-H100_SXM-32-65536")[0]
    assert vast8.accelerator_memory_gib == pytest.approx(652472 / 8 / 1024, abs=1e-3)
    assert has_flag(vast8, "unit-fix")
    v40 = cat.find_instance("1x-A100_SXM4-32-65536")
    assert {i.accelerator for i in v40} <= {"A100", "A100-80GB"}
    assert all((i.accelerator == "A100-80GB") == (i.accelerator_memory_gib > 60) for i in v40)
    ti = cat.find_instance("1x-RTX_3060_Ti-32-65536")[0]
    assert ti.accelerator_memory_gib == 8  # the smaller variant keeps its own size


def test_azure_sku_rules(imported):
    _, _, cat = imported
    assert all(i.accelerator == "H100-NVL" for i in cat.find_instance("Standard_NC40ads_H100_v5"))
    nv4 = cat.find_instance("Standard_NV4as_v4")
    assert nv4 and all(i.accelerator_count == 0.125 and has_flag(i, "count-fix") for i in nv4)
    with pytest.raises(UserError):
        cat.find_instance("Standard_D2s_v3")  # CPU rows are dropped
    assert cat.find_instance("gpu_1x_h100_pcie")[0].accelerator == "H100-PCIe"


def test_reserved_prices_estimated_only_where_a_discount_is_documented(imported):
    _, _, cat = imported
    g6 = one(cat, "g6.xlarge", "us-east-1")
    assert g6.reserved_estimated
    assert g6.reserved_3y_usd_per_hour < g6.reserved_1y_usd_per_hour < g6.on_demand_usd_per_hour
    lam = cat.find_instance("gpu_1x_h100_pcie")[0]
    assert lam.reserved_1y_usd_per_hour is None and not lam.reserved_estimated


def test_unresolvable_accelerator_is_excluded_and_reported(tmp_path):
    csv_file = tmp_path / "aws" / "vms.csv"
    csv_file.parent.mkdir()
    csv_file.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
                        "Region,AvailabilityZone\nx9.large,Warp9000,1,8,32,,3.0,1.0,us-east-1,use1-az1\n")
    (rep,) = import_skypilot([csv_file], out_dir=tmp_path / "out", catalog=load_catalog(include_user=False))
    assert rep.unresolved == {"Warp9000": 1}
    cat = build_catalog([tmp_path / "out" / "aws.toml"])
    assert cat.problems == []  # excluded rows may name an unknown device: kept, visible, unranked
    (x9,) = cat.instances
    assert x9.excluded and "Warp9000" in x9.excluded and x9.price("on-demand") is None


def test_unusable_accelerator_count_is_flagged_and_excluded(tmp_path):
    # 'abc' was written as accelerator_count = 1.0 with no word: its $/GPU-hour would be a guess.
    csv_file = tmp_path / "aws" / "vms.csv"
    csv_file.parent.mkdir()
    csv_file.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
                        "Region,AvailabilityZone\ng5.xlarge,A10G,abc,4,16,,1.0,,us-east-1,use1-az1\n"
                        "g5.2xlarge,A10G,1,8,32,,1.2,,us-east-1,use1-az1\n")
    import_skypilot([csv_file], out_dir=tmp_path / "out", catalog=load_catalog(include_user=False))
    from fleet_tui.core.paths import bundled_catalog_dir

    cat = build_catalog([bundled_catalog_dir() / "accelerators.toml", tmp_path / "out" / "aws.toml"])
    assert cat.problems == []
    by_type = {i.instance_type: i for i in cat.instances}
    bad, good = by_type["g5.xlarge"], by_type["g5.2xlarge"]
    assert bad.excluded == "accelerator count missing in the source"
    assert any(f.startswith("count-missing") for f in bad.flags)
    assert not good.excluded and not any(f.startswith("count-missing") for f in good.flags)


def test_importer_input_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        import_skypilot([tmp_path / "missing.csv"], out_dir=tmp_path)
    f = tmp_path / "prices.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(FieldError, match="pass cloud NAME") as exc:  # the CLI shows --cloud
        import_skypilot([f], out_dir=tmp_path)
    assert exc.value.field == "cloud"
    with pytest.raises(UserError, match="header lacks"):
        import_skypilot([f], out_dir=tmp_path, cloud="aws")
    with pytest.raises(FieldError, match="ISO date") as exc:
        import_skypilot([CSVS[0]], out_dir=tmp_path, as_of="May 2026")
    assert exc.value.field == "as_of"


def test_importer_errors_name_the_flags_on_the_command_line(capsys):
    from fleet_tui.cli import main

    assert main(["catalog", "import-skypilot", str(CSVS[0]), "--as-of", "May 2026"]) == 2
    assert capsys.readouterr().err == "fleet-tui: error: --as-of 'May 2026': give an ISO date such as 2026-05-20\n"
    assert main(["catalog", "import-skypilot", str(CSVS[0]), "--cloud", "{A B}"]) == 2
    assert capsys.readouterr().err.startswith("fleet-tui: error: --cloud '{A B}': use a short lower-case name")


def test_cli_import_then_validate(tmp_path, capsys):
    from fleet_tui.cli import main

    out = tmp_path / "cat" / "instances"
    assert main(["catalog", "import-skypilot", str(FIX / "lambda" / "vms.csv"), "--out-dir", str(out),
                 "--as-of", "2026-05-07"]) == 0
    assert "offers" in capsys.readouterr().out
    assert tomllib.loads((out / "lambda.toml").read_text())["meta"]["as_of"] == "2026-05-07"
    assert main(["catalog", "validate", str(tmp_path / "cat")]) == 0
    assert "ok:" in capsys.readouterr().out


AWS_ALL_REGIONS = '''\
InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch
g4dn.xlarge,T4,1.0,4.0,16.0,"{'Gpus': [{'Name': 'T4', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 16384}}]}",0.658,0.0658,af-south-1,afs1-az1,x86_64
g4dn.xlarge,T4,1.0,4.0,16.0,"{'Gpus': [{'Name': 'T4', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 16384}}]}",0.658,0.2431,af-south-1,afs1-az2,x86_64
g4dn.xlarge,T4,1.0,4.0,16.0,"{'Gpus': [{'Name': 'T4', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 16384}}]}",0.71,0.071,me-south-1,mes1-az1,x86_64
g6f.2xlarge,L4,0.25,8.0,32.0,"{'Gpus': [{'Name': 'L4', 'Count': 0, 'GpuPartitionSize': 0.25, 'MemoryInfo': {'SizeInMiB': 5722}}]}",0.68888,0.202,ap-northeast-1,apne1-az1,x86_64
'''
TWO_SNAPSHOTS = '''\
Source: skypilot-org/skypilot-catalog, path catalogs/v8/aws/vms.csv, commit e385a0d348eda9cefd9806423e7725944dc249e4
(commit date unknown).
  old_extract.csv : some rows

Source: skypilot-org/skypilot-catalog, path catalogs/v8/aws/vms.csv, commit 00148f2af3672e2229b4f7bf8157d5a3f36e3c35
(commit date unknown).
  vms_all_regions.csv : every accelerator row
'''


def test_aws_all_regions_rules(tmp_path):
    src = tmp_path / "aws"
    src.mkdir()
    (src / "vms_all_regions.csv").write_text(AWS_ALL_REGIONS)
    (src / "SOURCE.txt").write_text(TWO_SNAPSHOTS)
    (report,) = import_skypilot([src / "vms_all_regions.csv"], out_dir=tmp_path / "out",
                                catalog=load_catalog(include_user=False))
    assert report.offers == 3
    from fleet_tui.core import paths

    cat = build_catalog(catalog_files(paths.bundled_catalog_dir())[:1] + [tmp_path / "out" / "aws.toml"])
    assert cat.problems == []
    # the SOURCE.txt block that names the file gives its provenance
    assert one(cat, "g4dn.xlarge", "af-south-1").source.endswith("@ 00148f2af3672e2229b4f7bf8157d5a3f36e3c35")
    # spot at exactly 10 % of on-demand is a floor, not a price: dropped, the other zone's kept
    mixed = one(cat, "g4dn.xlarge", "af-south-1")
    assert mixed.spot_usd_per_hour == 0.2431 and mixed.price("spot") == 0.2431
    assert any(f.startswith("spot-floor:") and "1 zone(s)" in f for f in mixed.flags)
    floor_only = one(cat, "g4dn.xlarge", "me-south-1")
    assert floor_only.spot_usd_per_hour is None and floor_only.price("on-demand") == 0.71
    assert any(f.startswith("spot-floor:") for f in floor_only.flags)
    # a GPU slice: a quarter of one L4, whose whole memory is the slice's x 4
    g6f = one(cat, "g6f.2xlarge", "ap-northeast-1")
    assert g6f.accelerator == "L4" and g6f.accelerator_count == 0.25
    assert g6f.accelerator_memory_gib == pytest.approx(22888 / 1024, abs=1e-3)
    assert g6f.total_accelerator_memory_gib == pytest.approx(5722 / 1024, abs=1e-3)
    assert any(f.startswith("gpu-slice:") for f in g6f.flags)
    assert not any(f.startswith("memory-mismatch") for f in g6f.flags)


def test_bundled_aws_catalog_covers_every_region_of_the_source():
    from fleet_tui.core import paths

    cat = build_catalog(catalog_files(paths.bundled_catalog_dir()))
    aws = [i for i in cat.instances if i.cloud == "aws"]
    assert len({i.region for i in aws}) >= 20
    assert len(aws) > 800 and len(cat.find_instance("g6e.xlarge")) > 1
    assert all("00148f2" in i.source for i in aws)


def test_a_fractional_gpu_without_a_count_in_the_source_is_imported_and_flagged(tmp_path):
    # Azure's NV4as_v4 is an eighth of an MI25 whatever the source says, even when it says nothing
    csv_file = tmp_path / "azure" / "vms.csv"
    csv_file.parent.mkdir()
    csv_file.write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
                        "Region,Generation\nStandard_NV4as_v4,MI25,,4,14,MI25,0.338,0.062462,australiaeast,V1\n")
    import_skypilot([csv_file], out_dir=tmp_path / "out", catalog=load_catalog(include_user=False))
    text = (tmp_path / "out" / "azure.toml").read_text()
    assert "gets 0.125 of one GPU (source says nothing)" in text
