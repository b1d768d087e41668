"""Hourly demand from a Prometheus range answer (core.cluster.promdemand)."""

from __future__ import annotations

import pytest

from fleet_tui.core.cluster.promdemand import demand_from_matrix, demand_query, read_demand
from fleet_tui.core.errors import UserError


def test_hours_without_a_sample_inside_the_span_are_zero_and_leading_ones_dropped():
    start = 1_000_000.0
    matrix = [{"metric": {}, "values": [[start + 2 * 3600, "8"], [start + 3 * 3600, "6"],
                                        [start + 5 * 3600, "NaN"], [start + 6 * 3600, "7"]]}]
    assert demand_from_matrix(matrix, start, start + 6 * 3600) == [8, 6, 0, 0, 7]
    assert demand_from_matrix([], start, start + 3600) == []


def test_query_counts_busy_devices_of_both_vendors():
    q = demand_query(5)
    assert "DCGM_FI_DEV_GPU_UTIL|gpu_gfx_activity" in q and q.endswith(">= 5)")
    assert "[1h]" in q and q.startswith("count(max by (")


def test_read_demand_checks_the_source_and_the_span():
    class Fake:
        spec = "prometheus:http://x"

        def __init__(self):
            self.asked = None

        def query_range(self, query, start, end, step):
            self.asked = (start, end, step)
            return [{"metric": {}, "values": [[end - 3600, "3"], [end, "4"]]}]

    fake = Fake()
    assert read_demand(fake, days=2, now=100 * 3600.0) == [3, 4]
    assert fake.asked == (100 * 3600.0 - 47 * 3600, 100 * 3600.0, 3600.0)
    with pytest.raises(UserError, match="--days 0"):
        read_demand(fake, days=0, now=0.0)
    with pytest.raises(UserError, match="only a prometheus:URL"):
        read_demand(object(), days=1, now=0.0)
