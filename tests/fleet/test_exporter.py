"""fleet-tui export --prometheus: the metrics, loopback rule, and the Grafana dashboard's queries run
against a real Prometheus that scrapes the exporter."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet_tui.cli import main
from fleet_tui.core.errors import UserError
from fleet_tui.core.exporter import FleetExporter, check_bind
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from tests.fleet.promserver import PrometheusServer, wait_until
from tests.signals import default_sigint

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "fleet-tui.grafana.json"
GIB = 1024**3


class FixedSource(Source):
    kind = "fleet"

    def __init__(self):
        self.t = 1000.0

    async def sample(self) -> Snapshot:
        self.t += 1.0
        devs = (
            DeviceSnapshot(index=0, name="H100", uuid="GPU-a", node="n1", timestamp=self.t,
                           gpu_util_pct=0.0, sm_active_pct=0.0, mem_used_bytes=GIB,
                           mem_total_bytes=80 * GIB),
            DeviceSnapshot(index=1, name="H100", uuid="GPU-b", node="n1", timestamp=self.t,
                           gpu_util_pct=100.0, sm_active_pct=95.0, tensor_active_pct=80.0,
                           dram_active_pct=20.0, mem_used_bytes=70 * GIB, mem_total_bytes=80 * GIB),
            DeviceSnapshot(index=0, name="H100", uuid="GPU-c", node="n2", timestamp=self.t - 500,
                           state="unavailable", age_s=500.0, error="no data for 500 s"),
        )
        return Snapshot(timestamp=self.t, source="fixed", source_kind="fleet", devices=devs,
                        errors=("n2: exporter 10.0.0.2:9400 is down (up == 0)",))


def scrape(port: int, timeout: float = 5) -> dict[str, list]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                  timeout=timeout).read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(body):
        out.setdefault(fam.name, [])  # families without samples (no alert held) count too
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_loopback_by_default():
    check_bind("127.0.0.1", False)
    check_bind("::1", False)
    check_bind("localhost", False)
    with pytest.raises(UserError, match="allow_remote") as err:  # the CLI renders --allow-remote
        check_bind("0.0.0.0", False)
    assert err.value.fields == ("bind", "allow_remote")
    check_bind("0.0.0.0", True)


def test_cli_refuses_remote_bind_and_missing_format(capsys):
    assert main(["export", "--prometheus", "--bind", "0.0.0.0", "--source",
                 "prometheus:http://127.0.0.1:9"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert main(["export", "--source", "prometheus:http://127.0.0.1:9"]) == 2
    assert "--prometheus" in capsys.readouterr().err


def test_exported_metrics_carry_diagnoses_costs_and_staleness():
    exporter = FleetExporter(FixedSource(), instance_prices={"*": 10.0}, interval_s=0.2)
    port = exporter.start("127.0.0.1", 0)
    try:
        wait_until(lambda: exporter.collector.refreshes >= 3, 10, what="3 refreshes")
        m = scrape(port)
    finally:
        exporter.stop()
    primary = {(lab["node"], lab["gpu"]): lab["kind"]
               for lab, v in m["fleet_tui_device_primary_diagnosis"]}
    assert primary == {("n1", "0"): "idle", ("n1", "1"): "healthy_compute", ("n2", "0"): "stale"}
    kinds = {(lab["node"], lab["gpu"], lab["kind"]) for lab, v in m["fleet_tui_diagnosis"]}
    assert ("n1", "0", "idle") in kinds and ("n2", "0", "stale") in kinds
    cost = {(lab["node"], lab["gpu"]): v for lab, v in m["fleet_tui_device_cost_usd_per_hour"]}
    assert cost[("n1", "0")] == pytest.approx(5.0) and cost[("n2", "0")] == pytest.approx(10.0)
    fleet = {name: samples[0][1] for name, samples in m.items() if name.startswith("fleet_tui_fleet")}
    assert fleet["fleet_tui_fleet_cost_usd_per_hour"] == pytest.approx(20.0)
    assert fleet["fleet_tui_fleet_idle_cost_usd_per_hour"] == pytest.approx(5.0)
    assert fleet["fleet_tui_fleet_idle_devices"] == 1 and fleet["fleet_tui_fleet_stale_devices"] == 1
    age = {(lab["node"]): v for lab, v in m["fleet_tui_device_data_age_seconds"]}
    assert age["n2"] == pytest.approx(500.0)
    # the idle-dollars counter integrates $5/h over the simulated seconds between refreshes
    assert m["fleet_tui_idle_cost_usd_total"][0][1] > 0
    assert m["fleet_tui_source_up"][0][1] == 1.0


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def test_dashboard_uses_only_exported_metric_names():
    exporter = FleetExporter(FixedSource(), instance_prices={"*": 10.0}, interval_s=0.2)
    port = exporter.start("127.0.0.1", 0)
    try:
        wait_until(lambda: exporter.collector.refreshes >= 2, 10, what="2 refreshes")
        names = set(scrape(port))
    finally:
        exporter.stop()
    used = {n for e in dashboard_exprs() for n in re.findall(r"fleet_tui_[a-z_]+", e)}
    assert used and used <= names, used - names


@pytest.mark.prometheus
def test_dashboard_queries_run_on_a_real_prometheus_scraping_the_exporter(fleet16):
    _, fleet_prom = fleet16
    exporter = FleetExporter(PrometheusSource(fleet_prom.url, env={}), instance_prices={"*": 20.0},
                             interval_s=1.0)
    port = exporter.start("127.0.0.1", 0)
    prom = PrometheusServer([f"127.0.0.1:{port}"], job="fleet-tui")
    try:
        prom.start()
        wait_until(lambda: prom.query("fleet_tui_fleet_devices"), 30, what="exporter scraped")
        wait_until(lambda: prom.query("fleet_tui_device_primary_diagnosis{kind!=\"unknown\"}"), 30,
                   what="diagnoses exported")
        devices = prom.query("fleet_tui_fleet_devices")[0]["value"][1]
        assert float(devices) == 32
        empty = []
        for expr in dashboard_exprs():
            q = expr.replace("$job", ".*").replace("$__rate_interval", "1m")
            result = prom.query(q)  # raises on a PromQL error
            if not result:
                empty.append(expr)
        # may be empty: alerts and stale devices (none here), increase() (needs 2 scrapes)
        assert all(
            "alert_active" in e or "device_stale" in e or "increase(" in e for e in empty), empty
        assert len(empty) < len(dashboard_exprs()) // 2
    finally:
        prom.close()
        exporter.stop()


def test_held_alert_rules_are_exported_as_active():
    from fleet_tui.core.monitor.alerts import AlertRule

    rule = AlertRule(name="memory-high", severity="warning", duration_s=0.0, cooldown_s=3600.0,
                     metric="mem_used_pct", op=">", threshold=85.0)
    exporter = FleetExporter(FixedSource(), interval_s=0.2, alert_rules=[rule])
    port = exporter.start("127.0.0.1", 0)
    try:
        # fired once (cooldown 1 h) but held on every refresh: the gauge stays up
        wait_until(lambda: exporter.collector.refreshes >= 3, 10, what="3 refreshes")
        m = scrape(port)
    finally:
        exporter.stop()
    active = [(lab["rule"], lab["node"], lab["gpu"], lab["severity"])
              for lab, v in m["fleet_tui_alert_active"]]
    assert active == [("memory-high", "n1", "1", "warning")]  # 70 of 80 GiB; GPU 0 holds 1 GiB


def test_export_command_serves_and_stops_on_ctrl_c():
    """The real command in its own process: serves /metrics, exits cleanly on SIGINT.

    It waits for the command's own readiness line (a first refresh is on /metrics) instead of
    polling /metrics against a clock: on a loaded machine the child's first refresh (imports, a
    backfill and a reading, five requests to a fake served by this busy process) took longer
    than the polling allowed, and a scrape timed out while the child held its GIL."""
    import os
    import signal
    import subprocess
    import sys

    from tests.fleet.test_faults import FakePrometheus

    fake = FakePrometheus()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet_tui", "export", "--prometheus", "--port", "0",
         "--interval", "0.5", "--node-price", "10", "--timeout", "60",
         "--source", f"prometheus:{fake.url}"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "FLEET_TUI_PROM_TOKEN": ""}, preexec_fn=default_sigint)
    try:
        line = proc.stderr.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line).group(1))
        ready = proc.stderr.readline()  # the readiness signal: blocks until it is true
        assert "first refresh published: 1 devices on 1 nodes (source read)" in ready, ready
        metrics = scrape(port, timeout=60)
        assert metrics["fleet_tui_fleet_devices"][0][1] == 1
        assert metrics["fleet_tui_fleet_cost_usd_per_hour"][0][1] == pytest.approx(10.0)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) in (0, 130)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stderr.close()
        fake.close()


@pytest.mark.prometheus
def test_source_up_follows_a_prometheus_outage(small_fleet):
    """The last devices stay on show through an outage, but fleet_tui_source_up says 0."""
    _, prom = small_fleet
    source = PrometheusSource(prom.url, env={}, timeout_s=1.0, min_backoff_s=0.2,
                              max_backoff_s=0.4)
    exporter = FleetExporter(source, interval_s=0.2)
    port = exporter.start("127.0.0.1", 0)

    def up_is(value):
        return lambda: scrape(port)["fleet_tui_source_up"][0][1] == value

    try:
        wait_until(up_is(1.0), 20, what="source_up 1")
        prom.stop()
        wait_until(up_is(0.0), 20, what="source_up 0 during the outage")
        assert scrape(port)["fleet_tui_fleet_devices"][0][1] == 2  # last data still shown
        prom.start()
        wait_until(up_is(1.0), 30, what="source_up 1 after the restart")
    finally:
        exporter.stop()
