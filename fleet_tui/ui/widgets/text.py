"""Cheap text updates for widgets redrawn every tick.

``Static.update`` re-lays out the whole screen by default. A monitor tick mostly changes numbers,
not the shape of the text, so ``update_text`` skips unchanged text entirely and asks for a layout
pass only when the number of (wrapped) lines can have changed.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


def _height(content: Content, width: int) -> int:
    """Lines the text takes at ``width`` (what an auto-height widget's layout depends on)."""
    width = max(width, 1)
    return sum(-(-max(line.cell_length, 1) // width) for line in content.split("\n"))


def update_text(widget: Static, markup: str, *, reserve: bool = False,
                content: Content | None = None) -> None:
    """Show ``markup``. ``reserve=True`` (for a text inside a scroll area whose length changes
    every tick): the widget keeps a fixed height that only grows, or shrinks by a lot, so most
    updates repaint without re-laying out the screen. ``content``: ``markup`` already parsed (in a
    worker thread), so the event loop does not parse it again."""
    if markup == getattr(widget, "_last_markup_text", None):
        return
    if reserve:
        widget._last_markup_text = markup  # type: ignore[attr-defined]
        content = content if content is not None else Content.from_markup(markup)
        needed = _height(content, widget.content_size.width or widget.size.width or 40)
        current = getattr(widget, "_reserved_lines", None)
        if current is None or needed > current or needed < current - 8:
            widget._reserved_lines = needed + 4  # type: ignore[attr-defined]  # word-wrap slack
            widget.styles.height = needed + 4
        widget.update(content, layout=False)
        return
    widget._last_markup_text = markup  # type: ignore[attr-defined]
    if content is None:
        content = Content.from_markup(markup)  # parsed once, handed to the widget as is
    shape = _height(content, widget.content_size.width)
    relayout = shape != getattr(widget, "_last_markup_shape", None)
    widget._last_markup_shape = shape  # type: ignore[attr-defined]
    widget.update(content, layout=relayout)
