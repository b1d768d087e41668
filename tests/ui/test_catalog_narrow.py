"""The Catalog at 80 columns: the columns that tell offers apart (cloud, region, devices, prices)
are on screen, regions stay distinguishable, and Enter shows the whole offer."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from fleet_tui.ui.catalog import NARROW_REGION, OfferDetail, middle_clip, narrow_row
from tests.ui.conftest import settle


def test_clipped_regions_keep_their_ends():
    a, b = middle_clip("northamerica-northeast1", 16), middle_clip("northamerica-northeast2", 16)
    assert a != b and len(a) == len(b) == NARROW_REGION
    assert middle_clip("us-east-1", 16) == "us-east-1"


def test_a_narrow_row_names_devices_and_region():
    row = ("aws", "p5.48xlarge", "H100", "8", "$3.9", "$31.5", "80", "us-east-1", "192", "2048", "")
    assert narrow_row(row) == ("aws", "us-east-1", "8× H100", "$3.9", "$31.5", "p5.48xlarge")


async def test_80_columns_show_regions_and_enter_opens_the_offer(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#cat-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[:5] == ["cloud", "region", "devices", "$/GPU-h", "$/hour"]
        region = table.get_cell_at((0, 1))
        assert region and len(region) <= NARROW_REGION
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, OfferDetail)
        text = str(app.screen.query_one("#offer-detail", Static).render())
        assert "Prices (USD/hour)" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, OfferDetail)
        await pilot.resize_terminal(160, 40)
        await pilot.pause()
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[:3] == ["cloud", "instance", "accelerator"]
