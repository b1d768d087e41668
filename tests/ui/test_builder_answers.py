"""The Workload builder answers by itself: "(best)" plans the top-ranked offer, each edit brings the
verdict back into view, and latency targets are fields (80×24, as a newcomer's terminal)."""

from __future__ import annotations

from textual.widgets import Input, Select

from tests.ui.conftest import settle, wait_for


async def _builder(app, pilot):
    from fleet_tui.ui.builder import BuilderScreen

    await settle(app, pilot)
    await pilot.press("2")
    await wait_for(pilot, lambda: isinstance(app.screen, BuilderScreen), "the builder")
    await settle(app, pilot)
    return app.screen


def _visible(screen) -> str:
    result = screen.query_one("#b-result")
    text = screen.query_one("#b-result-text")
    rows = [strip.text for strip in text.render_lines(text.size.region)]
    return "\n".join(rows[:result.scrollable_content_region.height])


async def test_best_plans_the_top_offer_and_shows_its_verdict_speed_and_cost_at_80x24(make_app):
    from fleet_tui.core.ranking import recommend

    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _builder(app, pilot)
        assert screen.query_one("#b-accel", Select).value is Select.NULL  # "(best)"
        screen.query_one("#b-model", Select).value = "llama-3.1-8b"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and screen.last_result.report is not None, "the plan")
        await pilot.pause(0.2)
        report = screen.last_result.report
        top = recommend(report.workload.derive(gpus=1), app.catalog, top=1).offers[0]
        assert report.offer == top.label and report.accelerator == top.accelerator
        visible = _visible(screen)
        assert "Best offer" in visible and top.instance_type in visible
        assert "Starts" in visible and "Speed (model)" in visible and "$" in visible, visible


async def test_an_edit_scrolls_back_to_the_new_verdict(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _builder(app, pilot)
        screen.query_one("#b-accel", Select).value = "L4"
        screen.query_one("#b-model", Select).value = "llama-3.1-70b"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and screen.last_result.report is not None, "sizing")
        result = screen.query_one("#b-result")
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert result.scroll_y > 0
        screen.query_one("#b-gpus", Input).value = "8"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result.report.gpus == 8, "sizing 8 devices")
        await pilot.pause(0.2)
        assert result.scroll_y == 0
        assert "8× L4" in _visible(screen)


async def test_latency_targets_are_fields_the_capacity_plan_meets(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _builder(app, pilot)
        screen.query_one("#b-accel", Select).value = "H100"
        screen.query_one("#b-model", Select).value = "llama-3.1-8b"
        screen.query_one("#b-rate", Input).value = "10"
        screen.query_one("#b-tpot", Input).value = "20"
        screen.query_one("#b-ttft", Input).value = "400"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and screen.last_result.report is not None
                       and screen.last_result.report.serving_plan is not None, "the plan")
        plan = screen.last_result.report.serving_plan
        assert plan.meets_slo and plan.tpot_s <= 0.020 and plan.ttft_s <= 0.400
        assert app.builder_context.tpot_ms == 20 and app.builder_context.ttft_ms == 400
        assert plan.slo_percentile == 95  # the default, named on the plan line
        assert "at p95" in screen.last_result.markup
        screen.query_one("#b-pct", Select).value = "p99"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result.report is not None
                       and screen.last_result.report.serving_plan.slo_percentile == 99, "the p99 plan")
        screen.query_one("#b-tpot", Input).value = "-3"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result.error is not None, "the error")
        assert screen.last_result.error.startswith("TPOT ms")


async def test_a_multi_device_setup_names_the_links_its_speed_was_charged_on(make_app):
    app = make_app(overrides=dict(source=None))
    async with app.run_test(size=(120, 60)) as pilot:
        screen = await _builder(app, pilot)
        screen.query_one("#b-accel", Select).value = "H100"
        screen.query_one("#b-model", Select).value = "llama-3.1-70b"
        screen.query_one("#b-gpus", Input).value = "4"
        await settle(app, pilot)
        await wait_for(pilot, lambda: screen.last_result and screen.last_result.report is not None
                       and screen.last_result.report.gpus == 4, "sizing 4 devices")
        report = screen.last_result.report
        assert report.links, "a 4-device plan is charged on named links"
        text = str(screen.query_one("#b-result-text").render())
        assert "Links  " + report.links[:30] in text
