"""``fleet-tui jobs`` on a real Prometheus scraping a 16-node fleet whose exporters carry job labels:
dcgm-exporter's ``hpc_job`` (jobs spanning two nodes), Kubernetes ``pod``/``namespace``, Princeton
jobstats' ``nvidia_gpu_jobId``/``nvidia_gpu_jobUid`` gauges, and idle GPUs without a job.

Each GPU replays one constant frame of the H200 trace, so its utilization is known exactly and a
job's mean utilization can be asserted to the percent."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from fleet_tui.cli import main
from tests.fleet.dcgm_replay import NodeSpec, ReplayFleet, load_frames, phase_runs
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until
from tests.ui.drawn import ViewsDrawn

pytestmark = pytest.mark.prometheus

N_NODES, GPUS = 16, 2


@dataclass
class JobNode(NodeSpec):
    """A node whose exporter labels each GPU's series with the job holding it."""

    hpc_jobs: list = field(default_factory=list)  # per GPU: job id or None
    pods: list = field(default_factory=list)  # per GPU: (namespace, pod) or None
    jobstats: dict = field(default_factory=dict)  # GPU -> (job id, uid): jobstats' gauges

    def render(self, frames):
        text = super().render(frames)
        for gpu in range(len(frames)):
            extra = ""
            if gpu < len(self.hpc_jobs) and self.hpc_jobs[gpu]:
                extra += f'hpc_job="{self.hpc_jobs[gpu]}",'
            if gpu < len(self.pods) and self.pods[gpu]:
                ns, pod = self.pods[gpu]
                extra += f'pod="{pod}",namespace="{ns}",container="main",'
            text = text.replace(f'{{gpu="{gpu}",', f'{{gpu="{gpu}",{extra}')
        for gpu, (job, uid) in self.jobstats.items():
            labels = f'minor_number="{gpu}",name="NVIDIA H200",uuid="{self.uuid(gpu)}"'
            text += f"nvidia_gpu_jobId{{{labels}}} {job}\nnvidia_gpu_jobUid{{{labels}}} {uid}\n"
        return text


def _plan():
    runs = phase_runs(load_frames())
    frame = {k: runs[k][len(runs[k]) // 2] for k in ("idle", "compute_bound", "launch_bound",
                                                      "input_starved")}
    # node -> (per GPU phase, per GPU hpc_job); style rotates the dcgm-exporter label variants
    nodes = []
    for i in range(N_NODES):
        phases, jobs, pods, jobstats = ["idle", "idle"], [None, None], [None, None], {}
        if i in (0, 1):  # one job across two nodes, busy
            phases, jobs = ["compute_bound"] * 2, ["4242", "4242"]
        elif i in (2, 3):  # one job across two nodes: half its GPUs idle
            phases = ["idle", "idle"] if i == 2 else ["launch_bound", "launch_bound"]
            jobs = ["4243", "4243"]
        elif i == 4:  # a one-GPU job beside an idle GPU without a job
            phases, jobs = ["input_starved", "idle"], ["4244", None]
        elif i == 5:  # jobstats' exporter names the job by gauges
            phases, jobstats = ["compute_bound", "launch_bound"], {0: (777, 65534), 1: (777, 65534)}
        elif i == 6:  # a Kubernetes pod
            phases, pods = ["launch_bound", "idle"], [("team-a", "trainer-0")] * 2
        elif 7 <= i <= 11:  # one busy job per node
            phases, jobs = ["compute_bound"] * 2, [f"50{i:02d}"] * 2
        # 12-15: idle GPUs without a job
        nodes.append(JobNode(hostname=f"node-{i:02d}", gpus=[[frame[p]] for p in phases],
                             offsets=[0] * GPUS,
                             label_style=("Hostname", "hostname", "uuid-old")[i % 3],
                             hpc_jobs=jobs, pods=pods, jobstats=jobstats))
    return nodes, frame


@pytest.fixture(scope="module")
def job_fleet():
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    nodes, frame = _plan()
    fleet = ReplayFleet(nodes)
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == N_NODES * GPUS
                   and len(prom.query("nvidia_gpu_jobId")) == 2, 30,
                   what="every exporter to be scraped")
        yield fleet, prom, frame
    finally:
        prom.close()
        fleet.close()


def _jobs(capsys, prom, *extra):
    assert main(["jobs", "--source", f"prometheus:{prom.url}", "--window", "3", "--json",
                 *extra]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_jobs_json_counts_devices_and_means_utilization(job_fleet, capsys):
    _, prom, frame = job_fleet
    data = _jobs(capsys, prom, "--node-price", "20")
    jobs = {j["job"]: j for j in data["jobs"]}
    util = {k: f.gpu_util_pct for k, f in frame.items()}
    assert set(jobs) == {"4242", "4243", "4244", "777", "team-a/trainer-0",
                         *(f"50{i:02d}" for i in range(7, 12))}
    want = {"4242": (4, util["compute_bound"], ["node-00", "node-01"]),
            "4243": (4, (util["idle"] + util["launch_bound"]) / 2, ["node-02", "node-03"]),
            "4244": (1, util["input_starved"], ["node-04"]),
            "777": (2, (util["compute_bound"] + util["launch_bound"]) / 2, ["node-05"]),
            "team-a/trainer-0": (2, (util["launch_bound"] + util["idle"]) / 2, ["node-06"])}
    for job, (devices, mean_util, nodes) in want.items():
        assert (jobs[job]["devices"], jobs[job]["nodes"]) == (devices, nodes), job
        assert jobs[job]["util_pct"] == pytest.approx(mean_util, abs=0.01), job
    assert jobs["4242"]["via"] == "hpc_job" and jobs["777"]["via"] == "exporter"
    assert jobs["777"]["user"] == "nobody"  # uid 65534 from nvidia_gpu_jobUid
    assert jobs["team-a/trainer-0"]["user"] == "team-a" and jobs["team-a/trainer-0"]["via"] == "kubernetes"
    # 4243 holds two idle GPUs: it is the worst job, and the only one with idle dollars beside the pod
    assert data["jobs"][0]["job"] == "4243"
    assert jobs["4243"]["idle_device_hours"] > 0 and jobs["4243"]["usd_idle"] > 0
    assert jobs["4242"]["idle_device_hours"] == 0 and jobs["4242"]["primary"] == "healthy_compute"
    # idle GPUs without a job are capacity, reported apart: node-04 gpu1 and nodes 12-15
    assert data["unattributed"]["devices"] == 1 + 2 * 4
    assert data["unattributed"]["idle_devices"] == 1 + 2 * 4
    assert data["unattributed"]["usd_idle_per_hour"] == pytest.approx(9 * 10.0)
    for j in data["jobs"]:  # the JSON contract
        assert {"job", "user", "nodes", "devices", "util_pct", "idle_device_hours", "usd_idle",
                "primary"} <= set(j)


def test_jobs_user_filter_report_and_table(job_fleet, capsys):
    _, prom, _ = job_fleet
    data = _jobs(capsys, prom, "--user", "team-a")
    assert [j["job"] for j in data["jobs"]] == ["team-a/trainer-0"]
    assert main(["jobs", "report", "4243", "--source", f"prometheus:{prom.url}",
                 "--window", "3"]) == 0
    out = capsys.readouterr().out
    assert "Job 4243" in out and "4 GPUs on 2 node(s): node-02, node-03" in out
    assert "What to change:" in out
    assert main(["jobs", "--source", f"prometheus:{prom.url}", "--window", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["job", "user", "nodes", "gpus"]
    assert "9 devices without a job (9 idle" in out
    assert main(["jobs", "report", "nope", "--source", f"prometheus:{prom.url}",
                 "--window", "3"]) == 2
    assert "no job 'nope' holds a device" in capsys.readouterr().err


async def test_jobs_pane_worst_first_and_report_at_80x24(job_fleet, monkeypatch, tmp_path):
    from textual.widgets import DataTable, Static

    from fleet_tui.ui.launch import AppConfig, build_app

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    # a user job rule: 2 idle GPUs of one job, at once (only job 4243 holds two idle GPUs)
    (tmp_path / "config" / "fleet-tui").mkdir(parents=True)
    (tmp_path / "config" / "fleet-tui" / "alerts.toml").write_text(
        '[[rule]]\nname = "job-idle-now"\ndiagnosis = "idle"\nmin_devices = 2\nduration = 0\n')
    _, prom, _ = job_fleet
    app = build_app(AppConfig(source=f"prometheus:{prom.url}", interval_s=0.5))
    app.animation_level = "none"
    notified, notify = [], app.notify
    app.notify = lambda message, **kw: (notified.append(message), notify(message, **kw))[1]
    drawn = ViewsDrawn()
    async with app.run_test(size=(80, 24), message_hook=drawn.hook) as pilot:
        assert app.current_mode == "fleet"
        await pilot.press("6")
        screen = app.screen
        assert screen.MODE == "jobs"
        table = screen.query_one("#jobs-table", DataTable)
        await drawn.until(lambda: table.row_count == 10)  # ten job rows
        assert str(table.rows and list(table.rows)[0].value) == "4243"  # two idle GPUs: worst
        # at 80 columns the essential columns are on screen
        visible = " ".join(str(line.text) for line in [table.render_line(0)])
        for header in ("job", "user", "gpus", "util", "idle $"):
            assert header in visible, (header, visible)
        # the job alert (notified from the worker right after its view is drawn)
        await drawn.until(lambda: any("job 4243: 2 of its 4 devices idle" in m for m in notified))
        assert not any("job team-a" in m for m in notified)
        table.focus()
        await pilot.press("enter")  # the report is drawn at once
        assert "Job 4243" in str(screen.query_one("#jobs-report-text", Static).render())
        assert "What to change" in str(screen.query_one("#jobs-report-text", Static).render())
        await pilot.press("escape")
        assert screen.report_job is None and not screen.has_class("-report")


def test_plan_from_the_fleets_prometheus_history(job_fleet, capsys):
    _, prom, _ = job_fleet
    assert main(["plan", "--source", f"prometheus:{prom.url}", "--days", "1",
                 "--on-demand-price", "16", "--reserved-1y-price", "10",
                 "--devices-per-instance", "2", "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    # GPUs that worked (util >= 1%) this hour: nodes 0-1, 3, 5, 7-11 whole, node-04 and node-06 GPU 0
    assert doc["hours"] == 1 and doc["peak_devices"] == 20
    assert main(["plan", "--source", "sim:2", "--on-demand-price", "1"]) == 2
    assert "prometheus:URL only" in capsys.readouterr().err


async def test_plan_pane_from_the_fleets_history(job_fleet, monkeypatch, tmp_path):
    from textual.widgets import Static

    from fleet_tui.ui.launch import AppConfig, build_app
    from tests.ui.conftest import wait_for

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _, prom, _ = job_fleet
    app = build_app(AppConfig(source=f"prometheus:{prom.url}", interval_s=0.5,
                              instance="p5.48xlarge"))
    app.animation_level = "none"
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.catalog is not None, "the catalog")
        await pilot.press("7")
        screen = app.screen
        assert screen.MODE == "plan"
        await wait_for(pilot, lambda: screen.doc is not None, "the plan")
        assert screen.doc["peak_devices"] == 20 and screen.doc["hours"] == 1
        text = str(screen.query_one("#plan-text", Static).render())
        assert "peak 20" in text and "p5.48xlarge" in text and "saved" in text
