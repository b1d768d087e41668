"""Small corrections to Textual (pinned in pyproject.toml) that the app installs at start.

``Strip.divide`` caches its answer on the strip; when the only cut is at the strip's end the answer
is ``[the strip itself]``, so the strip refers to itself through its own cache. The compositor
divides every line it draws, so each line drawn unchanged across a region became a reference cycle
that only the garbage collector frees. Where the fleet panes freeze what survives a refresh
(``ui.fleet.FrozenSurvivors``), those cycles waited for the next full collection of ~250,000
objects (~150-190 ms with the GIL held at 4,096 GPUs): ~1,200 strips and ~17,000 objects they
held per 60 refreshes. The same answer without the cache entry costs a list comprehension.

A partial update (some widgets refreshed, the screen's layout unchanged) renders every visible
widget whose clip overlaps the box around all the dirty regions; a widget's clip is its
container's area, so on the monitor pane that was all 18 widgets on every tick, the footer, the
pane bar and the untouched side panel included, for a tick that changed the host line, the table,
one card's rows and a process row. Only a widget whose visible area overlaps a dirty region can
put a cell into the lines the update writes (``ChopsUpdate`` writes the dirty spans only, and skips
what no widget rendered), so ``partial_update_renders_dirty_widgets`` renders just those: the
terminal receives the same bytes (tests/ui/test_textual_fixes.py compares them), and the pane's
compositor time fell from 3.2 to 2.3 ms a second on sim:64 (headless, 30 s).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip

_installed = False
# More dirty regions than this (a fleet grid repainted cell by cell): checking each widget against
# each region would cost more than it saves; Textual's own choice then.
MAX_DIRTY_REGIONS = 64
_update = threading.local()  # the dirty regions of the partial update being rendered, if any


def install() -> None:
    """Apply the corrections once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    divide = Strip.divide

    def divide_without_self_cycle(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        length = self.cell_length
        cuts = [cut for cut in cuts if cut <= length]
        if cuts == [length]:
            return [self]  # Textual's answer, not cached on the strip
        return divide(self, cuts)

    divide_without_self_cycle.__doc__ = divide.__doc__
    Strip.divide = divide_without_self_cycle
    partial_update_renders_dirty_widgets()


def partial_update_renders_dirty_widgets() -> None:
    """Make ``Compositor.render_partial_update`` render only the widgets a dirty region touches."""
    if getattr(Compositor, "_fleet_tui_dirty_only", False):
        return
    partial, get_renders = Compositor.render_partial_update, Compositor._get_renders

    def render_partial_update(self):
        _update.dirty = tuple(self._dirty_regions)  # Textual clears them before rendering
        try:
            return partial(self)
        finally:
            _update.dirty = None

    def _get_renders(self, crop: Region | None = None):
        dirty = getattr(_update, "dirty", None)
        if crop is None or not dirty or len(dirty) > MAX_DIRTY_REGIONS:
            return get_renders(self, crop)
        return _dirty_renders(self.visible_widgets, dirty)

    render_partial_update.__doc__ = partial.__doc__
    _get_renders.__doc__ = get_renders.__doc__
    Compositor.render_partial_update = render_partial_update
    Compositor._get_renders = _get_renders
    Compositor._fleet_tui_dirty_only = True


def _dirty_renders(visible: dict, dirty: Sequence[Region]
                   ) -> Iterator[tuple[Region, Region, list[Strip]]]:
    """(region, clip, lines) of each visible widget, in render order, whose visible area overlaps
    one of ``dirty``: what ``Compositor._get_renders`` yields for those widgets."""
    intersection = Region.intersection
    for widget, (region, clip) in visible.items():
        x, y, width, height = shown = intersection(region, clip)
        if not (width and height) or not any(shown.overlaps(d) for d in dirty):
            continue
        if shown == region:  # wholly visible: all of it, as Textual renders it
            yield region, clip, widget.render_lines(Region(0, 0, region.width, region.height))
        else:
            yield region, clip, widget.render_lines(
                Region(x - region.x, y - region.y, width, height))
