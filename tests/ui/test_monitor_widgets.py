"""The Monitor pane's widgets alone: history graphs, LiveText, styled lines, the device and
process tables, device cards; each drawn as Textual's stock widgets draw the same thing."""

from __future__ import annotations

from types import SimpleNamespace

from fleet_tui.ui.widgets.device_card import DeviceCard
from fleet_tui.ui.widgets.process_table import ProcessTable
from tests.ui.conftest import widget_app


def _series_view(series: dict):
    """A stand-in for the monitor's view whose ``history`` serves ``series`` (metric -> values)."""

    class View:
        tick = SimpleNamespace(analyses={})  # no diagnosis: the card shows the readings

        def history(self, key, metric, last=None):
            data = series.get(metric, [])
            return data[-last:] if last else data

    return View


def _cells(strips) -> list[list[tuple[str, object]]]:
    """Each line as (character, style) per cell, however the segments are split."""
    return [[(ch, seg.style) for seg in strip for ch in seg.text] for strip in strips]


async def test_history_graph_draws_what_textuals_sparkline_draws():
    import random

    from textual.app import App
    from textual.visual import RichVisual, Visual

    from fleet_tui.ui.widgets.device_card import HistoryGraph

    class GraphApp(App):
        CSS = "HistoryGraph { height: 2; width: 30; }"

        def compose(self):
            yield HistoryGraph([], summary_function=max)

    rng = random.Random(7)
    app = GraphApp()
    async with app.run_test(size=(40, 6)) as pilot:
        graph = app.query_one(HistoryGraph)
        for data in ([], [5.0], [3.0, 3.0, 3.0], [rng.uniform(0, 100) for _ in range(30)],
                     [rng.uniform(0, 100) for _ in range(11)], [rng.uniform(0, 1e11) for _ in range(47)],
                     [float(i % 4) for i in range(30)]):
            graph.data = data
            await pilot.pause()
            stock = Visual.to_strips(graph, RichVisual(graph, graph.render()), 30, 2, graph.visual_style)
            ours = [graph.render_line(y) for y in range(2)]
            assert _cells(ours) == _cells(stock), data


async def test_history_graph_on_a_fixed_scale_tells_busy_from_idle():
    # Scaled to its own min and max, a GPU steady at 100 % drew the same flat line as an idle one.
    from textual.app import App

    from fleet_tui.ui.widgets.device_card import HistoryGraph

    class GraphApp(App):
        CSS = "HistoryGraph { height: 2; width: 20; }"

        def compose(self):
            yield HistoryGraph([], summary_function=max)

    def text(graph):
        return [graph.render_line(y).text for y in range(2)]

    app = GraphApp()
    async with app.run_test(size=(30, 6)) as pilot:
        graph = app.query_one(HistoryGraph)
        graph.scale = (0.0, 100.0)
        graph.data = [100.0] * 20
        await pilot.pause()
        assert text(graph) == ["█" * 20, "█" * 20]
        graph.data = [0.0] * 20
        await pilot.pause()
        assert text(graph) == [" " * 20, "▁" * 20]
        graph.data = [50.0] * 20
        await pilot.pause()
        top, bottom = text(graph)
        assert top.strip() == "" and set(bottom) == {"█"}
        graph.data = [100.0]  # one point is drawn at its level, not as a full bar by default
        graph.scale = (0.0, 200.0)
        await pilot.pause()
        assert text(graph) == [" " * 20, "█" * 20]


async def test_live_text_shows_what_a_static_shows_and_repaints_only_changed_lines():
    from textual.app import App
    from textual.widgets import Static

    from fleet_tui.ui.widgets.gauges import gauge
    from fleet_tui.ui.widgets.text import LiveText, update_text

    class TextApp(App):
        CSS = "Static { width: 24; padding: 0 1; }"

        def compose(self):
            yield Static(id="plain")
            yield LiveText(id="live")

    texts = [
        "[b]#0 H100[/b]\n" + gauge("util", 0.5, "50%", 8) + "\n[$text-muted]clock [/]1980 MHz",
        "[b]#0 H100[/b]\n" + gauge("util", 0.75, "75%", 8) + "\n[$text-muted]clock [/]1980 MHz",
        "[b]#0 H100[/b]\n" + gauge("util", 0.75, "75%", 8) + "\na sentence long enough to wrap "
        "over several lines of this narrow widget\n[$error]XID 79[/]",
        "[b]#0 H100[/b]\n" + gauge("util", None, "N/A", 8) + "\na sentence long enough to wrap "
        "over several lines of this narrow widget, now longer\n[$error]XID 79[/]",
        "",
        "one line",
    ]
    app = TextApp()
    async with app.run_test(size=(40, 16)) as pilot:
        plain, live = app.query_one("#plain", Static), app.query_one("#live", LiveText)
        for text in texts:
            plain.update(text)
            update_text(live, text)
            await pilot.pause()
            await pilot.pause()
            assert live.size == plain.size, text
            assert str(live.render()) == str(plain.render())
            ours = live.render_lines(live.size.region)
            stock = plain.render_lines(plain.size.region)
            assert _cells(ours) == _cells(stock), text
        # the second text differs from the first in one line: only that row was marked dirty
        plain.update(texts[0])
        update_text(live, texts[0])
        await pilot.pause()
        dirty = []
        original = live.refresh
        live.refresh = lambda *regions, **kw: (dirty.append(regions), original(*regions, **kw))[1]
        update_text(live, texts[1])
        live.refresh = original
        assert [[(r.y, r.height) for r in regions] for regions in dirty] == [[(1, 1)]]
        # a theme change re-renders every line in the new colours
        plain.update(texts[1])
        before = _cells(live.render_lines(live.size.region))
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        after = _cells(live.render_lines(live.size.region))
        assert after != before
        assert after == _cells(plain.render_lines(plain.size.region))
        # update() with a Content whose style spans lines, as a Static takes it
        from textual.content import Content

        content = Content.from_markup("[b]bold over\ntwo lines[/b]\n[$error]XID 79[/]")
        plain.update(content)
        live.update(content)
        await pilot.pause()
        await pilot.pause()
        assert _cells(live.render_lines(live.size.region)) == _cells(
            plain.render_lines(plain.size.region))


async def test_a_line_that_keeps_its_shape_is_drawn_as_textual_draws_it():
    """LiveText reuses the cuts and styles of a line whose shape (span positions and styles,
    length, width) is unchanged and slices the new text into them: a ticking number must still
    draw exactly what a Static draws, selection offsets included, without Textual's to_strip."""
    import random

    from textual.app import App
    from textual.content import _FormattedLine
    from textual.widgets import Static

    from fleet_tui.ui.widgets.text import LiveText, update_text

    class TextApp(App):
        CSS = "Static { width: 40; padding: 0 1; }"

        def compose(self):
            yield Static(id="plain")
            yield LiveText(id="live")

    rng = random.Random(3)

    def text(step: int) -> str:
        util, mem, temp = rng.randrange(10, 99), rng.randrange(10, 79), rng.randrange(30, 89)
        util = 100 if step == 15 else util  # a new shape: one character longer
        return (f"[b]#0 H100[/b]  [$text-muted]phase: {'abc'[step % 3]}[/]\n"
                f"[$text-muted]util  [/][$success]{'█' * (util // 25)}{'░' * (4 - util // 25)}[/]"
                f" {util}%\n"
                f" {mem} GiB  [$warning]{temp} °C[/] [reverse]ok[/]")

    app = TextApp()
    calls = []
    original = _FormattedLine.to_strip

    def counting(self, style):
        calls.append(1)
        return original(self, style)

    async with app.run_test(size=(50, 10)) as pilot:
        plain, live = app.query_one("#plain", Static), app.query_one("#live", LiveText)
        update_text(live, text(0))  # laid out once; later texts keep the number of rows
        await pilot.pause()
        await pilot.pause()
        _FormattedLine.to_strip = counting
        try:
            for step in range(1, 31):
                markup = text(step)
                calls.clear()
                update_text(live, markup)  # renders the changed lines now (mounted, same width)
                ours = live.render_lines(live.size.region)
                ours_calls = len(calls)
                plain.update(markup)
                await pilot.pause()
                await pilot.pause()
                stock = plain.render_lines(plain.size.region)
                assert _cells(ours) == _cells(stock), markup
                assert [s.cell_length for s in ours] == [s.cell_length for s in stock]
                if step == 15:
                    assert ours_calls == 1  # the longer line: a new shape, rendered by Textual
                else:  # the same shapes as the first text: sliced, no line through to_strip
                    assert ours_calls == 0, step
        finally:
            _FormattedLine.to_strip = original
        assert live._runs


def test_styled_lines_are_what_their_markup_parses_to():
    """Cards, the device table and the host line hand LiveText Content they built themselves
    (parsing was most of a changed line's cost); it must be what their markup parses to."""
    from textual.content import Content

    from fleet_tui.core.monitor.sources import open_source
    from fleet_tui.ui.widgets.device_card import device_lines
    from fleet_tui.ui.widgets.device_table import DeviceTable
    from fleet_tui.ui.widgets.text import styled_line

    lines = [styled_line([("a [b] $x \\ ", "b $error"), ("", "b"), ("  rest [/]", None)], "reverse"),
             styled_line([]), styled_line([("plain", None)], "b")]
    source = open_source("sim:8")
    import asyncio

    asyncio.run(source.open())
    snapshot = asyncio.run(source.sample())
    table = DeviceTable()
    table.show(snapshot.devices, {}, 120)
    for dev in snapshot.devices:
        lines += device_lines(dev)
        lines.append(styled_line(table.row(dev.key)[1], "reverse"))
    for markup, content in lines:
        parsed = Content.from_markup(markup)
        assert (parsed.plain, list(parsed.spans)) == (content.plain, list(content.spans)), markup


async def test_set_cell_draws_what_a_table_built_with_the_new_value_draws():
    """``Table.set_cell`` drops only the changed cell's cached renders; the table must still
    draw exactly what a table holding the new value from the start draws."""
    from textual.app import App

    from fleet_tui.ui.widgets.table import Table

    rows = [(str(40000 + i), f"#{i}", f"{30 + i}.0 GiB", "sim", f"python job {i}")
            for i in range(5)]

    class Tables(App):
        CSS = "Table { height: 7; }"

        def compose(self):
            yield Table(id="live", cursor_type="row", zebra_stripes=True)
            yield Table(id="fresh", cursor_type="row", zebra_stripes=True)

    def fill(table, data):
        table.clear(columns=True)
        for key in ("pid", "dev", "mem", "user", "cmd"):
            table.add_column(key, key=key)
        for i, row in enumerate(data):
            table.add_row(*row, key=str(i))

    app = Tables()
    async with app.run_test(size=(60, 16)) as pilot:
        live, fresh = app.query_one("#live", Table), app.query_one("#fresh", Table)
        app.set_focus(None)  # the same cursor colours on both
        fill(live, rows)
        await pilot.pause()
        for step, (row, value) in enumerate([(2, "31.5 GiB"), (2, "31.9 GiB"), (0, "1.0 GiB"),
                                             (4, "35.2 GiB")]):
            live.move_cursor(row=step % 5)
            await pilot.pause()
            live.render_lines(live.size.region)  # fill the caches with the old value
            assert live.set_cell(str(row), "mem", value)
            assert not live.set_cell(str(row), "mem", value)  # unchanged: nothing to do
            rows[row] = rows[row][:2] + (value,) + rows[row][3:]
            fill(fresh, rows)
            fresh.move_cursor(row=step % 5)
            await pilot.pause()
            await pilot.pause()
            assert _cells(live.render_lines(live.size.region)) == _cells(
                fresh.render_lines(fresh.size.region)), (row, value)


async def test_reserved_text_that_grows_or_shrinks_within_its_height_is_not_laid_out_again():
    """The diagnoses panel (``reserve=True``) changes its number of rows every few ticks: within
    the reserved height only the rows that changed are repainted, with no layout, and what it
    shows is still what a Static with the same text shows."""
    from textual.app import App
    from textual.widgets import Static

    from fleet_tui.ui.widgets.text import LiveText, update_text

    class TextApp(App):
        CSS = "Static { width: 24; }"

        def compose(self):
            yield Static(id="plain")
            yield LiveText(id="live")

    texts = ["[b]first[/b]\none\ntwo\nthree\nfour",
             "[b]first[/b]\none\ntwo changed\nthree\nfour\nfive\nsix",
             "[b]first[/b]\none\ntwo changed",
             "[b]first[/b]\n[$error]a sentence long enough to wrap over a few rows here[/]\nend"]
    app = TextApp()
    async with app.run_test(size=(40, 40)) as pilot:
        plain, live = app.query_one("#plain", Static), app.query_one("#live", LiveText)
        update_text(live, texts[0], reserve=True)
        await pilot.pause()
        height = live.size.height
        for text in texts[1:]:
            calls = []
            original = live.refresh
            live.refresh = lambda *regions, calls=calls, original=original, **kw: (
                calls.append((regions, kw)), original(*regions, **kw))[1]
            update_text(live, text, reserve=True)
            live.refresh = original
            plain.update(text)
            await pilot.pause()
            await pilot.pause()
            assert live.size.height == height, text  # the reserved height held it
            assert calls and all(regions and not kw.get("layout") for regions, kw in calls), text
            rows = plain.size.height
            ours = live.render_lines(live.size.region)
            assert _cells(ours[:rows]) == _cells(plain.render_lines(plain.size.region)), text
            assert all(not strip.text.strip() for strip in ours[rows:]), text
        dirty = []
        original = live.refresh
        live.refresh = lambda *regions, **kw: (dirty.append(regions), original(*regions, **kw))[1]
        update_text(live, texts[3].replace("end", "end\nmore"), reserve=True)  # one row added
        live.refresh = original
        assert [[(r.y, r.height) for r in regions] for regions in dirty] == [[(5, 1)]]


async def test_process_rows_are_updated_in_place_by_key():
    """``ProcessTable.show_rows`` adds, removes and changes rows by key; the table then holds
    exactly the rows it was last given, drawn as a DataTable would (widths grow to fit, one cell
    of padding), and a changed row repaints only its own line."""
    app = widget_app(lambda: ProcessTable(id="procs"))
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(ProcessTable)
        steps = [{"a": ("1", "#0", "1.0 GiB", "u", "x"), "b": ("2", "#1", "2.0 GiB", "u", "y")},
                 {"a": ("1", "#0", "1.5 GiB", "u", "x"), "b": ("2", "#1", "2.0 GiB", "u", "y")},
                 {"b": ("2", "#1", "2.0 GiB", "u", "y"), "c": ("3", "#2", "3.0 GiB", "v", "z")}]
        for rows in steps:
            dirty = []
            original = table.refresh
            table.refresh = lambda *regions, dirty=dirty, original=original, **kw: (
                dirty.append(regions), original(*regions, **kw))[1]
            table.show_rows(rows)
            table.refresh = original
            await pilot.pause()
            assert table.shown_rows == rows and table.row_count == len(rows)
            text = [strip.text.rstrip() for strip in table.render_lines(table.size.region)]
            assert text[0] == " PID  device  GPU memory  user  command"
            assert text[1:1 + len(rows)] == [
                f" {v[0]:<3}  {v[1]:<6}  {v[2]:<10}  {v[3]:<4}  {v[4]}".rstrip() for v in rows.values()]
            if rows is steps[1]:
                assert [[(r.y, r.height) for r in regions] for regions in dirty] == [[(1, 1)]]
        table.focus()
        await pilot.press("down")
        assert table.cursor == 1


async def test_a_card_draws_its_graphs_as_history_graph_does_and_repaints_only_changed_rows():
    """A card is one widget: text, then a label and a two-row graph per history shown. Its graph
    rows are what a ``HistoryGraph`` as wide as the card draws; new points repaint the graph only."""
    from textual.app import App

    from fleet_tui.core.monitor.sources.sim import SimSource
    from fleet_tui.ui.widgets.device_card import HistoryGraph

    dev = SimSource(2).snapshot_at(30).devices[1]
    series = {"gpu_util_pct": [float(v % 100) for v in range(0, 300, 7)]}
    View = _series_view(series)

    class Cards(App):
        CSS = "DeviceCard, HistoryGraph { width: 40; } HistoryGraph { height: 2; }"

        def get_theme_variable_defaults(self):
            return {"pane-border": "#445566"}  # the app's themes define it

        def compose(self):
            yield DeviceCard(dev.key)
            yield HistoryGraph([], summary_function=max)

    app = Cards()
    async with app.run_test(size=(60, 40)) as pilot:
        card, graph = app.query_one(DeviceCard), app.query_one(HistoryGraph)
        card.show(dev, View())
        await pilot.pause()
        rows = card.render_lines(card.outer_size.region)  # with its border
        text = [strip.text.rstrip() for strip in rows]
        at = next(y for y, line in enumerate(text) if line.startswith("│ util history "))
        assert len(text) == at + 4 and text[-1].startswith("╰")  # label, two graph rows, border
        graph.styles.width = card.content_size.width
        graph.scale = (0.0, 100.0)
        graph.data = series["gpu_util_pct"][-card.content_size.width:]
        await pilot.pause()
        expected = [strip.text for strip in graph.render_lines(graph.size.region)]
        assert [strip.text[2:-2] for strip in rows[at + 1:at + 3]] == expected
        dirty = []
        original = card.refresh
        card.refresh = lambda *regions, **kw: (dirty.append(regions), original(*regions, **kw))[1]
        series["gpu_util_pct"].append(3.0)
        card.show(dev, View())
        card.refresh = original
        assert [[(r.y, r.height) for r in regions] for regions in dirty] == [[(at, 2)]]


async def test_a_card_takes_a_new_themes_colours_as_a_new_card_would():
    """A card keeps its label style and graph colours between draws (each reading walks its
    ancestors); a theme change must still give it the new theme's, exactly as a card made then."""
    from textual.app import App
    from textual.containers import Vertical

    from fleet_tui.core.monitor.sources.sim import SimSource

    dev = SimSource(2).snapshot_at(30).devices[1]
    series = [float(v % 100) for v in range(0, 300, 7)]
    View = _series_view({"gpu_util_pct": series})

    class Cards(App):
        CSS = "DeviceCard { width: 40; }"

        def get_theme_variable_defaults(self):
            return {"pane-border": "#445566"}  # the app's themes define it

        def compose(self):
            with Vertical(id="box"):
                yield DeviceCard(dev.key)

    app = Cards()
    async with app.run_test(size=(60, 40)) as pilot:
        card = app.query_one(DeviceCard)
        card.show(dev, View())
        await pilot.pause()
        before = _cells(card.render_lines(card.outer_size.region))
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        series.append(50.0)  # the next tick
        card.show(dev, View())
        fresh = DeviceCard("fresh")
        await app.query_one("#box").mount(fresh)
        await pilot.pause()  # laid out: its graph is as wide as the card's
        fresh.show(dev, View())
        await pilot.pause()
        after = _cells(card.render_lines(card.outer_size.region))
        assert after != before
        assert after == _cells(fresh.render_lines(fresh.outer_size.region))


async def test_process_table_window_follows_the_cursor():
    app = widget_app(lambda: ProcessTable(id="procs"))
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(ProcessTable)
        table.styles.height = 4  # a header and three rows
        table.show_rows({str(i): (str(i), "#0", "1.0 GiB", "u", "x") for i in range(5)})
        table.focus()
        await pilot.pause()
        text = [strip.text.rstrip() for strip in table.render_lines(table.size.region)]
        assert text[0].endswith("1–3 of 5 ↑↓") and text[1].startswith(" 0 ")
        for _ in range(4):
            await pilot.press("down")
        text = [strip.text.rstrip() for strip in table.render_lines(table.size.region)]
        assert text[0].endswith("3–5 of 5 ↑↓") and text[3].startswith(" 4 ")
