"""`fleet-tui --record DB`: the app keeps the monitor's samples, and right-sizing reads them."""

from __future__ import annotations

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.recorder import read_rows
from fleet_tui.ui.widgets.device_card import DeviceCard
from tests.ui.conftest import wait_for


async def test_record_keeps_the_sessions_samples(make_app, tmp_path):
    db = tmp_path / "history.db"
    app = make_app(source="sim:2", interval=0.25, record=str(db))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(DeviceCard)) == 2, "two device cards")
        await wait_for(pilot, lambda: app.monitor.engine is not None
                       and app.monitor.engine.latest is not None
                       and app.monitor.engine.latest.seq >= 3, "a few ticks")
        assert app.monitor.session_db == db
    # the app has quit: the database stays, with both devices' samples in it
    rows, devices = read_rows(db)
    assert db.exists() and len(devices) == 2
    assert len(rows) >= 4


def test_record_into_a_missing_folder_is_refused_before_start(make_app, tmp_path):
    with pytest.raises(UserError, match="--record"):
        make_app(source="sim:1", record=str(tmp_path / "nope" / "h.db"))


@pytest.mark.parametrize("kind", ["a directory", "a text file"])
def test_record_into_a_database_that_cannot_be_written_is_refused_before_start(make_app, tmp_path,
                                                                                kind):
    """The app used to open on NO DEVICE with a notice naming --db; now it does not start."""
    target = tmp_path / "h.db"
    if kind == "a directory":
        target.mkdir()
    else:
        target.write_text("not a database\n" * 200, encoding="utf-8")
    with pytest.raises(UserError, match=r"^--record '.*h\.db': ") as err:
        make_app(source="sim:1", record=str(target))
    assert "--db" not in str(err.value)


def test_record_into_a_new_file_starts(make_app, tmp_path):
    app = make_app(source="sim:1", record=str(tmp_path / "new.db"))
    assert app.record_db == tmp_path / "new.db"
