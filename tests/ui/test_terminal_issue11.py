"""Issue 11, "The terminal": app state after key presses (the tmux side is tests/e2e/)."""

from __future__ import annotations

from textual.widgets import Static

from tests.ui.conftest import settle, wait_for


async def test_mistyped_instance_is_a_message_not_a_crash(make_app):
    app = make_app(source="sim:2", instance="p5.48xlarg", interval=0.25)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: app.monitor.latest is not None, "first tick")
        # the headless command's words: unknown instance type ... did you mean p5.48xlarge
        assert app.instance_error and "unknown instance type 'p5.48xlarg'" in app.instance_error
        assert "p5.48xlarge" in app.instance_error
        messages = " ".join(str(n.message) for n in app._notifications)
        assert "unknown instance type 'p5.48xlarg'" in messages
        cost = app.screen.query_one("#cost", Static)
        await wait_for(pilot, lambda: "p5.48xlarg" in str(cost.render()), "the cost panel says why")
        assert app.return_code is None  # still running
