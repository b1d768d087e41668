"""The fleet panes leave no reference cycles behind a refresh, so a steady fleet needs no full
garbage collection (each walks ~250,000 objects at 4,096 GPUs with the GIL held: ~150 ms of UI).

Between two ``gc.collect()`` calls nothing else runs (no ``await``), so what the second one finds
is what the code in between left as cycles.
"""

from __future__ import annotations

import gc

from rich.segment import Segment
from textual.strip import Strip

from fleet_tui.ui import runtime, textual_fixes
from fleet_tui.ui.widgets.table import Table
from tests.ui.conftest import widget_app
from tests.ui.drawn import ViewsDrawn
from tests.ui.fleet_fake import SimFleetSource


def cycles_left_by(action) -> int:
    """Unreachable objects the garbage collector finds after ``action()`` (0: none)."""
    gc.collect()
    gc.disable()
    try:
        action()
        return gc.collect()
    finally:
        gc.enable()


def test_strip_divided_at_its_end_is_freed_without_the_collector():
    textual_fixes.install()

    def draw_lines():
        for i in range(50):
            strip = Strip([Segment("abcdefghij"), Segment(str(i))], 10 + len(str(i)))
            assert strip.divide([strip.cell_length]) == [strip]
            assert strip.divide([strip.cell_length, 99]) == [strip]  # cuts past the end ignored
            left, right = strip.divide([4, strip.cell_length])
            assert (left.text, right.text) == ("abcd", "efghij" + str(i))

    assert cycles_left_by(draw_lines) == 0  # Textual's own divide: 1,800 (50 strips in cycles)


async def test_table_cleared_frees_its_rendered_rows_without_the_collector():
    app = widget_app(lambda: Table(id="t"))
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(Table)
        table.add_column("node", key="node")
        table.add_column("util", key="util")
        for i in range(40):
            table.add_row(f"node-{i:02d}", f"{i} %", key=str(i))
        await pilot.pause()
        for y in range(table.size.height):  # every visible row rendered and cached
            table.render_line(y)
        assert len(table._row_renderable_cache) > 10
        assert cycles_left_by(table.clear) == 0  # DataTable's own clear: ~3,700 objects


async def test_fleet_refreshes_leave_no_cycles(make_app):
    source = SimFleetSource(nodes=6, devices_per_node=4)
    app = make_app(source="sim:1", interval=0.25,
                   overrides=dict(source=source, source_spec=source.name, start_mode="fleet"))
    drawn = ViewsDrawn()
    async with app.run_test(size=(140, 40), message_hook=drawn.hook) as pilot:
        screen = app.screen

        async def views(n: int) -> None:
            for _ in range(n):
                await drawn.next()

        await views(2)
        gc.unfreeze()
        gc.collect()  # whatever start-up left
        gc.freeze()
        await views(6)
        await pilot.press("p")  # paused: no view in flight while we count
        await pilot.pause()
        gc.unfreeze()
        left = gc.collect()
        # Before: each refresh left its finished worker (~15 objects) and every line drawn
        # unchanged across its region (a strip and its caches) in cycles: ~2,000 objects over
        # these six views.
        assert left < 100, left
        assert screen._frozen.full_collections == 1  # the first view's only


def test_full_collection_only_when_memory_doubled_after_the_windows_filled(monkeypatch):
    blocks = [1_000_000]
    monkeypatch.setattr(runtime.sys, "getallocatedblocks", lambda: blocks[0])
    frozen = runtime.FrozenSurvivors()
    try:
        frozen.freeze(filling=True)
        assert (frozen.full_collections, frozen.base) == (1, 1_000_000)  # the first: in full
        for grown in (2_500_000, 4_000_000):  # the history filling: growth by design
            blocks[0] = grown
            frozen.freeze(filling=True)
        assert (frozen.full_collections, frozen.base) == (1, 1_000_000)
        frozen.freeze(filling=False)  # filled: the base is what the pane needs now
        assert (frozen.full_collections, frozen.base) == (1, 4_000_000)
        blocks[0] = 8_000_000  # up to twice as much: young garbage only
        frozen.freeze()
        assert frozen.full_collections == 1
        blocks[0] = 8_000_001
        frozen.freeze()
        assert (frozen.full_collections, frozen.base) == (2, 8_000_001)
    finally:
        gc.unfreeze()
