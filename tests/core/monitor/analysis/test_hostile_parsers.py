"""Every reader of user files, fed arbitrary JSON values, text and bytes: a result or an error
naming the file (a ``UserError``), never another exception and never an endless loop (hypothesis,
bounded examples)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_tui.core.cluster.joblists import load_workload, parse_csv, parse_sacct_json, parse_swf
from fleet_tui.core.cluster.portfolio import read_demand
from fleet_tui.core.cluster.whatif import simulate_all
from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.source import SourceUnavailable

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

numbers = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, -1, 1e9, 1e308, 1.7e18]))
values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["set", "number", "infinite", "count",
                                                             "type", "name", "x"]), inner,
                                            max_size=3)),
    max_leaves=8)


def _dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True)  # NaN and Infinity, as some exporters write them


@SETTINGS
@given(st.lists(st.fixed_dictionaries({}, optional={
    "job_id": values, "user": values,
    "time": st.one_of(values, st.fixed_dictionaries({}, optional={
        k: values for k in ("submission", "start", "end", "limit")})),
    "tres": st.one_of(values, st.fixed_dictionaries({}, optional={
        "allocated": st.one_of(values, st.lists(st.fixed_dictionaries({
            "type": st.just("gres"), "name": st.just("gpu"), "count": values}), max_size=2)),
        "requested": values})),
    "priority": values}), max_size=4))
def test_sacct_json_of_any_shape_is_read_or_refused_by_line(records):
    try:
        jobs, _ = parse_sacct_json(_dumps({"jobs": records}), "s.json")
    except UserError as exc:
        assert str(exc).startswith("s.json:")
        return
    for job in jobs:
        assert all(math.isfinite(v) for v in (job.submit_s, job.run_s, job.requested_s, job.priority))
    if jobs:
        simulate_all(jobs, 2, 8, ["fifo", "backfill"])  # steps: no NaN time to loop on


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(["1", "-1", "0", "inf", "nan", "1e308", "x", "60", "4",
                                          "1e20", ""]), min_size=1, max_size=20), max_size=4))
def test_swf_and_csv_lines_of_any_content_are_read_or_refused_by_line(rows):
    text = "\n".join(" ".join(r) for r in rows)
    for parse, body in ((parse_swf, text),
                        (parse_csv, "job,user,submit_s,run_s,gpus\n" + text.replace(" ", ","))):
        try:
            jobs, _ = parse(body, "j.txt")
        except UserError as exc:
            assert str(exc).startswith("j.txt:")
            continue
        for job in jobs:
            assert math.isfinite(job.submit_s + job.run_s + job.requested_s)


@SETTINGS
@given(st.one_of(values, st.lists(numbers, max_size=5), st.binary(max_size=64)))
def test_a_demand_profile_of_any_content_is_read_or_refused(tmp_path, content):
    path = tmp_path / "demand.txt"
    path.write_bytes(content if isinstance(content, bytes) else _dumps(content).encode())
    try:
        demand = read_demand(path)
    except UserError as exc:
        assert str(path) in str(exc)
        return
    assert all(0 <= d <= 1e6 for d in demand)


@SETTINGS
@given(st.lists(st.one_of(values, st.fixed_dictionaries({"kind": st.just("sample"), "t": numbers},
                                                         optional={"gpu_util": values,
                                                                   "power_mw": values})),
                min_size=1, max_size=4))
def test_a_trace_of_any_lines_is_analyzed_or_refused_by_line(tmp_path, lines):
    from fleet_tui.core.monitor.analysis.readings import RawReadings
    from fleet_tui.core.monitor.analysis.stream import analyze_readings
    from fleet_tui.core.monitor.trace import TraceReader

    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(_dumps(x) for x in lines) + "\n")
    for read in (lambda: list(TraceReader(path)),
                 lambda: list(analyze_readings(RawReadings(path), window_s=5.0))):
        try:
            read()
        except SourceUnavailable as exc:
            assert str(path) in str(exc)


def test_load_workload_refuses_what_is_not_a_file(tmp_path):
    for bad in ("/dev/zero", str(tmp_path)):
        try:
            load_workload(bad)
        except UserError as exc:
            assert bad in str(exc)
        else:
            raise AssertionError(bad)


TOML_VALUES = ["1e12", "1e-300", "nan", "inf", "-inf", '"8"', "[1, 2]", "{ a = 1 }", "true", "0",
               "-1", "9" * 400, "8", "8.0", "1e308", "1_000_000", "0x10"]


@SETTINGS
@given(st.dictionaries(st.sampled_from(["accelerator_count", "accelerator_memory_gib", "vcpus",
                                        "ram_gib", "zones", "on_demand_usd_per_hour",
                                        "spot_usd_per_hour", "reserved_1y_usd_per_hour"]),
                       st.sampled_from(TOML_VALUES), max_size=5))
def test_a_catalog_row_of_any_values_is_loaded_or_a_located_problem(tmp_path, fields):
    from fleet_tui.core.catalog.validation import read_catalog_file

    row = {"accelerator_count": "8", "on_demand_usd_per_hour": "10.0", **fields}
    body = ", ".join(f"{k} = {v}" for k, v in row.items())
    path = tmp_path / "instances" / "aws.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text('instance = [\n  {cloud = "aws", instance_type = "odd.1", region = "r", '
                    f'accelerator = "H100", {body}}},\n]\n')
    result = read_catalog_file(path)
    assert all(p.startswith(str(path)) for p in result.problems), result.problems
    if not result.problems:
        for _, offer in result.rows:
            assert 0 < offer["accelerator_count"] <= 65536
            price = offer.get("on_demand_usd_per_hour")
            assert price is None or 1e-5 <= price <= 1e6
