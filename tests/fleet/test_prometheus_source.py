"""PrometheusSource: parsing rules on canned API answers, then readings through a real Prometheus."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.sources.prometheus import (
    PrometheusResponseError,
    PrometheusSource,
    build_query,
    decoded_rows,
    devices_from_groups,
    group_series,
    parse_envelope,
    parse_value,
    split_classified,
)
from tests.fleet.dcgm_replay import COMPARED_FIELDS, expected_device
from tests.fleet.promserver import wait_until

MIB = 1024 * 1024


def series(metric_name, value, **labels):
    return {"metric": {"__name__": metric_name, **labels}, "value": [1000.0, str(value)]}


# -- parsing rules (no server) -------------------------------------------------------------------
def _compact(result, **extra) -> bytes:
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}, **extra}
    return json.dumps(doc, separators=(",", ":")).encode()


def devices_of(result: list, *, timestamp: float):
    """An instant-vector result as the source's backfill reads each step: grouped per device
    (group_series), then snapshots (devices_from_groups)."""
    groups, up = group_series(result)
    return devices_from_groups(groups, timestamp=timestamp), up


def test_compact_answers_are_cut_like_json_and_the_rest_refused():
    """The source's hot path (split_classified) reads a compact answer as the JSON path does, and
    refuses (None: decode as JSON) anything it cannot cut exactly."""
    result = [
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="0", UUID="GPU-a", Hostname="n{1}", err="a},b"),
        {"metric": {}, "value": [1000.5, "NaN"]},
        series("up", 1, instance="10.0.0.1:9400", job="x"),
    ]
    cache: dict = {}
    rows = split_classified(_compact(result, warnings=["a {warning}"]), cache)
    assert rows is not None and len(rows) == 3
    assert rows == decoded_rows(result)
    assert len(cache) == 3  # each label text classified once, kept for the next refresh
    body = _compact(result)
    assert split_classified(body[:-3], {}) is None  # truncated
    assert split_classified(body.replace(b'"50"', b'50'), {}) is None  # a value not a string
    assert split_classified(_compact([series("up", 1, instance='a"b')]), {}) is None  # escapes
    assert split_classified(json.dumps(json.loads(body)).encode(), {}) is None  # not compact
    assert split_classified(_compact([]), {}) is None  # nothing to split: json.loads is as quick
    assert split_classified(b'{"status":"error","errorType":"bad_data","error":"x"}', {}) is None


# Label values that try to break the hand cut: the separators it splits on, braces, quotes,
# backslashes, control and non-ASCII characters, alongside the real label names it classifies.
_TRICKY = st.lists(st.sampled_from(list('ab0{}[],:"\\ \n\u00e9\u2603')
                                   + ['},"value":[', '"]}', '{"metric":{', ',"']),
                   max_size=6).map("".join)
_LABELS = st.dictionaries(
    st.sampled_from(["__name__", "gpu", "UUID", "Hostname", "hostname", "instance", "job",
                     "device", "modelName", "x"]),
    st.one_of(st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "up", "0", "1",
                               "GPU-a", "node-1:9400"]), _TRICKY), max_size=6)
_SERIES = st.builds(lambda labels, ts, value: {"metric": labels, "value": [ts, value]}, _LABELS,
                    st.floats(0, 2e9, allow_nan=False), st.sampled_from(["1", "NaN", "9.2e18", "-3.5"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_SERIES, min_size=1, max_size=6))
def test_split_classified_agrees_with_json_or_declines(result):
    # The fast cut must give exactly what decoding the answer as JSON gives, or return None so the
    # caller decodes it as JSON; it must never return something different.
    body = _compact(result)
    fast = split_classified(body, {})
    if fast is not None:
        assert fast == decoded_rows(json.loads(body)["data"]["result"])
    if b"\\" not in body:  # only escapes send an answer to the JSON path
        assert fast is not None


def _serve(bodies: list[bytes]):
    """A one-route server answering every query with ``bodies[0]`` (tests swap it)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", str(len(bodies[0])))
            self.end_headers()
            self.wfile.write(bodies[0])

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_a_scrape_seen_again_keeps_its_reading_and_only_ages():
    """Between scrapes the same reading comes back: the device (violation rate included) stays as
    it was, with its age moved on; a new scrape is read afresh."""
    lab = dict(gpu="0", UUID="GPU-a", Hostname="n1", instance="10.0.0.1:9400")

    def answer(sample_t, violation_ns, util):
        probe = {"metric": {**lab, "fleet_tui_probe": "nvidia"}, "value": [1.0, str(sample_t)]}
        return _compact([series("DCGM_FI_DEV_GPU_UTIL", util, **lab),
                         series("DCGM_FI_DEV_POWER_VIOLATION", violation_ns, **lab), probe])

    bodies = [answer(100.0, 0, 40)]
    now = [101.0]
    srv = _serve(bodies)
    try:
        src = PrometheusSource(f"http://127.0.0.1:{srv.server_address[1]}", env={},
                               clock=lambda: now[0], static_every_s=1e9)
        first = src.sample_blocking().devices[0]
        bodies[0], now[0] = answer(110.0, 5e9, 60), 111.0  # 5 s throttled in 10 s
        second = src.sample_blocking().devices[0]
        now[0] = 113.0  # same scrape again
        third_snap = src.sample_blocking()
        third = third_snap.devices[0]
        bodies[0], now[0] = answer(120.0, 5e9, 70), 121.0
        fourth = src.sample_blocking().devices[0]
    finally:
        srv.shutdown()
        srv.server_close()
    assert first.gpu_util_pct == 40 and second.gpu_util_pct == 60
    assert dict(second.extra)["power_violation_frac"] == pytest.approx(0.5)
    assert second.clock_event_reasons == 0x4  # derived: power cap active
    # the same reading handed on (not copied), its age in the snapshot moved on
    assert third is second and second.age_s == pytest.approx(1.0)
    assert third_snap.age_of(third) == pytest.approx(3.0)
    assert fourth.gpu_util_pct == 70 and dict(fourth.extra)["power_violation_frac"] == 0.0
    assert fourth.clock_event_reasons == 0


def test_source_reads_compact_and_spaced_answers_alike():
    """The split fast path (compact answers) and the JSON path give the same devices."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    lab = dict(gpu="1", UUID="GPU-a", Hostname="n1", instance="10.0.0.1:9400")
    result = [series("DCGM_FI_DEV_GPU_UTIL", 50, **lab), series("DCGM_FI_DEV_FB_USED", 1024, **lab),
              series("DCGM_FI_DEV_FB_FREE", 3072, **lab), series("up", 1, instance="10.0.0.1:9400"),
              series("DCGM_FI_DEV_POWER_USAGE", "9223372036854775794", **lab)]
    bodies = {"compact": _compact(result),
              "spaced": json.dumps({"status": "success",
                                    "data": {"resultType": "vector", "result": result}}).encode()}
    mode = ["compact"]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = bodies[mode[0]]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        got = {}
        for m in bodies:
            mode[0] = m
            src = PrometheusSource(f"http://127.0.0.1:{srv.server_address[1]}", env={},
                                   clock=lambda: 1000.0)
            got[m] = [src.sample_blocking(), src.sample_blocking()]  # 2nd: label cache warm
    finally:
        srv.shutdown()
        srv.server_close()
    (dev,) = got["compact"][0].devices
    assert dev.gpu_util_pct == 50 and dev.mem_total_bytes == 4096 * MIB and dev.power_w is None
    assert dev.index == 1 and dev.node == "n1"
    assert got["compact"][0].devices == got["compact"][1].devices == got["spaced"][0].devices


def test_blank_sentinels_nan_and_junk_are_not_readings():
    assert parse_value("9223372036854775794") is None  # DCGM int64 blank
    assert parse_value("9.223372036854776e+18") is None
    assert parse_value("NaN") is None and parse_value("+Inf") is None
    assert parse_value("garbage") is None and parse_value(None) is None
    assert parse_value("97") == 97.0 and parse_value("-3.5") == -3.5


def test_label_variants_name_node_uuid_and_index():
    result = [
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="0", UUID="GPU-a", Hostname="n1", modelName="H100",
               instance="10.0.0.1:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", 60, gpu="1", uuid="GPU-b", hostname="n2",
               instance="10.0.0.2:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", 70, gpu="3", UUID="GPU-c", instance="10.0.0.3:9400"),
        series("DCGM_FI_DEV_GPU_TEMP", 9223372036854775794, gpu="0", UUID="GPU-a", Hostname="n1",
               instance="10.0.0.1:9400"),
    ]
    devices, _ = devices_of(result, timestamp=1000.0)
    by_node = {d.node: d for d in devices}
    assert set(by_node) == {"n1", "n2", "10.0.0.3:9400"}  # instance when no host label
    assert by_node["n1"].uuid == "GPU-a" and by_node["n1"].name == "H100"
    assert by_node["n1"].temp_c is None  # blank sentinel
    assert by_node["n2"].uuid == "GPU-b" and by_node["n2"].index == 1
    assert by_node["10.0.0.3:9400"].index == 3 and by_node["10.0.0.3:9400"].gpu_util_pct == 70


def test_dcgm_units_become_snapshot_units():
    lab = dict(gpu="0", UUID="GPU-a", Hostname="n1")
    result = [
        series("DCGM_FI_DEV_FB_USED", 1024, **lab), series("DCGM_FI_DEV_FB_FREE", 3072, **lab),
        series("DCGM_FI_PROF_SM_ACTIVE", 0.25, **lab),
        series("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.5, **lab),
        series("DCGM_FI_DEV_POWER_USAGE", 350.5, **lab),
        series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 4, **lab),
        series("DCGM_FI_DEV_XID_ERRORS", 79, **lab),
        series("up", 1, instance="x:9400", job="dcgm"),
    ]
    groups, up = group_series(result)
    devices, _ = devices_of(result, timestamp=1000.0)
    (d,) = devices
    assert up == {"x:9400": 1.0}
    assert d.mem_used_bytes == 1024 * MIB and d.mem_total_bytes == 4096 * MIB
    assert d.sm_active_pct == pytest.approx(25.0) and d.tensor_active_pct == pytest.approx(50.0)
    assert d.power_w == 350.5 and d.throttle_reasons == ("power_cap",)
    assert d.xid_errors == (79,) and d.gpm_supported is True


def test_gaudi_and_neuron_series_become_devices():
    result = [
        series("habanalabs_utilization", 40, index="2", uuid="01P4", Hostname="g1",
               name="HL-325L"),
        series("habanalabs_power_mW", 226000, index="2", uuid="01P4", Hostname="g1"),
        series("habanalabs_memory_used_bytes", 672 * MIB, index="2", uuid="01P4", Hostname="g1"),
        series("neuroncore_utilization_ratio", 0.5, neuroncore="0", instance="trn:8000"),
        series("neuroncore_utilization_ratio", 0.25, neuroncore="1", instance="trn:8000"),
    ]
    devices, _ = devices_of(result, timestamp=1.0)
    gaudi = next(d for d in devices if d.vendor == "intel")
    assert (gaudi.node, gaudi.index, gaudi.name) == ("g1", 2, "HL-325L")
    assert gaudi.power_w == pytest.approx(226.0) and gaudi.gpu_util_pct == 40
    assert gaudi.mem_used_bytes == 672 * MIB
    cores = sorted((d.index, d.gpu_util_pct) for d in devices if d.vendor == "aws")
    assert cores == [(0, 50.0), (1, 25.0)]
    # with neuron_hardware_info saying 2 cores per device, the cores fold into one device
    result.append({"metric": {"__name__": "neuron_hardware_info", "instance": "trn:8000",
                              "neuroncore_per_device_count": "2"}, "value": [1.0, "1"]})
    devices, _ = devices_of(result, timestamp=1.0)
    (neuron,) = [d for d in devices if d.vendor == "aws"]
    assert neuron.gpu_util_pct == pytest.approx(37.5)


def test_violation_counters_give_throttle_bits_when_no_reason_mask():
    src = PrometheusSource("http://127.0.0.1:9")
    lab = dict(gpu="0", UUID="GPU-a", Hostname="n1")
    ts = [1000.0]

    def result(ns):
        return [series("DCGM_FI_DEV_POWER_VIOLATION", ns, **lab),
                {"metric": {**lab, "fleet_tui_probe": "nvidia"}, "value": [ts[0], str(ts[0])]}]

    groups, up = group_series(result(0))
    first = src._merge(1000.0, groups, up)
    assert first.devices[0].clock_event_reasons == 0  # no rate from one reading
    ts[0] = 1010.0
    groups, up = group_series(result(5e9))  # 5 s throttled out of 10 s
    second = src._merge(1010.0, groups, up)
    d = second.devices[0]
    assert dict(d.extra)["power_violation_frac"] == pytest.approx(0.5)
    assert d.throttle_reasons == ("power_cap",)


@pytest.mark.parametrize("body, fragment", [
    (b"<html>502 Bad Gateway</html>", "not JSON"),
    (b'{"status": "error", "errorType": "bad_data", "error": "parse error"}', "bad_data"),
    (b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', "matrix"),
    (b"[1, 2]", "not an API object"),
])
def test_garbage_envelopes_are_named(body, fragment):
    with pytest.raises(PrometheusResponseError, match=fragment):
        parse_envelope(body)


def test_url_and_credentials():
    with pytest.raises(SourceUnavailable, match="http:// or https://"):
        PrometheusSource("localhost:9090")
    src = PrometheusSource("http://alice:s3cret@127.0.0.1:9090/prom/")
    assert src.url == "http://127.0.0.1:9090/prom" and "s3cret" not in src.spec
    assert src.client.auth_header.startswith("Basic ")
    env = {"FLEET_TUI_PROM_TOKEN": "tok"}
    assert PrometheusSource("http://127.0.0.1:1", env=env).client.auth_header == "Bearer tok"
    env = {"FLEET_TUI_PROM_USER": "u", "FLEET_TUI_PROM_PASSWORD": "p"}
    assert PrometheusSource("http://127.0.0.1:1", env=env).client.auth_header.startswith("Basic ")
    assert PrometheusSource("http://127.0.0.1:1", env={}).client.auth_header is None
    assert PrometheusSource("https://127.0.0.1:1", env={}).verify_tls is True
    insecure = PrometheusSource("https://127.0.0.1:1", env={"FLEET_TUI_PROM_INSECURE": "1"})
    assert insecure.verify_tls is False


def test_query_is_one_request_for_every_mapped_metric():
    q = build_query()
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "habanalabs_power_mW",
                 "neuroncore_utilization_ratio", "up"):
        assert name in q


# -- through a real Prometheus -------------------------------------------------------------------
@pytest.mark.prometheus
def test_readings_match_the_replayed_frames(fleet16):
    fleet, prom = fleet16
    src = PrometheusSource(prom.url, env={})
    snap = asyncio.run(src.sample())
    names = fleet.node_names()
    assert snap.source_kind == "fleet" and not snap.errors and snap.message is None
    assert {d.node for d in snap.devices} == set(names)
    assert len(snap.devices) == 32
    checked = 0
    for d in snap.devices:
        node_i = names[d.node]
        frames = fleet.frames_served_at(node_i, d.timestamp)
        assert frames is not None, f"{d.node}: no exporter answer near {d.timestamp}"
        node = fleet.nodes[node_i]
        want = expected_device(frames[d.index], node=d.node, index=d.index, uuid=node.uuid(d.index))
        assert d.uuid == want.uuid and d.name == "NVIDIA H200" and d.state == "ok"
        if node.label_style == "uuid-old":  # served a DCGM blank sentinel and a NaN
            assert d.slowdown_temp_c is None and d.pstate is None
            want = replace(want, pstate=None)
        else:
            assert d.slowdown_temp_c == 89.0
        for field in COMPARED_FIELDS:
            got, exp = getattr(d, field), getattr(want, field)
            assert got == pytest.approx(exp, rel=1e-9, abs=1e-12), (d.node, d.index, field)
        assert d.age_s is not None and 0 <= d.age_s < 30
        checked += 1
    assert checked == 32


@pytest.mark.prometheus
def test_history_backfill_returns_snapshots_over_time(fleet16):
    fleet, prom = fleet16
    src = PrometheusSource(prom.url, env={})
    # Prometheus holds only what it scraped since the fixture started: wait for 3 s of it
    history = wait_until(lambda: (h := src.history_blocking(4.0, step_s=1.0)) and len(h) >= 3 and h,
                         20, what="3 s of history")
    assert all(len(s.devices) == 32 for s in history[-2:])
    assert [s.timestamp for s in history] == sorted(s.timestamp for s in history)


def test_result_shapes_are_json_round_trippable():
    # the JSON the source gets back is standard; a decoded vector round-trips through parse_envelope
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        series("DCGM_FI_DEV_GPU_UTIL", 1, gpu="0", UUID="GPU-a")]}}).encode()
    assert len(parse_envelope(body)) == 1


def test_old_readings_are_marked_stale_with_their_age():
    """A series Prometheus still returns (within its 5 min lookback) but whose sample is older than
    the stale threshold: shown, marked unavailable, with its age."""
    src = PrometheusSource("http://127.0.0.1:9", env={}, stale_after_s=90)
    lab = dict(gpu="0", UUID="GPU-a", Hostname="n1", instance="n1:9400")
    result = [series("DCGM_FI_DEV_GPU_UTIL", 50, **lab),
              {"metric": {**lab, "fleet_tui_probe": "nvidia"}, "value": [1000.0, "500.0"]},
              series("DCGM_FI_DEV_GPU_UTIL", 60, gpu="0", UUID="GPU-b", Hostname="n2"),
              {"metric": {"gpu": "0", "UUID": "GPU-b", "Hostname": "n2", "fleet_tui_probe": "nvidia"},
               "value": [1000.0, "995.0"]}]
    groups, up = group_series(result)
    snap = src._merge(1000.0, groups, up)
    old, fresh = snap.devices
    assert (old.node, old.state, old.age_s) == ("n1", "unavailable", 500.0)
    assert old.gpu_util_pct == 50 and "no data for 500 s" in old.error
    assert (fresh.state, fresh.age_s) == ("ok", 5.0)
    assert snap.errors == ("n1: no data for 500 s",)



@pytest.mark.prometheus
def test_a_refresh_asks_only_for_the_gpus_scraped_since_the_last(fleet16):
    """After one full read, a refresh reads every GPU's sample time and then the metrics of only
    the GPUs whose sample moved; the devices are the same as a full read's."""
    _, prom = fleet16
    src = PrometheusSource(prom.url, env={})
    full = PrometheusSource(prom.url, env={}, delta_refresh=False)
    counts: list[int] = []
    read = src.query_grouped

    def counting(query, deadline=None, **kw):
        groups, up = read(query, deadline, **kw)
        counts.append(len(up) + sum(1 + len(acc.values or {}) for acc in groups.values()))
        return groups, up

    src.query_grouped = counting
    first = src.sample_blocking()
    n_first = sum(counts)
    counts.clear()
    second = src.sample_blocking()
    reference = full.sample_blocking()
    assert not second.errors and len(second.devices) == len(reference.devices) == 32
    # before: the whole fleet's series every refresh; now the sample times (32 GPUs + 16 `up`),
    # then only the GPUs scraped in between (how many depends on the machine's pace)
    assert counts[0] < n_first / 10 and len(counts) <= 2 and sum(counts) <= n_first
    assert [d.key for d in second.devices] == [d.key for d in reference.devices]
    assert [d.name for d in second.devices] == [d.name for d in reference.devices]
    for d in second.devices:
        assert d.gpu_util_pct is not None and d.mem_total_bytes and d.power_limit_w
    assert {d.key for d in first.devices} == {d.key for d in second.devices}
    time.sleep(1.5)  # every node scraped again: each GPU's metrics come from the second query
    third = src.sample_blocking()
    assert len(third.devices) == 32 and not third.errors
    assert all(d.gpu_util_pct is not None and d.sm_clock_mhz for d in third.devices)
    assert all(d.timestamp > s.timestamp for d, s in zip(third.devices, second.devices))
