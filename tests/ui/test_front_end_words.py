"""Each front end words the core's answers in its own terms: the app never tells its user to
type a flag, the CLI names the flag."""

from __future__ import annotations

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.monitor.recorder import Recorder
from fleet_tui.ui.recommend import rightsize_text
from tests.cli_run import run


def _empty_history(tmp_path):
    db = tmp_path / "session.db"
    Recorder(str(db)).close()
    return db


def test_right_sizing_an_empty_history_in_each_front_end(tmp_path, capsys):
    db = _empty_history(tmp_path)
    (line,) = rightsize_text(db, load_catalog(), None)
    assert "no samples" in line.lower() and "Monitor pane" in line
    assert "--" not in line and "fleet-tui record" not in line and str(db) not in line
    code, _, err = run(capsys, "rightsize", "--db", str(db))
    assert code == 2
    assert f"--db '{db}': no recorded samples" in err and "fleet-tui record --db" in err


def test_devices_left_without_work_are_called_idle(capsys):
    code, out, _ = run(capsys, "size", "--model", "llama-3.1-70b", "--workload", "lora", "--gpu",
                       "L40S", "--gpus", "2", "--grad-checkpointing")
    assert code == 0
    head = out.splitlines()[0]
    assert "2 GPUs (1 busy, 1 idle)" in head and "(1 device)" not in head


async def test_no_device_says_how_to_try_the_app_without_one(make_app, monkeypatch, tmp_path):
    import sys

    import pynvml as real

    from tests.fakes.fake_pynvml import FakeNvml
    from tests.ui.conftest import settle

    fake = FakeNvml.h200(devices=1, init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no hl-smi, neuron-monitor or amd-smi
    app = make_app(source="auto")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await app.switch_mode("monitor")
        await pilot.pause()
        app.monitor.redraw_now()
        await pilot.pause()
        text = str(app.screen.query_one("#mon-message").render())
        assert "fleet-tui --source replay:demo" in text and "--source sim:8" in text
        assert "no accelerator found" in text
