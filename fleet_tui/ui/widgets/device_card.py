"""One accelerator as a card: gauges for what the snapshot holds, a sparkline of the core's history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.geometry import Offset, Region
from textual.renderables._blend_colors import blend_colors
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.strip import Strip
from textual.widgets import Sparkline

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.ui.widgets.diagnosis_text import diagnosis_lines, headline
from fleet_tui.ui.widgets.gauges import gauge_parts, gib, pct
from fleet_tui.ui.widgets.severity import severity_mark, severity_style
from fleet_tui.ui.widgets.text import LiveText, Parts, styled_line

if TYPE_CHECKING:  # for the checker only: the analysis loads with the engine, after the first frame
    from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
    from fleet_tui.ui.monitor_link import MonitorView


def device_markup(dev: DeviceSnapshot, *, width: int = 12, analysis: DeviceAnalysis | None = None,
                  detailed: bool = False) -> str:
    """The card body as markup. Only formats what the snapshot and its analysis say; N/A stays
    N/A."""
    return "\n".join(markup for markup, _content in device_lines(
        dev, width=width, analysis=analysis, detailed=detailed))


def device_lines(dev: DeviceSnapshot, *, width: int = 12, analysis: DeviceAnalysis | None = None,
                 detailed: bool = False) -> list[tuple[str, Content]]:
    """The card body, one ``styled_line`` a line (markup and its Content, unparsed). It answers
    first: the device's primary diagnosis of this tick (``analysis``, the same object its table
    row reads), and when ``detailed`` its sentence, evidence and action and the other findings;
    then the readings."""
    node = f"{dev.node} · " if dev.node else ""
    head: Parts = [(f"{node}#{dev.index} {dev.name}", "b")]
    if dev.state != "ok":
        return [styled_line(head),
                styled_line([(f"{dev.state.upper()}: {dev.error or 'no reading'}", "$error")])]
    answer: list[tuple[str, Content]] = []
    if analysis is not None and analysis.diagnoses:
        diagnoses = analysis.diagnoses
        top = diagnoses[0]
        if detailed:
            answer = diagnosis_lines(top, primary=True)
            for other in diagnoses[1:]:
                if other.severity != "ok":
                    answer += diagnosis_lines(other, evidence=False)
            span = f"diagnosed over {analysis.end - analysis.start:.0f} s"
            label = analysis.phase
            answer.append(styled_line([(span + (f" · recorded label: {label}" if label else ""),
                                        "$text-muted")]))
        else:
            style = severity_style(top.severity, emphasis=True)
            answer = [styled_line([(severity_mark(top.severity), style), (headline(top), style)])]
    lines = [head]
    util = dev.gpu_util_pct
    lines.append(gauge_parts("util", None if util is None else util / 100, pct(util), width))
    mem_frac = dev.mem_used_frac
    lines.append(gauge_parts("mem", mem_frac,
                             f"{gib(dev.mem_used_bytes)}/{gib(dev.mem_total_bytes)} GiB",
                             width, warn=0.9, bad=0.97))
    if dev.power_w is not None:
        limit = dev.power_limit_w
        frac = dev.power_w / limit if limit else None
        text = f"{dev.power_w:.0f}/{limit:.0f} W" if limit else f"{dev.power_w:.0f} W"
        lines.append(gauge_parts("power", frac, text, width, warn=0.9, bad=0.98))
    else:
        lines.append(gauge_parts("power", None, "N/A", width))
    temp = "N/A" if dev.temp_c is None else f"{dev.temp_c:.0f} °C"
    if dev.temp_c is not None and dev.slowdown_temp_c:
        frac = dev.temp_c / dev.slowdown_temp_c
        lines.append(gauge_parts("temp", frac, f"{temp} (max {dev.slowdown_temp_c:.0f})", width,
                                 warn=0.9, bad=0.97))
    else:
        lines.append([(f"{'temp':<6}", "$text-muted"), (temp, None)])
    if dev.sm_clock_mhz is not None:
        clock = f"{dev.sm_clock_mhz:.0f}"
        if dev.sm_clock_max_mhz:
            clock += f"/{dev.sm_clock_max_mhz:.0f}"
        line: Parts = [(f"{'clock':<6}", "$text-muted"), (f"{clock} MHz", None)]
        reasons = [r for r in dev.throttle_reasons if r != "gpu_idle"]
        if reasons:
            line += [("  ", None), (f"throttle: {', '.join(reasons)}", "$warning")]
        lines.append(line)
    activity = []
    for label, value in (("SM", dev.sm_active_pct), ("tensor", dev.tensor_active_pct),
                         ("DRAM", dev.dram_active_pct)):
        if value is not None:
            activity.append(f"{label} {value:.0f}%")
    if activity:
        lines.append([(f"{'busy':<6}", "$text-muted"), ("  ".join(activity), None)])
    if dev.xid_errors:
        lines.append([(f"XID {', '.join(map(str, dev.xid_errors))}", "$error")])
    readings = [styled_line(parts) for parts in lines]
    return readings[:1] + answer + readings[1:]


HISTORY_GRAPHS = (
    ("gpu_util_pct", "util history", ""),
    ("mem_used_bytes", "memory history", "detail"),
    ("power_w", "power history", "detail"),
)


class HistoryGraph(Sparkline):
    """Textual's Sparkline, drawn straight to strips.

    The stock widget renders through Rich's console, one segment per cell, every tick; here the
    same bars and colours (the same bucketing and colour blend as Textual's renderable) are built
    directly, runs of equal cells share one segment, and both lines come from one computation."""

    _graph_key: tuple | None = None
    _graph_lines: list[Strip] = []
    _colours: tuple | None = None  # (base, min, max) the cell styles below were made for
    _styles: dict[float, Style] = {}  # replaced per instance on first use
    # The bars' scale: (bottom, top) in the data's unit. A monitor graph needs a fixed one (0-100 %
    # for utilization, 0-capacity for memory): scaled to its own min and max, a GPU steady at 100 %
    # draws the same flat line as an idle one. (None, None) scales to the data, as Textual does.
    scale: tuple[float | None, float | None] = (None, None)

    def render_line(self, y: int) -> Strip:
        spark = self.render()  # reads the CSS colours and the data; draws nothing
        assert isinstance(spark, SparklineRenderable)  # what Sparkline.render returns
        base = self.visual_style.rich_style
        data = tuple(spark.data)
        key = (data, spark.width, spark.height, spark.min_color, spark.max_color, base,
               self.summary_function, self.scale)
        if key != self._graph_key:
            self._graph_key = key
            colours = (base, spark.min_color, spark.max_color)
            if colours != self._colours or len(self._styles) > 1024:
                self._colours, self._styles = colours, {}
            self._graph_lines = _graph_lines(spark, data, base, self.scale, self._styles)
        lines = self._graph_lines
        return lines[y] if 0 <= y < len(lines) else Strip.blank(self.size.width, base)


def _graph_lines(spark: SparklineRenderable, data: tuple, base: Style,
                 scale: tuple[float | None, float | None] = (None, None),
                 styles: dict[float, Style] | None = None) -> list[Strip]:
    """``styles``: colour ratio -> cell style, kept between calls for the same base and colours
    (a graph that shifts by one point then blends one new colour, not one a column: 0.74 ->
    0.52 ms CPU for a graph of 72 random points, the worst case, on the loaded dev machine)."""
    width, height = spark.width or 0, spark.height or 1
    if width <= 0:
        return []
    min_style, max_style = base + spark.min_color, base + spark.max_color
    if not data:
        return [Strip([], 0)] * (height - 1) + [Strip([Segment("▁" * width, min_style)], width)]
    bottom, top = scale
    if len(data) == 1 and bottom is None and top is None:
        return [Strip([Segment("█" * width, max_style)], width)] * height
    bars = SparklineRenderable.BARS
    per_line = len(bars)
    top_index = per_line * height - 1
    low, high = min(data), max(data)
    if bottom is not None:
        low = min(low, bottom)
    if top is not None:
        high = max(high, top)
    extent = high - low or 1
    min_color, max_color = spark.min_color.color, spark.max_color.color
    assert min_color is not None and max_color is not None  # the renderable makes both from colours
    buckets = _buckets(data, width)
    step = len(buckets) / width
    summary = spark.summary_function
    columns = []  # (bar index, colour ratio) per cell, left to right
    position = 0.0
    for _ in range(width):
        ratio = (summary(buckets[int(position)]) - low) / extent
        columns.append((int(ratio * top_index), ratio))
        position += step
    if styles is None:
        styles = {}
    lines = []
    for i in reversed(range(height)):
        part_low, part_high = i * per_line, (i + 1) * per_line
        segments: list[Segment] = []
        run_text, run_style = "", None
        for index, ratio in columns:
            if index < part_low:
                char, style = " ", base
            else:
                char = "█" if index >= part_high else bars[index % per_line]
                style = styles.get(ratio)
                if style is None:
                    style = styles[ratio] = base + Style.from_color(
                        blend_colors(min_color, max_color, ratio))
            if style is run_style or style == run_style:  # mostly the same cached object
                run_text += char
            else:
                if run_text:
                    segments.append(Segment(run_text, run_style))
                run_text, run_style = char, style
        if run_text:
            segments.append(Segment(run_text, run_style))
        lines.append(Strip(segments, width))
    return lines


def _buckets(data: Sequence[float], count: int) -> list[Sequence[float]]:
    """``data`` in ``count`` buckets, exactly as Textual's ``Sparkline._buckets`` cuts it (bucket
    ``i`` starts at ``floor(len * i / count)``; empty ones dropped) in integers: its Fraction
    arithmetic was ~60 % of redrawing a 72-column graph (0.36 ms; micro-benchmark, loaded
    machine)."""
    size = len(data)
    parts = (data[size * i // count:size * (i + 1) // count] for i in range(count))
    return [part for part in parts if part]


def _graph_scale(metric: str, dev: DeviceSnapshot) -> tuple[float | None, float | None]:
    """Fixed scales, so the height of a bar means the same on every card and every tick."""
    if metric == "gpu_util_pct":
        return (0.0, 100.0)
    if metric == "mem_used_bytes":
        return (0.0, float(dev.mem_total_bytes) if dev.mem_total_bytes else None)
    if metric == "power_w":
        return (0.0, dev.power_limit_w)
    return (None, None)


class DeviceCard(LiveText):
    """One device: its text, then a label and a two-row graph per history shown, drawn by this one
    widget (a card of a text, labels and graphs as separate widgets put 4-8 widgets through
    Textual's compositor each tick; bench/bench_monitor_cpu.py --profile). The graphs are drawn as
    ``HistoryGraph`` draws them (same bars, colours and bucketing); only rows that changed repaint."""

    COMPONENT_CLASSES = {"devicecard--label", "devicecard--graph-min", "devicecard--graph-max"}
    DEFAULT_CSS = """
    DeviceCard { height: auto; border: round $pane-border; background: $surface; padding: 0 1;
                 width: 1fr; }
    DeviceCard.-focused { border: round $primary; }
    DeviceCard > .devicecard--label { color: $text-muted; }
    DeviceCard > .devicecard--graph-max { color: $accent; }
    DeviceCard > .devicecard--graph-min { color: $primary; }
    """
    GRAPH_HEIGHT = 2

    def __init__(self, key: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.device_key = key
        self.drawn = False  # filled at least once (later ticks skip it while scrolled away)
        self._last_markup = ""
        self.detailed = False
        self._data: dict[str, list[float]] = {metric: [] for metric, _l, _c in HISTORY_GRAPHS}
        self._scales: dict[str, tuple[float | None, float | None]] = {}
        self._graph_cache: dict[str, tuple[tuple, list[Strip]]] = {}  # metric -> (key, strips)
        self._label_cache: dict[tuple, list[Strip]] = {}
        self._graph_styles: dict[float, Style] = {}
        self._graph_colours: tuple | None = None
        self._styles_for: tuple | None = None  # (visual style, what _card_styles made of it)
        self._text_rows = 0  # rows of the device text, as last built (the graphs follow)

    def _graphs_shown(self):
        return [(metric, label) for metric, label, css in HISTORY_GRAPHS
                if self.detailed or not css]

    def _graph_origin_y(self, metric: str) -> int:
        """The first row of ``metric``'s graph within the card's content, as last built."""
        y = self._text_rows
        for name, _label in self._graphs_shown():
            if name == metric:
                return y + 1  # below its label
            y += 1 + self.GRAPH_HEIGHT
        return y

    def _build_rows(self, width: int) -> list:
        rows = super()._build_rows(width)
        self._text_rows = len(rows)
        if width <= 0:
            return rows
        label_style, colours = self._card_styles()
        base = colours[0]
        if colours != self._graph_colours or len(self._graph_styles) > 1024:
            self._graph_colours, self._graph_styles, self._graph_cache = colours, {}, {}
            self._label_cache = {}
        for metric, label in self._graphs_shown():
            key = (label, width)
            strips = self._label_cache.get(key)
            if strips is None:
                text = label[:width]
                strips = self._label_cache[key] = [Strip([
                    Segment(text, base + label_style), Segment(" " * (width - len(text)), Style(bgcolor=base.bgcolor))],
                    width)]
            rows.extend(strips)
            rows.extend(self._graph(metric, width, colours))
        return rows

    def _card_styles(self) -> tuple[Style, tuple]:
        """The labels' style and the graphs' (base, min, max) colours. Each reading walks the
        widget's ancestors (~0.1 ms a build, a fifth of drawing a card); they are kept while
        Textual's own ``visual_style`` is the same object, which Textual builds again when this
        widget's styles change or are updated (a theme, a class such as -focused)."""
        visual = self.visual_style
        kept = self._styles_for
        if kept is not None and kept[0] is visual:
            return kept[1]
        base = visual.rich_style
        _, background = self.background_colors
        colours = (base,
                   (background + self.get_component_styles("devicecard--graph-min").color).rich_color,
                   (background + self.get_component_styles("devicecard--graph-max").color).rich_color)
        styles = (self.get_component_styles("devicecard--label").rich_style, colours)
        self._styles_for = (visual, styles)
        return styles

    def _graph(self, metric: str, width: int, colours: tuple) -> list[Strip]:
        data = tuple(self._data.get(metric, ()))
        scale = self._scales.get(metric, (None, None))
        key = (data, width, scale)
        cached = self._graph_cache.get(metric)
        if cached is not None and cached[0] == key:
            return cached[1]
        base, low, high = colours
        spark = SparklineRenderable(data, width=width, height=self.GRAPH_HEIGHT, min_color=low,
                                    max_color=high, summary_function=max)
        lines = _graph_lines(spark, data, base, scale, self._graph_styles)
        lines = lines or [Strip.blank(width, base)] * self.GRAPH_HEIGHT
        self._graph_cache[metric] = (key, lines)
        return lines

    def show(self, dev: DeviceSnapshot, view: MonitorView, *, detailed: bool = False,
             clip: Region | None = None) -> None:
        """Draw ``dev``; graphs come from ``view.history(key, metric, last=N)`` (the core's
        history). ``clip``: the part of the cards' scroll canvas in view (as the card's
        ``virtual_region``); a graph outside it is not updated (the pane draws again on scroll)."""
        lines = device_lines(dev, analysis=view.tick.analyses.get(dev.key), detailed=detailed)
        changed = detailed != self.detailed
        if changed:
            clip = None  # graphs appear or go: the rows below the text move
        self.detailed = detailed
        self.set_class(detailed, "-detailed")
        width = max(self.content_size.width, 1)  # one point a cell: the rest would be averaged away
        origin = self.virtual_region.offset + Offset(self.styles.gutter.left,
                                                     self.styles.gutter.top)
        for metric, _label in self._graphs_shown():
            if clip is not None and self._rows is not None and not clip.overlaps(Region(
                    origin.x, origin.y + self._graph_origin_y(metric), width, self.GRAPH_HEIGHT)):
                continue
            scale = _graph_scale(metric, dev)
            series = view.history(dev.key, metric, last=width)
            data = self._data[metric] if series is None else list(series[-width:])
            if data != self._data[metric] or scale != self._scales.get(metric):
                self._data[metric], self._scales[metric] = data, scale
                changed = True
        # no repaint when nothing changed; only rows that changed repaint, no relayout unless the
        # number of rows changed
        self.set_lines(lines, force=changed)
        self._last_markup = self.markup_text
