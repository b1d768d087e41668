"""The real ``fleet-tui`` in a real terminal (tmux) on a fleet past its threshold: a real
Prometheus scraping replaying exporters, ``FLEET_TUI_AGGREGATE_ABOVE`` lowered so 8 GPUs count as a
large fleet; the Fleet pane says it is aggregated on the server and a drill-down shows one node's
devices."""

from __future__ import annotations

import shlex
import shutil
import sys

import pytest

from tests.e2e.test_tmux import ROOT, Tmux
from tests.fleet.dcgm_replay import ReplayFleet, make_nodes
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

pytestmark = [pytest.mark.tmux, pytest.mark.prometheus,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
              pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed")]

NODES, GPUS = 4, 2


def test_fleet_pane_on_an_aggregated_fleet(tmp_path):
    fleet = ReplayFleet(make_nodes(NODES, GPUS))
    prom = PrometheusServer(fleet.targets)
    tmux = Tmux(tmp_path)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == NODES * GPUS, 30,
                   what="every exporter to be scraped")
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
               "PYTHONPATH": str(ROOT), "FLEET_TUI_AGGREGATE_ABOVE": "4"}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} "
                   f"{shlex.quote(sys.executable)} -m fleet_tui --source "
                   f"{shlex.quote('prometheus:' + prom.url)}; echo FLEET_EXIT=$?; sleep 60")
        tmux.run("new-session", "-d", "-s", tmux.name, "-x", "160", "-y", "45", command)
        tmux.run("resize-window", "-t", tmux.name, "-x", "160", "-y", "45")
        tmux.keys("5")
        screen = tmux.wait_for("aggregated on the server", "more than 4 devices", f"{NODES} nodes",
                               timeout=90)
        assert f"{NODES * GPUS} devices" in screen and "Least-used devices" in screen
        tmux.keys("d")  # the node table has the focus: drill into the worst node
        screen = tmux.wait_for("Node ", f"{GPUS} devices · util", timeout=60)
        assert "#0" in screen and "#1" in screen
        tmux.keys("q")
        tmux.wait_for("FLEET_EXIT=0", timeout=30)
    finally:
        tmux.run("kill-server")
        prom.close()
        fleet.close()
