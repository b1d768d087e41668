"""The server-side roll-ups of a large fleet agree with the per-device view of the same instant."""

from __future__ import annotations

import time

import pytest

from fleet_tui.core.fleet import IDLE_UTIL_MAX_PCT
from fleet_tui.core.monitor.sources.prometheus import (
    PrometheusClient,
    build_query,
    decoded_rows,
    devices_from_groups,
    group_classified,
    parse_envelope,
)
from fleet_tui.core.monitor.sources.prometheus.aggregate import (
    POWER_CAP_BITS,
    THERMAL_BITS,
    build_aggregate_query,
    build_node_query,
    read_fleet_aggregate,
)
from tests.fleet.conftest import start_fleet_and_prometheus

pytestmark = pytest.mark.prometheus


def _devices_at(client: PrometheusClient, query: str, at: float):
    body = client.get("/api/v1/query", {"query": query, "time": f"{at:.3f}"}, post=True)
    groups, _up = group_classified(decoded_rows(parse_envelope(body)))
    return devices_from_groups(groups, timestamp=at)


def _idle(d) -> bool:
    util, sm = d.gpu_util_pct, d.sm_active_pct
    return util is not None and util < IDLE_UTIL_MAX_PCT and (sm is None or sm < IDLE_UTIL_MAX_PCT)


@pytest.fixture(scope="module")
def fleet8():
    fleet, prom = start_fleet_and_prometheus(8, 2)
    try:
        yield fleet, prom
    finally:
        prom.close()
        fleet.close()


def test_aggregate_agrees_with_per_device_view(fleet8):
    _fleet, prom = fleet8
    client = PrometheusClient(prom.url, env={}, timeout_s=10)
    at = time.time()  # one instant for both reads (every target already scraped)
    devices = _devices_at(client, build_query(), at)
    agg = read_fleet_aggregate(client, worst=len(devices), at=at)

    assert agg.device_count == len(devices) == 16
    per_node: dict[str, list] = {}
    for d in devices:
        per_node.setdefault(d.node, []).append(d)
    assert {n.node for n in agg.nodes} == set(per_node)
    for n in agg.nodes:
        mine = per_node[n.node]
        assert n.devices == len(mine)
        assert n.idle_devices == sum(_idle(d) for d in mine)
        assert n.util_pct == pytest.approx(sum(d.gpu_util_pct or 0.0 for d in mine) / len(mine))
    assert agg.idle_devices == sum(_idle(d) for d in devices)
    assert 0 < agg.idle_devices < len(devices)  # the replayed phases hold both

    # the worst devices: the same utilizations in the same order, the worst one the same device
    by_util = sorted(devices, key=lambda d: d.gpu_util_pct or 0.0)
    assert [w.util_pct for w in agg.worst] == [d.gpu_util_pct for d in by_util]
    lowest = {(d.node, d.uuid) for d in devices if d.gpu_util_pct == by_util[0].gpu_util_pct}
    assert (agg.worst[0].node, agg.worst[0].uuid) in lowest

    # a smaller page is the head of the same ranking
    few = read_fleet_aggregate(client, worst=3, at=at)
    assert [w.util_pct for w in few.worst] == [d.gpu_util_pct for d in by_util[:3]]

    # the fleet-wide diagnosis inputs count the same devices as the readings
    full = sum(1 for d in devices if d.mem_total_bytes and d.mem_used_bytes is not None
               and d.mem_used_bytes / d.mem_total_bytes >= 0.95)
    assert agg.counts["mem_full"] == full
    # and the throttled ones, by their clock-event reason bits (the replayed trace power-caps)
    assert agg.counts["power_capped"] > 0
    for count, bits in (("power_capped", POWER_CAP_BITS), ("thermal", THERMAL_BITS)):
        mask = sum(bits)
        assert agg.counts[count] == sum(1 for d in devices
                                        if (d.clock_event_reasons or 0) & mask), count


@pytest.mark.parametrize("node", ["node-00", "node-01", "node-03"])  # Hostname, hostname, none
def test_drill_down_reads_one_node_in_full(fleet8, node):
    _fleet, prom = fleet8
    client = PrometheusClient(prom.url, env={}, timeout_s=10)
    at = time.time()
    everyone = _devices_at(client, build_query(), at)
    if node == "node-03":  # no host label: the node is its scrape instance, as the reader names it
        node = sorted({d.node for d in everyone if not d.node.startswith("node-")})[0]
    devices = [d for d in _devices_at(client, build_node_query(node), at) if d.node == node]
    mine = [d for d in everyone if d.node == node]
    assert len(devices) == 2
    assert [d.uuid for d in devices] == [d.uuid for d in mine]
    assert [d.gpu_util_pct for d in devices] == [d.gpu_util_pct for d in mine]
    assert [d.sm_active_pct for d in devices] == [d.sm_active_pct for d in mine]
    assert [d.power_w for d in devices] == [d.power_w for d in mine]


def test_node_name_is_checked():
    with pytest.raises(ValueError, match="node name"):
        build_node_query('a"} or up{x="')
    assert build_aggregate_query(7).count("bottomk(7,") == 1
