"""Cheap text updates for widgets redrawn every tick.

``Static.update`` re-lays out the whole screen by default. A monitor tick mostly changes numbers,
not the shape of the text, so ``update_text`` skips unchanged text entirely and asks for a layout
pass only when the number of (wrapped) lines can have changed.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from itertools import islice

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content, Span
from textual.geometry import Region
from textual.markup import escape
from textual.strip import Strip
from textual.visual import Visual
from textual.widgets import Static

from fleet_tui.core.textsafe import clean, clean_lines


def escape_text(text: object, *, lines: bool = False) -> str:
    """Text from outside (a node's name, an error from the network) as markup that shows it as
    typed: control characters through ``core.textsafe.clean`` (``lines=True``: newlines kept, for
    a report of several lines), ``[`` escaped."""
    return escape(clean_lines(text) if lines else clean(text))


#: A rendered line's piece: (start, end) in its text, its own text past the end (else None), style
Run = tuple[int, int, "str | None", "RichStyle | None"]

#: A line as ``(text, style)`` parts (style None: unstyled), for ``styled_line``
Parts = list[tuple[str, str | None]]


def styled_line(parts: Iterable[tuple[str, str | None]], outer: str | None = None
                ) -> tuple[str, Content]:
    """One line from ``(text, style)`` parts: its markup, and the Content that markup parses to,
    built without parsing it (parsing took ~70 µs a line, two thirds of what it costs to redraw
    a changed table row; a test checks the two are the same). ``outer`` styles the whole line."""
    markup, plain, spans, pos = [], [], [], 0
    for text, style in parts:
        if not text:
            continue
        if not text.isprintable():  # a process name or label from outside: no escape codes
            text = clean(text)
        end = pos + len(text)
        if style:
            spans.append(Span(pos, end, style))
            markup.append(f"[{style}]{escape(text)}[/]")
        else:
            markup.append(escape(text))
        plain.append(text)
        pos = end
    line = "".join(markup)
    if outer and pos:
        spans.insert(0, Span(0, pos, outer))
        line = f"[{outer}]{line}[/{outer}]"
    return line, Content("".join(plain), spans)


def _height(content: Content, width: int) -> int:
    """Lines the text takes at ``width`` (what an auto-height widget's layout depends on)."""
    width = max(width, 1)
    return sum(-(-max(line.cell_length, 1) // width) for line in content.split("\n"))


class _Shown:
    """What ``update_text`` last showed in a widget: the markup, its height, the height kept."""

    __slots__ = ("markup", "shape", "reserved_lines")

    def __init__(self) -> None:
        self.markup: str | None = None
        self.shape: int | None = None  # lines at the widget's width
        self.reserved_lines: int | None = None  # the height kept with reserve=True


_SHOWN: weakref.WeakKeyDictionary[Static, _Shown] = weakref.WeakKeyDictionary()


def update_text(widget: Static, markup: str, *, reserve: bool = False,
                content: Content | None = None) -> None:
    """Show ``markup``. ``reserve=True`` (for a text inside a scroll area whose length changes
    every tick): the widget keeps a fixed height that only grows, or shrinks by a lot, so most
    updates repaint without re-laying out the screen. ``content``: ``markup`` already parsed (in a
    worker thread), so the event loop does not parse it again."""
    if isinstance(widget, LiveText) and content is None:
        widget.set_markup(markup, reserve=reserve)
        return
    shown = _SHOWN.get(widget)
    if shown is None:
        shown = _SHOWN[widget] = _Shown()
    if markup == shown.markup:
        return
    shown.markup = markup
    if reserve:
        content = content if content is not None else Content.from_markup(markup)
        needed = _height(content, widget.content_size.width or widget.size.width or 40)
        current = shown.reserved_lines
        if current is None or needed > current or needed < current - 8:
            shown.reserved_lines = needed + 4  # word-wrap slack
            widget.styles.height = needed + 4
        widget.update(content, layout=False)
        return
    if content is None:
        content = Content.from_markup(markup)  # parsed once, handed to the widget as is
    shape = _height(content, widget.content_size.width)
    relayout = shape != shown.shape
    shown.shape = shape
    widget.update(content, layout=relayout)


def _slack(rows: int) -> int:
    """Blank rows a reserved height keeps below its text. The monitor's diagnoses wrap to 70-78
    rows on sim:8 (findings come and go every few ticks): with a fixed 4 the panel's height, and so
    the screen's layout (~13 ms), changed every ~7 s at 0.25 s."""
    return 4 + rows // 8


class LiveText(Static):
    """A Static for text redrawn every tick that repaints only the lines that changed.

    ``Static.update`` re-renders every line of the widget and repaints all of it. Here each line
    of the markup is parsed once (and kept while it stays the same), rendered to strips once per
    width, and after an update only the rows whose strips differ are marked dirty; an update that
    changes the number of rows re-lays out as ``update_text`` would. Each line of the markup must
    stand alone (tags closed on the line they open), which is how the monitor writes it. What it
    shows is exactly what a Static with the same markup shows (a test compares them).
    """

    _PARSE_CACHE_SIZE = 512
    _STRIPS_KEPT = 256  # rendered lines kept per widget (each a few strips)

    def __init__(self, markup: str = "", **kwargs) -> None:
        super().__init__("", **kwargs)
        self._markup = ""
        self._parsed: dict[str, Content] = {}
        # shape -> ((start, end, text or None, style) per segment, cell length): see _render_line
        self._runs: dict[tuple[object, ...], tuple[tuple[Run, ...], int]] = {}
        self._line_strips: dict[tuple[int, str], list] = {}  # (line no, markup) -> its strips
        self._strips_width = -1
        self._rows: list | None = None  # strips of every row at _strips_width
        if markup:
            self.set_markup(markup)

    @property
    def markup_text(self) -> str:
        return self._markup

    def render(self):
        return Content.from_markup(self._markup) if self._markup else Content("")

    def update(self, content="", *, layout: bool = True) -> None:  # noqa: ARG002 - decided here
        """Text only: markup (or plain text when markup is off) or a Content."""
        if isinstance(content, Content):  # each line's markup standing alone
            content = "\n".join(line.markup for line in content.split("\n", allow_blank=True))
        elif not self._render_markup:
            content = escape(str(content))
        self.set_markup(str(content))

    def refresh(self, *regions, repaint: bool = True, layout: bool = False, recompose: bool = False):
        if repaint and not regions:  # styles, theme or size changed: render every line again
            self._line_strips = {}
            self._runs = {}
            self._rows = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def set_lines(self, lines: Sequence[tuple[str, Content]], *, reserve: bool = False,
                  force: bool = False) -> None:
        """Show lines made by ``styled_line``: as ``set_markup`` of their markup, minus parsing."""
        parsed = self._parsed
        if len(parsed) + len(lines) > self._PARSE_CACHE_SIZE:
            parsed.clear()
        for markup, content in lines:
            parsed[markup] = content
        self.set_markup("\n".join(markup for markup, _content in lines), reserve=reserve,
                        force=force)

    def set_markup(self, markup: str, *, reserve: bool = False, force: bool = False) -> None:
        """``force``: build the rows again even if the markup is the same (a subclass whose rows
        hold more than its markup, as a device card's graphs)."""
        if markup == self._markup and self._rows is not None and not force:
            return
        self._markup = markup
        self._last_markup_text = markup
        width = self.size.width
        old = self._rows
        if old is None or width <= 0 or width != self._strips_width or not self.is_mounted:
            self._rows = None
            self._resize_for(reserve)
            return
        new = self._rows = self._build_rows(width)
        if len(new) != len(old) and not (reserve and self._fits_reserved(len(new))):
            self._resize_for(reserve)  # the rows just built stay: only the height changes
            return
        # Same height, or a reserved height that still holds the text: repaint the rows that
        # changed, and those the text grew into or left, without laying out the screen.
        dirty = [y for y, (a, b) in enumerate(zip(old, new)) if a is not b]
        dirty += range(min(len(old), len(new)), max(len(old), len(new)))
        if dirty:  # one region per run of changed rows
            regions, start = [], dirty[0]
            for previous, y in zip(dirty, dirty[1:] + [-1]):
                if y != previous + 1:
                    regions.append(Region(0, start, width, previous - start + 1))
                    start = y
            self.refresh(*regions)

    def _fits_reserved(self, rows: int) -> bool:
        """A reserved height (``reserve=True``) that needs no change for ``rows`` rows."""
        current = getattr(self, "_reserved_lines", None)
        return current is not None and current - 2 * _slack(current) <= rows <= current

    def _resize_for(self, reserve: bool) -> None:
        """The number of rows changed: a new height (the rows already built are kept; a
        regionless ``refresh`` would drop them, so Widget.refresh is called directly)."""
        if reserve:
            width = self.content_size.width or self.size.width or 40
            if width != self._strips_width:
                self._rows = None
            needed = len(self._rows if self._rows is not None else self._build_rows(width))
            if not self._fits_reserved(needed):
                self._reserved_lines = needed + _slack(needed)
                self.styles.height = self._reserved_lines
            super().refresh()
            return
        super().refresh(layout=True)

    def _content(self, line: str) -> Content:
        content = self._parsed.get(line)
        if content is None:
            if len(self._parsed) >= self._PARSE_CACHE_SIZE:
                self._parsed.clear()
            content = self._parsed[line] = Content.from_markup(line)
        return content

    def _build_rows(self, width: int) -> list:
        if width != self._strips_width:
            self._line_strips, self._strips_width = {}, width
        cache = self._line_strips
        rows = []
        style = self.visual_style
        link_style = None  # Widget.link_style blends the ancestors' backgrounds: once a build
        for index, line in enumerate(self._markup.split("\n")):
            key = (index, line)
            strips = cache.pop(key, None)  # put back last: the cache drops the oldest first
            if strips is None:
                if link_style is None and "@click" in line:
                    link_style = self.link_style
                strips = self._render_line(index, self._content(line), width, style, link_style)
            cache[key] = strips
            rows.extend(strips)
        # Lines seen recently keep their strips: a value that comes back (a steady 100 %, a
        # temperature that wobbles by a degree) is not rendered again.
        excess = len(cache) - max(self._STRIPS_KEPT, 2 * len(rows))
        for key in list(islice(cache, excess)) if excess > 0 else ():
            del cache[key]
        return rows

    def _render_line(self, index: int, content: Content, width: int, style,
                     link_style=None) -> list[Strip]:
        """Line ``index`` of the text as strips, as ``Visual.to_strips`` renders it within the
        whole text. Its segments carry their (column, line) for text selection, so each formatted
        line is given ``index`` as its line before it becomes a strip (Content.render_strips,
        which numbers lines from 0, is otherwise followed step by step)."""
        if width <= 0:
            return [Strip.blank(0)]
        if self.styles.content_align != ("left", "top"):  # alignment needs the whole text
            padded = Content("\n" * index) + content if index else content
            return Visual.to_strips(self, padded, width, None, style)[index:] or [Strip.blank(0)]
        styles = self.styles
        align = styles.text_align  # "start" unless set: formatted as "left"
        line_pad = styles.line_pad
        # A line that fits needs no word wrapping (rich's divide_line was a third of a line's
        # cost): Content formats it as one line either way, so ask for that directly.
        fits = (content.cell_length <= width and not line_pad and align != "justify"
                and "\t" not in content.plain)
        # A line that changed only its text (a number ticked), not its shape (span positions and
        # styles, length, width), is cut and styled as it was last time: the rendered segments'
        # styles (with their text-selection offsets) are reused and only the text is sliced anew.
        # Textual's to_strip built those styles again per segment, ~70 % of rendering a line.
        shape = None
        spans = content.spans
        if fits and align in ("left", "start") and not any(
                "@click" in str(span.style) for span in spans):
            shape = (index, width, len(content.plain), content.cell_length, style, tuple(spans))
            kept = self._runs.get(shape)
            if kept is not None:
                runs, cells = kept
                plain = content.plain
                return [Strip([Segment(plain[start:end] if text is None else text, seg_style)
                               for start, end, text, seg_style in runs], cells)]
        lines = content._wrap_and_format(
            width,
            align=align,
            overflow=styles.text_overflow,
            no_wrap=fits or styles.text_wrap == "nowrap",
            line_pad=line_pad,
            tab_size=8,
            get_style=self._get_style,
        )
        for line in lines:
            line.y = index
        strips = [Strip(*line.to_strip(style)) for line in lines]
        if shape is not None and len(strips) == 1:
            self._keep_runs(shape, content.plain, strips[0])
        # as Visual.to_strips does; only segments with a click action change, so a line without
        # one is left as it is
        if link_style is not None and self.auto_links and not self.screen._selecting:
            strips = [strip._apply_link_style(link_style) for strip in strips]
        return strips or [Strip.blank(0)]

    _RUNS_KEPT = 512  # line shapes kept per widget

    def _keep_runs(self, shape: tuple, plain: str, strip: Strip) -> None:
        """Where ``strip`` (the rendered line ``plain``) cuts its text, and each piece's style;
        pieces past the text (padding) keep their own text. Kept only when the pieces are the
        text itself, in order (so slicing another text of the same shape renders it exactly)."""
        runs: list[Run] = []
        offset, length = 0, len(plain)
        for segment in strip:
            text = segment.text
            end = offset + len(text)
            if offset < length:
                if end > length or plain[offset:end] != text or segment.control:
                    return
                runs.append((offset, end, None, segment.style))
            else:
                runs.append((offset, end, text, segment.style))
            offset = end
        if offset < length:
            return
        if len(self._runs) >= self._RUNS_KEPT:
            self._runs.clear()
        self._runs[shape] = (tuple(runs), strip.cell_length)

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(len(self._build_rows(width)), 1) if width > 0 else 1

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # selecting text: the plain path handles highlights
            return super().render_line(y)
        self._dirty_regions.clear()  # Static's own whole-text render is not used on this path
        width = self.size.width
        if self._rows is None or width != self._strips_width:
            self._rows = self._build_rows(width)
        rows = self._rows
        return rows[y] if y < len(rows) else Strip.blank(width, self.visual_style.rich_style)
