"""``--source fleet-replay:demo``: the bundled fleet recording, labelled REPLAY, gives the fleet,
jobs, plan and queue views data on a fresh install (no DCGM fleet, no Slurm)."""

from __future__ import annotations

import json
import time

import pytest
from textual.widgets import DataTable, Input, Static

from fleet_tui.cli import main
from fleet_tui.core.monitor.sources import open_source, parse_source_spec
from fleet_tui.core.monitor.sources.fleet_replay import DEMO_FLEET, load_recording
from tests.ui.conftest import make_app, settle, wait_for  # noqa: F401 - the fixture
from tests.ui.drawn import ViewsDrawn


def test_the_recording_and_its_labels():
    rec = load_recording(DEMO_FLEET)
    assert len(rec["nodes"]) == 32 and rec["gpus_per_node"] == 8 and len(rec["jobs"]) > 100
    src = open_source("fleet-replay:demo")
    assert src.kind == "fleet" and "REPLAY" in src.name
    assert parse_source_spec("fleet-replay:demo@10x").args == {"path": "demo", "speed": 10.0}
    running = src.running_at(src.hours)
    answer = src.query_instant('group by (hpc_job) (DCGM_FI_DEV_GPU_UTIL)')
    assert {(a["metric"]["Hostname"], int(a["metric"]["gpu"])) for a in answer} == set(running)
    assert all(a["metric"]["device"] == f"nvidia{a['metric']['gpu']}" for a in answer)
    # the plan's demand: busy GPUs per hour of the schedule, within the fleet's size
    from fleet_tui.core.cluster.promdemand import read_demand

    demand = read_demand(src, days=7, now=time.time())
    assert len(demand) == 7 * 24 and 0 < max(demand) <= 256


def test_jobs_command_on_the_replay(capsys):
    assert main(["jobs", "--source", "fleet-replay:demo", "--window", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    src = open_source("fleet-replay:demo")
    live = {j.job for j in src.running_at(src.hours).values()}
    assert doc["replay"] is True and {j["job"] for j in doc["jobs"]} == live
    # the recording's own job list names users, accounts and start times
    recorded = {j.job: j for j in src.slurm_jobs()}
    for j in doc["jobs"]:
        r = recorded[j["job"]]
        assert (j["user"], j["account"], j["state"], j["devices"]) == (r.user, r.account,
                                                                       "RUNNING", r.gpus)
        assert j["runtime_s"] == pytest.approx(time.time() - r.start_s, abs=120)
    assert main(["jobs", "--source", "fleet-replay:demo", "--window", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("REPLAY: readings from a recording") and "account" in out


@pytest.mark.parametrize("pane", ["5", "6", "7", "8"])
async def test_panes_5_to_8_have_data(make_app, pane):  # noqa: F811
    app = make_app(source="fleet-replay:demo", instance="p5.48xlarge", interval=0.5)
    drawn = ViewsDrawn()
    async with app.run_test(size=(160, 45), message_hook=drawn.hook) as pilot:
        assert app.source_status.badge == "REPLAY FLEET"
        await pilot.press(pane)
        screen = app.screen
        if pane in ("5", "6"):
            await drawn.next()
            if pane == "6":
                assert screen.report.running.jobs
            else:
                assert screen.query_one(DataTable).row_count > 0
        elif pane == "7":
            await settle(app, pilot)  # the plan prices from the catalog
            await pilot.press("r")
            await wait_for(pilot, lambda: screen.doc is not None, "the plan")
            assert screen.doc["hours"] > 24 and screen.doc["peak_devices"] > 0
            assert "Plan" in str(screen.query_one("#plan-text", Static).render())
        else:
            assert screen.query_one("#q-file", Input).value.endswith(".csv")
            screen.query_one("#q-file", Input).focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.doc is not None, "the simulation")
            assert screen.doc["jobs"] == len(load_recording(DEMO_FLEET)["jobs"])
