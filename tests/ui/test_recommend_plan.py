"""The Recommendations pane ranks by the serving capacity plan when the Workload pane has a demand."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Select, Static

from fleet_tui.core.ranking.offers import UNIT_PLAN
from fleet_tui.ui.builder import BuilderScreen
from tests.ui.conftest import settle


async def _rank(app, pilot, rate: str):
    app.set_focus(None)
    await pilot.press("2")
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, BuilderScreen)
    screen.query_one("#b-model", Select).value = "llama-3.1-8b"
    screen.query_one("#b-rate", Input).value = rate
    await settle(app, pilot)
    app.set_focus(None)
    await pilot.press("4")
    await settle(app, pilot)
    await settle(app, pilot)
    return app.screen


async def test_pane_shows_the_plan_columns_with_a_demand(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(160, 40)) as pilot:
        rec_screen = await _rank(app, pilot, "20")
        result = rec_screen.result
        assert result is not None and result.error is None, result and result.error
        rec = result.recommendation
        assert rec.unit == UNIT_PLAN and rec.demand.rate_rps == 20
        table = rec_screen.query_one("#rec-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[4:7] == ["$/1M tok", "replicas", "SLO"]
        first = table.get_row_at(0)
        plan = rec.offers[0].plan
        assert first[5] == f"{plan.replicas}×{plan.gpus_per_replica}" and first[6] == "yes"
        months = [o.usd_per_month for o in rec.offers]
        assert months == sorted(months)
        summary = str(rec_screen.query_one("#rec-summary", Static).render())
        assert "20 req/s" in summary
        # the demand cleared: the plain columns come back
        await pilot.press("2")
        await settle(app, pilot)
        app.screen.query_one("#b-rate", Input).value = ""
        await settle(app, pilot)
        app.set_focus(None)
        await pilot.press("4")
        await settle(app, pilot)
        await settle(app, pilot)
        labels = [str(c.label) for c in table.columns.values()]
        assert "replicas" not in labels and app.screen.result.recommendation.demand is None
