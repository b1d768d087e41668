"""A few snapshot tests (pytest-textual-snapshot): one state per pane kind, fixed theme, no
animation, a fixture catalog so refreshing the real catalogs does not change them.

Update after an intended change with ``pytest tests/ui/test_snapshots.py --snapshot-update`` and
look at the SVGs before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.conftest import app_args, settle

FIXTURE = Path(__file__).parent / "fixtures" / "catalog" / "instances" / "snapshot.toml"


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


def _app(theme: str = "dark", **kw):
    from fleet_tui.core.catalog import build_catalog
    from fleet_tui.core.paths import bundled_catalog_dir
    from fleet_tui.ui.launch import build_app

    app = build_app(app_args(theme=theme), source=None, **kw)
    app.animation_level = "none"
    bundled = bundled_catalog_dir()
    files = [bundled / "accelerators.toml", bundled / "models.toml", FIXTURE]
    app._load_catalog = lambda: build_catalog(files)
    return app


async def _settle(pilot) -> None:
    app = pilot.app
    await settle(app, pilot)  # the catalog loaded, every worker but the monitor loop finished
    app.set_focus(None)
    # DataTable sizes its columns on an idle event after rows arrive; on a loaded machine that can
    # take more than a few frames, so wait until no table still owes its column sizes (bounded).
    from textual.widgets import DataTable

    def sized(table: DataTable) -> bool:
        if table._require_update_dimensions or table._new_rows or table._updated_cells:
            return False
        for key, column in table.columns.items():  # every column as wide as its widest cell
            cells = [len(str(table.get_cell(row, key))) for row in table.rows]
            if cells and column.content_width < max(cells):
                return False
        return True

    settled = 0
    for _ in range(200):
        await pilot.pause()
        busy = any(w.group != "monitor" and not w.is_finished for w in app.workers)
        quiet = not busy and all(sized(t) for t in app.screen.query(DataTable))
        settled = settled + 1 if quiet else 0
        if settled >= 3:
            break
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()


def test_catalog_pane(snap_compare):
    assert snap_compare(_app(), terminal_size=(110, 24), run_before=_settle)


def test_builder_error_light_theme(snap_compare):
    async def type_bad_params(pilot):
        await _settle(pilot)
        await pilot.press("2")
        await _settle(pilot)
        pilot.app.screen.query_one("#b-params").value = "lots"
        await _settle(pilot)

    assert snap_compare(_app("light"), terminal_size=(100, 24), run_before=type_bad_params)


def test_help_high_contrast(snap_compare):
    async def open_help(pilot):
        await _settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(_app("high-contrast"), terminal_size=(80, 24), run_before=open_help)


def test_monitor_without_source(snap_compare):
    assert snap_compare(_app(start_mode="monitor"), terminal_size=(80, 24), run_before=_settle)
