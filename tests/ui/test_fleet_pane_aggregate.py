"""The Fleet and Jobs panes on a fleet aggregated on the server (a real Prometheus, a lowered
threshold): the roll-ups are drawn and said to be the server's, and a drill-down reads one node."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from tests.fleet.dcgm_replay import ReplayFleet, make_nodes
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until
from tests.ui.conftest import wait_for

pytestmark = [pytest.mark.prometheus,
              pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed")]

NODES, GPUS = 6, 2


@pytest.fixture(scope="module")
def prom():
    fleet = ReplayFleet(make_nodes(NODES, GPUS))
    server = PrometheusServer(fleet.targets)
    try:
        server.start()
        wait_until(lambda: len(server.query("DCGM_FI_DEV_GPU_UTIL")) == NODES * GPUS, 30,
                   what="every exporter to be scraped")
        yield server
    finally:
        server.close()
        fleet.close()


class CountingSource(PrometheusSource):
    """The real source, counting the one-node reads a drill-down makes."""

    node_reads: list[str]

    def read_node(self, node: str):
        self.node_reads.append(node)
        return super().read_node(node)


async def test_fleet_pane_draws_the_servers_rollups_and_drills_into_one_node(make_app, prom):
    source = CountingSource(prom.url, env={}, timeout_s=10, aggregate_above=4)
    source.node_reads = []
    app = make_app(source="sim:1", interval=0.5,
                   overrides=dict(source=source, source_spec=source.spec, start_mode="fleet"))
    async with app.run_test(size=(150, 45)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.view is not None, "the first fleet view", steps=2400)
        view = screen.view
        assert view.aggregated and view.device_count == NODES * GPUS
        summary = str(screen.query_one("#fleet-summary", Static).render())
        assert "aggregated on the server" in summary and "more than 4 devices" in summary
        table = screen.query_one("#fleet-nodes", DataTable)
        assert table.row_count == NODES
        assert [table.get_row_at(i)[0] for i in range(NODES)] == [n.node for n in view.nodes]
        assert [table.get_row_at(i)[1] for i in range(NODES)] == [str(GPUS)] * NODES
        side = str(screen.query_one("#fleet-side-text", Static).render())
        worst = view.offenders[0]
        assert f"{worst.node}/#{worst.index}" in side
        assert source.node_reads == []  # nothing read per device until the user drills
        table.focus()
        await pilot.press("d")
        node = screen.drill_node
        assert node == view.nodes[0].node
        await wait_for(pilot, lambda: screen.node_read is not None, "the node's devices",
                       steps=2400)
        assert source.node_reads[0] == node and set(source.node_reads) == {node}
        detail = screen.node_read[1]
        assert detail is not None and len(detail.node(node).devices) == GPUS
        text = str(screen.query_one("#fleet-side-text", Static).render())
        assert f"{GPUS} devices" in text and "#0" in text and "#1" in text
        assert screen.query_one("#fleet-side").border_title == f"Node {node}"
        await pilot.press("escape")
        assert screen.drill_node is None and screen.node_read is None
        # the Jobs pane: the server's per-job roll-ups (this fleet has no job labels: none)
        await pilot.press("6")
        await wait_for(pilot, lambda: app.current_mode == "jobs"
                       and getattr(app.screen, "aggregated", None) is not None,
                       "the jobs pane on the aggregated fleet", steps=2400)
        jobs_summary = str(app.screen.query_one("#jobs-summary", Static).render())
        assert "aggregated on the server" in jobs_summary
        assert f"{NODES * GPUS} GPUs without a job" in jobs_summary
