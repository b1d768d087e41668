"""A fleet past ``--aggregate-above`` end to end on a real Prometheus: the source switches to the
server's roll-ups, and the view, ``fleet`` and ``jobs`` show what the per-device path shows of the
same data (a lowered threshold keeps the fleet small: 16 nodes × 2 GPUs with ``hpc_job`` labels,
each GPU replaying one constant H200-trace frame, so both reads see the same readings)."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from fleet_tui.core.fleet import FleetView, read_node_view
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from tests.fleet.dcgm_replay import ReplayFleet
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until
from tests.fleet.test_jobs_prometheus import GPUS, N_NODES, _plan

pytestmark = pytest.mark.prometheus

PRICE = 20.0  # $/h of one node


@pytest.fixture(scope="module")
def job_fleet():
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    nodes, _frame = _plan()
    fleet = ReplayFleet(nodes)
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == N_NODES * GPUS, 30,
                   what="every exporter to be scraped")
        yield fleet, prom
    finally:
        prom.close()
        fleet.close()


def _views(prom):
    """The same fleet read both ways: aggregated (threshold 8 < 32 GPUs) and device by device."""
    agg_src = PrometheusSource(prom.url, env={}, timeout_s=10, aggregate_above=8)
    dev_src = PrometheusSource(prom.url, env={}, timeout_s=10, aggregate_above=10_000)
    agg_snap, dev_snap = agg_src.sample_blocking(), dev_src.sample_blocking()
    assert not agg_snap.errors and not dev_snap.errors
    assert agg_snap.aggregate is not None and not agg_snap.devices
    assert dev_snap.aggregate is None and len(dev_snap.devices) == N_NODES * GPUS
    assert agg_src.aggregated and not dev_src.aggregated
    assert agg_src.device_total == dev_src.device_total == N_NODES * GPUS
    prices = {"*": PRICE}
    return (agg_src, FleetView.from_snapshot(agg_snap, None, prices),
            FleetView.from_snapshot(dev_snap, None, prices))


def test_aggregated_view_equals_the_per_device_view(job_fleet):
    _, prom = job_fleet
    _src, agg, dev = _views(prom)
    assert agg.aggregated and not dev.aggregated
    assert agg.device_count == dev.device_count == N_NODES * GPUS
    assert agg.node_count == dev.node_count == N_NODES
    assert agg.idle_devices == dev.idle_devices
    assert 0 < agg.idle_devices < agg.device_count  # the plan holds both
    assert agg.utilization_pct == pytest.approx(dev.utilization_pct)
    assert agg.idle_usd_per_hour == pytest.approx(dev.idle_usd_per_hour)
    assert agg.usd_per_hour == pytest.approx(dev.usd_per_hour)
    for n in dev.nodes:
        a = agg.node(n.node)
        assert not a.devices and a.device_count == n.device_count == GPUS
        assert a.idle_devices == n.idle_devices, n.node
        assert a.mean_gpu_util_pct == pytest.approx(n.mean_gpu_util_pct), n.node
        assert a.power_w == pytest.approx(n.power_w), n.node
        assert a.mem_used_pct == pytest.approx(n.mem_used_pct, abs=0.01), n.node
        assert a.idle_usd_per_hour == pytest.approx(n.idle_usd_per_hour), n.node
    # the least-used devices: the same utilizations in the same order, each one a real device
    # with that utilization
    by_util = sorted(dev.offenders, key=lambda d: d.gpu_util_pct or 0.0)
    assert [d.gpu_util_pct for d in agg.offenders] == [d.gpu_util_pct for d in by_util]
    util_of = {(d.node, d.uuid): d.gpu_util_pct for d in dev.offenders}
    assert all(util_of[(d.node, d.uuid)] == d.gpu_util_pct for d in agg.offenders)
    assert [d.idle for d in agg.offenders] == [d.idle for d in by_util]
    # the JSON says how it was read
    doc = agg.to_dict()
    assert doc["aggregated"] is True and doc["aggregate"]["on_server"] is True
    assert doc["aggregate"]["threshold_devices"] == 8
    assert dev.to_dict()["aggregated"] is False


def test_aggregated_jobs_equal_the_per_device_jobs(job_fleet, capsys):
    _, prom = job_fleet
    _src, agg, _dev = _views(prom)
    assert main(["jobs", "--source", f"prometheus:{prom.url}", "--window", "3", "--json",
                 "--aggregate-above", "10000"]) == 0
    per_device = {j["job"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    labelled = {k: v for k, v in per_device.items() if v["via"] == "hpc_job"}
    assert len(labelled) >= 4
    assert {j.job for j in agg.jobs} == set(labelled)
    for j in agg.jobs:
        want = labelled[j.job]
        assert j.devices == want["devices"], j.job
        assert j.util_pct == pytest.approx(want["util_pct"], abs=0.01), j.job
        assert j.nodes == len(want["nodes"]), j.job
    # the command on the aggregated fleet gives the same jobs
    assert main(["jobs", "--source", f"prometheus:{prom.url}", "--json", "--node-price",
                 str(PRICE), "--aggregate-above", "8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["aggregated"] is True and doc["threshold_devices"] == 8
    assert {j["job"]: (j["devices"], j["idle_devices"]) for j in doc["jobs"]} == {
        j.job: (j.devices, j.idle_devices) for j in agg.jobs}
    idle_job = next(j for j in doc["jobs"] if j["idle_devices"])
    assert idle_job["idle_usd_per_hour"] == pytest.approx(idle_job["idle_devices"] * PRICE / GPUS)
    assert doc["unattributed_devices"] == N_NODES * GPUS - sum(j["devices"] for j in doc["jobs"])
    assert main(["jobs", "--source", f"prometheus:{prom.url}", "--aggregate-above", "8"]) == 0
    out = capsys.readouterr().out
    assert "aggregated on the server" in out and idle_job["job"] in out


def test_drill_down_reads_one_node(job_fleet):
    _, prom = job_fleet
    src, agg, dev = _views(prom)
    node = agg.nodes[0].node  # the worst node
    detail = read_node_view(src, node, {"*": PRICE})
    assert not detail.aggregated and detail.node_count == 1
    mine, want = detail.node(node), dev.node(node)
    assert [d.uuid for d in mine.devices] == [d.uuid for d in want.devices]
    assert [d.gpu_util_pct for d in mine.devices] == [d.gpu_util_pct for d in want.devices]
    assert [d.power_w for d in mine.devices] == [d.power_w for d in want.devices]
    assert all(d.name.startswith("NVIDIA") and d.power_limit_w for d in mine.devices)
    assert mine.usd_per_hour == pytest.approx(PRICE)


def test_fleet_command_aggregated(job_fleet, capsys):
    _, prom = job_fleet
    src = f"prometheus:{prom.url}"
    assert main(["fleet", "--source", src, "--window", "0", "--json", "--aggregate-above",
                 "8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["aggregated"] is True and doc["fleet"]["devices"] == N_NODES * GPUS
    assert len(doc["nodes"]) == N_NODES and all("device_list" not in n for n in doc["nodes"])
    worst = doc["nodes"][0]["node"]
    assert main(["fleet", "--source", src, "--window", "0", "--aggregate-above", "8"]) == 0
    out = capsys.readouterr().out
    assert "aggregated on the server" in out and "least-used devices" in out
    assert main(["fleet", "--source", src, "--window", "0", "--json", "--aggregate-above", "8",
                 "--node", worst]) == 0
    node = json.loads(capsys.readouterr().out)
    assert node["node"] == worst and len(node["device_list"]) == GPUS
    assert main(["fleet", "--source", src, "--window", "0", "--json", "--node", worst]) == 0
    same = json.loads(capsys.readouterr().out)  # 32 devices: under the default threshold
    assert [d["gpu_util_pct"] for d in node["device_list"]] == [
        d["gpu_util_pct"] for d in same["device_list"]]
    assert main(["fleet", "--source", src, "--aggregate-above", "8", "--node", "nope"]) == 2
    assert "--node nope" in capsys.readouterr().err


def test_threshold_is_checked(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fleet", "--source", "prometheus:http://127.0.0.1:9", "--aggregate-above", "-3"])
    assert exit_.value.code == 2 and "--aggregate-above" in capsys.readouterr().err
    monkeypatch.setenv("FLEET_TUI_AGGREGATE_ABOVE", "lots")
    assert main(["fleet", "--source", "prometheus:http://127.0.0.1:9"]) == 2
    assert "FLEET_TUI_AGGREGATE_ABOVE=lots" in capsys.readouterr().err
    monkeypatch.setenv("FLEET_TUI_AGGREGATE_ABOVE", "²")  # a digit to str.isdigit, not to int
    assert main(["fleet", "--source", "prometheus:http://127.0.0.1:9"]) == 2
    assert "FLEET_TUI_AGGREGATE_ABOVE=²" in capsys.readouterr().err
    monkeypatch.setenv("FLEET_TUI_AGGREGATE_ABOVE", "12")
    assert PrometheusSource("http://127.0.0.1:9").aggregate_above == 12
    assert PrometheusSource("http://127.0.0.1:9", aggregate_above=3).aggregate_above == 3


def test_aggregated_jobs_take_slurms_user_by_job_id(job_fleet):
    from fleet_tui.core.cluster.slurm import SlurmJob

    _, prom = job_fleet
    _src, agg, _dev = _views(prom)
    slurm = [SlurmJob(job="4242", user="alice", state="RUNNING", account="phys",
                      partition="gpu", nodes=("node-00", "node-01"), gpus=4),
             # an array task: the hpc_job label holds its raw id
             SlurmJob(job="11_0", job_raw="4243", user="bob", state="RUNNING", account="chem",
                      partition="gpu", nodes=("node-02", "node-03"), gpus=4)]
    rows = {j["job"]: j for j in agg.jobs_dict(slurm)}
    assert (rows["4242"]["user"], rows["4242"]["account"]) == ("alice", "phys")
    assert (rows["4243"]["user"], rows["4243"]["state"]) == ("bob", "RUNNING")
    assert rows["4244"]["user"] is None  # a label Slurm does not run
    assert [j["job"] for j in agg.jobs_dict(slurm, user="bob")] == ["4243"]
    assert [j["job"] for j in agg.jobs_dict(slurm, account="phys")] == ["4242"]
    assert agg.jobs_dict(slurm, user="carol") == []


def test_unreachable_prometheus_keeps_the_last_rollups(small_fleet):
    fleet, prom = small_fleet
    src = PrometheusSource(prom.url, env={}, timeout_s=2, aggregate_above=1)
    first = src.sample_blocking()
    assert first.aggregate is not None and first.aggregate.device_count == 2
    fleet.kill(1)  # an exporter down: its node's device is stale, its exporter named
    wait_until(lambda: (s := src.sample_blocking()).aggregate is not None
               and s.aggregate.stale_devices == 1, 30, what="the dead exporter's device stale")
    snap = src.sample_blocking()
    view = FleetView.from_snapshot(snap, None, None)
    assert view.stale_devices == 1 and view.device_count == 2
    assert any("is down (up == 0)" in e for e in snap.errors)
    stale = [n for n in view.nodes if n.stale_devices]
    assert len(stale) == 1 and stale[0].errors  # the node carries its exporter's error
    prom.close()
    later = src.sample_blocking()
    assert later.aggregate is snap.aggregate  # the last roll-ups, said to be old
    assert any("unreachable" in e for e in later.errors)
    assert any("showing the roll-ups read" in e for e in later.errors)


def test_monitor_once_says_the_fleet_is_aggregated(job_fleet, monkeypatch, capsys):
    _, prom = job_fleet
    monkeypatch.setenv("FLEET_TUI_AGGREGATE_ABOVE", "8")  # how the app and monitor take it
    assert main(["monitor", "--once", "--source", f"prometheus:{prom.url}"]) == 0
    out = capsys.readouterr().out
    assert f"aggregated on the server: {N_NODES * GPUS} devices on {N_NODES} nodes" in out
    assert main(["monitor", "--once", "--json", "--source", f"prometheus:{prom.url}"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["devices"] == [] and doc["fleet"]["aggregated"] is True
    assert doc["fleet"]["fleet"]["devices"] == N_NODES * GPUS
