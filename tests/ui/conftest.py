"""Helpers for Pilot tests: build the app as ``fleet-tui`` would, isolated from the user's config."""

from __future__ import annotations

import asyncio

import pytest
from textual.worker import WorkerCancelled

from fleet_tui.ui.launch import AppConfig

CATALOG_WAIT_S = 60  # generous: a catalog that never loads fails the test with a message, no hang


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    # No user themes/catalogs leak in; exports land in the test's directory.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)


def app_args(**kw) -> AppConfig:
    """An AppConfig from the app's flag names (``catalog_dir``, ``interval``, ``record`` as argparse
    spells them), so tests read like the command line."""
    renames = {"catalog_dir": "catalog_dirs", "interval": "interval_s", "record": "record_db"}
    fields = {renames.get(k, k): v for k, v in kw.items()}
    if "catalog_dirs" in fields:
        fields["catalog_dirs"] = tuple(fields["catalog_dirs"])
    return AppConfig(**fields)


@pytest.fixture
def make_app():
    from fleet_tui.ui.launch import build_app

    def make(**kw):
        overrides = kw.pop("overrides", {})
        app = build_app(app_args(**kw), **overrides)
        app.animation_level = "none"
        return app

    return make


async def settle(app, pilot) -> None:
    """Wait for the catalog to load (or fail), then for every finished-able worker (queries,
    sizing), not the monitor loop.

    The app starts loading its catalog after its first frame: under load, a test could get here
    before that worker existed, find no worker to wait for and go on with the catalog still
    loading. ``catalog_settled`` is the app's own signal (the monitor waits on it too)."""
    settled = getattr(app, "catalog_settled", None)
    if settled is not None:
        try:
            await asyncio.wait_for(settled.wait(), CATALOG_WAIT_S)
        except asyncio.TimeoutError:
            raise AssertionError(f"the catalog did not load within {CATALOG_WAIT_S} s") from None
    for _ in range(5):
        workers = [w for w in app.workers if w.group != "monitor"]
        if workers:  # wait_for_complete([]) waits for every worker, the endless monitor loop too
            try:
                await app.workers.wait_for_complete(workers)
            except WorkerCancelled:  # superseded by a newer exclusive worker: the next round waits for it
                pass
        await pilot.pause()
        if all(w.is_finished for w in app.workers if w.group != "monitor"):
            return


async def wait_for(pilot, condition, what: str, steps: int = 200) -> None:
    """Let the app run until ``condition()`` holds (monitor ticks arrive on their own schedule)."""
    for _ in range(steps):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def widget_app(make):
    """A bare App holding one widget (``make()``), for Pilot tests of a widget alone."""
    from textual.app import App

    class One(App):
        def compose(self):
            yield make()

    return One()
