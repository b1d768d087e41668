"""Filtering, sorting and the --filter mini-language; the catalog CLI's exit codes and formats."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_tui.cli import main
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.catalog.query import INSTANCE_FIELDS, Condition, parse_filter, query_instances
from fleet_tui.core.errors import FieldError, UserError


@pytest.fixture(autouse=True)
def _isolated_user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def cat():
    return load_catalog(include_user=False)


def test_keyword_filters(cat):
    res = query_instances(cat, cloud="aws", accelerator="h100", count=8, max_usd_per_hour=80)
    assert res.rows and res.total == len(res.rows)
    for i in res.rows:
        assert i.cloud == "aws" and i.accelerator == "H100" and i.accelerator_count == 8
        assert i.price("on-demand") <= 80
    amd = query_instances(cat, vendor="amd").rows
    assert amd and {cat.accelerators[i.accelerator].vendor for i in amd} == {"AMD"}
    intel = query_instances(cat, vendor="Intel").rows
    assert all(cat.accelerators[i.accelerator].vendor.startswith("Intel") for i in intel)
    east = query_instances(cat, region="us-east").rows
    assert {r.region for r in east} >= {"us-east-1", "us-east4"}
    assert all(r.region.startswith("us-east") for r in east)
    big = query_instances(cat, min_memory_gib=140).rows
    assert big and all(i.accelerator_memory_gib >= 140 for i in big)


def test_sort_by_price_puts_missing_prices_last_and_limit_keeps_total(cat):
    res = query_instances(cat, pricing="spot", sort="price")
    prices = [i.price("spot") for i in res.rows]
    first_none = prices.index(None)
    assert all(p is None for p in prices[first_none:])
    head = prices[:first_none]
    assert head == sorted(head)
    desc = query_instances(cat, pricing="spot", sort="price", descending=True, limit=5)
    assert desc.total == len(res.rows) and len(desc.rows) == 5
    assert desc.rows[0].price("spot") == max(head)


def test_sort_by_text_and_per_gpu_price(cat):
    rows = query_instances(cat, sort="region", limit=50).rows
    regions = [r.region.lower() for r in rows]
    assert regions == sorted(regions)
    rows = query_instances(cat, sort="price_per_gpu", accelerator="L4").rows
    per = [r.usd_per_gpu_hour() for r in rows if r.usd_per_gpu_hour() is not None]
    assert per == sorted(per)


def test_excluded_offers_are_kept_for_listing_but_never_priced(cat):
    all_rows = query_instances(cat).rows
    excluded = [i for i in all_rows if i.excluded]
    assert excluded and all(i.price(p) is None for i in excluded for p in ("on-demand", "spot"))
    hidden = query_instances(cat, include_excluded=False).rows
    assert len(hidden) == len(all_rows) - len(excluded)
    # a price filter never lets an excluded price through
    assert not [i for i in query_instances(cat, max_usd_per_hour=1e9).rows if i.excluded]


def test_parse_filter_and_conditions(cat):
    conds = parse_filter("cloud=aws, accelerator=H100-MEGA ,price<40,memory>=80")
    assert conds == [Condition("cloud", "=", "aws"), Condition("accelerator", "=", "H100-MEGA"),
                     Condition("price", "<", 40.0), Condition("memory", ">=", 80.0)]
    gcp = query_instances(cat, conditions=parse_filter("cloud=gcp,gpu=H100-MEGA")).rows
    assert gcp and all(i.accelerator == "H100" for i in gcp)  # aliases resolve to the id
    contains = query_instances(cat, conditions=parse_filter("type~ultragpu")).rows
    assert contains and all("ultragpu" in i.instance_type for i in contains)


@pytest.mark.parametrize("expr, words", [
    ("pricee<4", "unknown field 'pricee'; did you mean 'price'"),
    ("price<cheap", "'price' takes a number, got 'cheap'"),
    ("cloud>aws", "'cloud' is text"),
    ("memory~80", "'~' (contains) works on text"),
    ("cloud", "cannot read 'cloud'"),
    ("price<", "cannot read 'price<'"),
    ("price<nan", "finite"),
])
def test_filter_errors_name_the_token(expr, words):
    with pytest.raises(FieldError) as exc:
        parse_filter(expr)
    assert words in str(exc.value) and exc.value.field == "filter"  # the CLI shows --filter


def test_filter_errors_render_as_flags_and_keep_braces(capsys):
    assert main(["catalog", "instances", "--filter", "col{our}=red"]) == 2
    assert capsys.readouterr().err.startswith("fleet-tui: error: --filter 'col{our}=red': cannot read 'col{our}=red'")
    assert main(["--catalog-dir", "/no/{such}/dir", "catalog", "models"]) == 2
    assert capsys.readouterr().err.startswith("fleet-tui: error: --catalog-dir /no/{such}/dir: not a directory")


def test_query_errors(cat):
    with pytest.raises(UserError, match="did you mean"):
        query_instances(cat, accelerator="H1000")
    with pytest.raises(FieldError, match="unknown field; did you mean 'count'") as exc:
        query_instances(cat, sort="cost")
    assert exc.value.field == "sort"
    with pytest.raises(UserError, match="pricing"):
        query_instances(cat, pricing="hourly")
    with pytest.raises(UserError, match="unknown accelerator"):
        query_instances(cat, conditions=[Condition("accelerator", "=", "Nope9")])


def test_an_unknown_accelerator_in_a_filter_names_the_flag(capsys):
    assert main(["catalog", "instances", "--filter", "accelerator=H10O"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleet-tui: error: --filter 'accelerator=H10O': unknown accelerator; "
                          "did you mean H100")


_NUMERIC = [k for k, (_, kind) in INSTANCE_FIELDS.items() if kind == "number"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(_NUMERIC), op=st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
       value=st.sampled_from([0.5, 1, 2, 8, 16, 24.5, 80, 141, 1000]),
       pricing=st.sampled_from(["on-demand", "spot", "reserved-1y", "reserved-3y"]),
       cloud=st.sampled_from([None, "aws", "gcp", "azure", "lambda"]))
def test_property_results_satisfy_the_filter(cat, field, op, value, pricing, cloud):
    res = query_instances(cat, conditions=parse_filter(f"{field}{op}{value}"), pricing=pricing, cloud=cloud)
    getter = INSTANCE_FIELDS[field][0]
    ops = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
    matched = 0
    for inst in res.rows:
        v = getter(inst, pricing, cat)
        assert cloud is None or inst.cloud == cloud
        if op == "!=":
            assert v is None or abs(v - value) > 1e-9
        elif op == "=":
            assert v is not None and abs(v - value) <= 1e-9
        else:
            assert v is not None and ops[op](float(v), float(value))
        matched += 1
    # and nothing that satisfies it was dropped
    pool = [i for i in cat.instances if cloud is None or i.cloud == cloud]
    expect = 0
    for inst in pool:
        v = getter(inst, pricing, cat)
        if op == "!=":
            expect += v is None or abs(v - value) > 1e-9
        elif v is None:
            continue
        elif op == "=":
            expect += abs(v - value) <= 1e-9
        else:
            expect += ops[op](float(v), float(value))
    assert matched == expect == res.total


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_instances_json_and_csv(capsys):
    assert main(["catalog", "instances", "--filter", "cloud=aws,accelerator=H100", "--sort", "price",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["cloud"] == "aws" and r["accelerator"] == "H100" for r in rows)
    prices = [r["price_usd_per_hour"] for r in rows if r["price_usd_per_hour"] is not None]
    assert prices == sorted(prices)
    assert main(["catalog", "instances", "--filter", "cloud=lambda", "--csv", "--limit", "3"]) == 0
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(parsed) == 3 and parsed[0]["cloud"] == "lambda"


def test_cli_table_is_bounded(capsys):
    assert main(["catalog", "instances"]) == 0
    out = capsys.readouterr().out
    assert "of" in out.splitlines()[-1] and len(out.splitlines()) <= 60


def test_cli_accelerators_and_models(capsys):
    assert main(["catalog", "accelerators", "--filter", "bf16>=900,memory>=100", "--json"]) == 0
    accs = json.loads(capsys.readouterr().out)
    assert {a["id"] for a in accs} >= {"H200", "B200", "MI300X"}
    assert all(a["peak_tflops"]["bf16"] >= 900 and a["memory_gib"] >= 100 for a in accs)
    assert main(["catalog", "accelerators", "--sort", "memory", "--desc", "--csv", "--limit", "2"]) == 0
    assert len(list(csv.DictReader(io.StringIO(capsys.readouterr().out)))) == 2
    assert main(["catalog", "models", "--json"]) == 0
    json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv", [
    ["catalog", "instances", "--filter", "colour=red"],
    ["catalog", "instances", "--sort", "cost"],
    ["catalog", "instances", "--limit", "-1"],
    ["catalog", "accelerators", "--filter", "bf16>fast"],
    ["catalog", "models", "--sort", "size"],
    ["--catalog-dir", "/nonexistent/dir", "catalog", "instances"],
])
def test_cli_bad_input_exits_2_with_message(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleet-tui: error: ") and "Traceback" not in err


def test_cli_validate_exit_codes(tmp_path, capsys):
    assert main(["catalog", "validate"]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[accelerator]]\nid = "Q"\nvendor = "X"\nsoftware_stack = "CUDA"\nmemory_gib = -4\n')
    assert main(["catalog", "validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"{bad}:5: accelerator[0].memory_gib: ")
    assert main(["catalog", "validate", str(tmp_path / "missing.toml")]) == 2


def test_cli_validate_includes_user_and_catalog_dir(tmp_path, monkeypatch, capsys):
    user = tmp_path / "xdg" / "fleet-tui" / "catalogs"
    user.mkdir(parents=True)
    (user / "broken.toml").write_text("[[instance]\n")
    assert main(["catalog", "validate"]) == 2
    assert "broken.toml:1: syntax:" in capsys.readouterr().out
    (user / "broken.toml").unlink()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "x.toml").write_text('meta.cloud = "c"\ninstance = [\n  {instance_type = "a", region = "r", '
                                  'accelerator = "H100", accelerator_count = 1},\n]\n')
    assert main(["--catalog-dir", str(extra), "catalog", "validate"]) == 2
    assert "x.toml:3: instance[0].on_demand_usd_per_hour: missing price" in capsys.readouterr().out


@pytest.mark.parametrize("kw, words", [
    (dict(max_usd_per_hour=-5), "maximum $/hour -5: must be at least 0"),
    (dict(min_memory_gib=float("nan")), "minimum GiB per device nan"),
    (dict(count=0), "device count 0: must be more than 0"),
])
def test_impossible_numeric_filters_are_explained_not_answered_with_nothing(kw, words):
    # A negative price limit used to return "0 offers" with no word of why.
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.catalog.query import query_instances

    with pytest.raises(UserError) as err:
        query_instances(load_catalog(), **kw)
    assert words in str(err.value)


def test_cheapest_setup_rents_whole_instances_and_charges_idle_devices():
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.catalog.setup_cost import cheapest_setup

    cat = load_catalog()
    one = cheapest_setup(cat, "H100", 1, tokens_per_s=1000.0)
    two = cheapest_setup(cat, "H100", 2, tokens_per_s=1000.0)
    eight = cheapest_setup(cat, "H100", 8)
    # brute force over the catalog: the cheapest total for 2 devices, whole boxes only
    totals = [i.price("on-demand") * math.ceil(2 / i.accelerator_count) for i in cat.instances
              if i.accelerator == "H100" and i.price("on-demand") is not None]
    assert two.usd_per_hour == pytest.approx(min(totals))
    assert two.instances * two.instance.accelerator_count - 2 == two.idle_devices >= 0
    assert one.usd_per_hour <= two.usd_per_hour <= eight.usd_per_hour
    assert one.usd_per_month == pytest.approx(one.usd_per_hour * 730)
    assert one.usd_per_million_tokens == pytest.approx(one.usd_per_hour / 3.6)
    assert eight.usd_per_million_tokens is None  # no speed, no per-token cost
    assert cheapest_setup(cat, "H100", 1, pricing="spot").usd_per_hour <= one.usd_per_hour
    with pytest.raises(UserError):
        cheapest_setup(cat, "H1OO", 1)


@pytest.mark.parametrize("listing", ["instances", "accelerators", "models"])
def test_each_listings_filter_example_works_on_the_bundled_catalog(listing, capsys):
    # 'catalog models --help' once showed an instances example (cloud=aws,...) that models reject.
    import argparse
    import re

    from fleet_tui.cli import build_parser

    def sub(parser, name):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices[name]

    helptext = sub(sub(build_parser(), "catalog"), listing).format_help()
    example = re.search(r"\(e\.g\.\s+([^)]+)\)", helptext).group(1).replace("\n", "").replace(" ", "")
    assert main(["catalog", listing, "--filter", example, "--json"]) == 0
    assert json.loads(capsys.readouterr().out), example
