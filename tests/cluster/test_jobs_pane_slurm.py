"""The Jobs pane asks Slurm when told to (``--slurm``) or when ``squeue`` is on PATH: a CPU-only
job does not take a node's GPUs, array tasks show as ``J_T``, pending jobs and the partitions'
demand are in the summary, and a stale job label loses to Slurm's allocation with the conflict
shown. Slurm's answers are the recorded ``squeue``/``sinfo --json`` of Debian's
22.05.8 (tests/cluster/data/README.md), served by stand-in commands on PATH; its ``scontrol``
refuses ``--json`` as 22.05 does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ui.conftest import make_app  # noqa: F401 - the fixture
from tests.ui.drawn import ViewsDrawn
from tests.ui.fleet_fake import SimFleetSource

DATA = Path(__file__).parent / "data"


@pytest.fixture
def slurm_on_path(tmp_path, monkeypatch):
    for name, data in (("squeue", "squeue_slurm_22_05_8_debian.json"),
                       ("sinfo", "sinfo_slurm_22_05_8_debian.json")):
        text = (DATA / data).read_text().replace('"gn1"', '"node-00"').replace('"gn2"', '"node-01"')
        (tmp_path / data).write_text(text)
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\ncat {tmp_path / data}\n")
        script.chmod(0o755)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho \"scontrol: unrecognized option '--json'\" >&2\nexit 1\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


async def _drawn(make_app, slurm):
    source = SimFleetSource(nodes=2, devices_per_node=4)
    app = make_app(source="sim:1", interval=0.25, slurm=slurm,
                   overrides=dict(source=source, source_spec=source.name, start_mode="jobs"))
    return app


@pytest.mark.parametrize("slurm", [True, None])  # --slurm, and squeue found on PATH
async def test_jobs_pane_reads_slurm(make_app, slurm_on_path, slurm):  # noqa: F811
    app = await _drawn(make_app, slurm)
    drawn = ViewsDrawn()
    async with app.run_test(size=(160, 40), message_hook=drawn.hook) as pilot:
        screen = app.screen
        for _ in range(3):  # the first views may come before the engine has diagnosed
            await drawn.next()
        await pilot.pause()
        report = screen.report
        assert report.slurm
        jobs = {j.job: j for j in report.running.jobs}
        assert set(jobs) == {"2_0", "2_1"}  # job 1 (CPU-only) holds none of node-00's GPUs
        assert sorted(d.index for d in jobs["2_1"].devices) == [2, 3]
        assert all(j.via == "slurm" and j.user == "ftbob" for j in jobs.values())
        assert not any(d.node == "node-00" for d in report.running.unattributed)
        summary = str(screen.query_one("#jobs-summary").render())
        assert "pending: 3 jobs, 10 GPUs" in summary and "Priority 1" in summary
        assert "gpu: " in summary


async def test_jobs_pane_without_slurm(make_app, slurm_on_path):  # noqa: F811
    app = await _drawn(make_app, False)
    drawn = ViewsDrawn()
    async with app.run_test(size=(160, 40), message_hook=drawn.hook):
        screen = app.screen
        await drawn.next()
        assert not screen.report.slurm and screen.report.running.jobs == ()


class _LabelledFleet(SimFleetSource):
    """The simulated fleet with a Prometheus-like job-label answer: node-00's GPU 0 carries a
    stale ``hpc_job`` naming job 1 (the CPU-only job), which Slurm gives to task 2_0."""

    def query_instant(self, query: str) -> list[dict]:
        return [{"metric": {"Hostname": "node-00", "gpu": "0", "hpc_job": "1"},
                 "value": [0, "1"]}]


async def test_jobs_pane_shows_slurm_winning_over_a_stale_label(make_app, slurm_on_path):  # noqa: F811
    source = _LabelledFleet(nodes=2, devices_per_node=4)
    app = make_app(source="sim:1", interval=0.25, slurm=True,
                   overrides=dict(source=source, source_spec=source.name, start_mode="jobs"))
    drawn = ViewsDrawn()
    async with app.run_test(size=(160, 40), message_hook=drawn.hook) as pilot:
        screen = app.screen
        for _ in range(3):
            await drawn.next()
        await pilot.pause()
        running = screen.report.running
        task = {j.job: j for j in running.jobs}["2_0"]
        assert ("node-00", 0) in {(d.node, d.index) for d in task.devices}  # Slurm's allocation
        assert [(c.node, c.index, c.label_job, c.slurm_job) for c in running.conflicts] == [
            ("node-00", 0, "1", "2_0")]
        summary = str(screen.query_one("#jobs-summary").render())
        assert "conflict: node-00 GPU 0: label says job 1, Slurm allocates it to job 2_0" in summary


@pytest.mark.prometheus
async def test_jobs_pane_on_an_aggregated_fleet_joins_slurms_allocations(make_app,  # noqa: F811
                                                                       slurm_on_path):
    """The same recorded Slurm over a real Prometheus whose fleet is past a lowered threshold:
    the pane reads the GPUs of Slurm's allocations (node-00, shared by 2_0 and 2_1: device by
    device) and shows the head-node report, not the hpc_job roll-ups."""
    from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
    from tests.fleet.dcgm_replay import NodeSpec, ReplayFleet, load_frames, phase_runs
    from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until
    from tests.ui.conftest import wait_for

    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    idle = phase_runs(load_frames())["idle"][10]
    fleet = ReplayFleet([NodeSpec(hostname=f"node-0{i}", gpus=[[idle]] * 4, offsets=[0] * 4)
                         for i in range(2)])
    prom = PrometheusServer(fleet.targets)
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 8, 30, what="the exporters")
        source = PrometheusSource(prom.url, env={}, timeout_s=10, aggregate_above=0)
        app = make_app(source="sim:1", interval=0.5, slurm=True,
                       overrides=dict(source=source, source_spec=source.spec, start_mode="jobs"))
        async with app.run_test(size=(160, 40)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.report is not None and screen.report.slurm,
                           "the head-node report", steps=2400)
            running = screen.report.running
            jobs = {j.job: j for j in running.jobs}
            assert set(jobs) == {"2_0", "2_1"}
            assert sorted(d.index for d in jobs["2_1"].devices) == [2, 3]
            assert all(j.via == "slurm" and j.user == "ftbob" for j in jobs.values())
            assert all(d.idle_fraction == 1.0 for j in jobs.values() for d in j.devices)
            summary = str(screen.query_one("#jobs-summary").render())
            assert "aggregated on the server" in summary and "read device by device" in summary
            assert "pending: 3 jobs, 10 GPUs" in summary
    finally:
        prom.close()
        fleet.close()
