"""Fixtures: a replaying DCGM-format fleet on 127.0.0.1 and a real Prometheus scraping it every 1 s."""

from __future__ import annotations

import pytest

from tests.fleet.dcgm_replay import ReplayFleet, make_nodes
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

N_NODES = 16
GPUS_PER_NODE = 2


def pytest_collection_modifyitems(config, items):
    if PROMETHEUS is not None:
        return
    skip = pytest.mark.skip(reason="the prometheus server binary is not installed "
                                   "(apt-get install prometheus; .ci/run installs it)")
    for item in items:
        if "prometheus" in item.keywords:
            item.add_marker(skip)


def start_fleet_and_prometheus(n_nodes: int, gpus: int, **node_kw):
    """Start exporters and Prometheus, wait until every target has been scraped once; the caller
    must close both (``fleet.close(); prom.close()``) even on failure."""
    fleet = ReplayFleet(make_nodes(n_nodes, gpus, **node_kw))
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == n_nodes * gpus, 30,
                   what="every exporter to be scraped")
    except BaseException:
        prom.close()
        fleet.close()
        raise
    return fleet, prom


@pytest.fixture(scope="session")
def fleet16():
    """16 nodes × 2 GPUs replaying the H200 trace's phases, scraped by one real Prometheus."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    fleet, prom = start_fleet_and_prometheus(N_NODES, GPUS_PER_NODE)
    try:
        yield fleet, prom
    finally:
        prom.close()
        fleet.close()


@pytest.fixture
def small_fleet():
    """2 nodes × 1 GPU with their own Prometheus, for tests that break things."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    fleet, prom = start_fleet_and_prometheus(2, 1)
    try:
        yield fleet, prom
    finally:
        prom.close()
        fleet.close()
