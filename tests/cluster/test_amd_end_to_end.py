"""``--source amd`` end to end with a fake ``amd-smi`` on PATH that prints the published RX 6600
output (tests/fixtures/amd/README.md): ``monitor --once --json`` and the monitor pane."""

from __future__ import annotations

import asyncio
import json

from fleet_tui.cli import main
from tests.cluster.test_source_amd import fake_amd_smi  # noqa: F401 - the fixture
from tests.ui.conftest import app_args, wait_for


def test_monitor_once_json_source_amd(fake_amd_smi, capsys):  # noqa: F811
    assert main(["monitor", "--once", "--json", "--source", "amd"]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    (d,) = data["devices"]
    assert d["vendor"] == "amd" and d["name"].startswith("Navi 23")
    assert (d["gpu_util_pct"], d["power_w"], d["power_limit_w"], d["temp_c"]) == (1, 6, 100, 37)
    assert d["mem_used_bytes"] == 202 << 20 and d["mem_total_bytes"] == 8176 << 20


def test_monitor_pane_shows_the_amd_device(fake_amd_smi):  # noqa: F811
    from fleet_tui.ui.launch import build_app
    from fleet_tui.ui.widgets.device_card import DeviceCard

    # build_app probes the named backend with asyncio.run, as the CLI does: outside the app's loop
    app = build_app(app_args(source="amd", interval=0.5))
    app.animation_level = "none"

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            assert app.current_mode == "monitor"
            await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 1, "one AMD card")
            card = app.screen.query_one(DeviceCard)
            # what the card draws (one widget: its text, labels and graphs)
            text = " ".join(seg.text for y in range(card.size.height) for seg in card.render_line(y))
            assert "Navi 23" in text
            assert app.monitor.latest.snapshot.devices[0].vendor == "amd"

    asyncio.run(scenario())
