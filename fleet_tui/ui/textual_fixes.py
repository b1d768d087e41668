"""Small corrections to Textual (pinned in pyproject.toml) that the app installs at start.

``Strip.divide`` caches its answer on the strip; when the only cut is at the strip's end the answer
is ``[the strip itself]``, so the strip refers to itself through its own cache. The compositor
divides every line it draws, so each line drawn unchanged across a region became a reference cycle
that only the garbage collector frees. Where the fleet panes freeze what survives a refresh
(``ui.runtime.FrozenSurvivors``), those cycles waited for the next full collection of ~250,000
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

The terminal driver's input thread waits for keys in ``select`` with a 0.1 s timeout, so it wakes
ten times a second with nothing to read: 1.8-2.0 ms of CPU a second (scheduler statistics, in
tmux), as much as the rest of a bare Textual clock app and an eighth of the monitor pane's on
sim:64. The timeout serves two things: the escape key, which the parser emits once a short delay
passes with nothing after it, and noticing that the driver stops. ``input_thread_waits`` waits
until input arrives, until the parser's own deadline when it has one, or until the driver's exit
event is set, which now also writes to a pipe the thread waits on: 0.0 ms a second when idle.
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder
from collections.abc import Iterable, Iterator, Sequence

from textual._compositor import Compositor
from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Region
from textual.strip import Strip

#: The Textual release these corrections were written against (pyproject.toml pins it), and the
#: SHA-256 (first 16 hex digits) of the source of each Textual function they replace or wrap, as of
#: that release: tests/ui/test_textual_fixes.py fails when Textual's source differs, so an upgrade
#: re-reads each correction before it ships.
WRITTEN_FOR = "8.2.8"
PATCHED = {
    "textual.strip:Strip.divide": "708bd67448d837d1",  # self-referencing cache entry
    "textual._compositor:Compositor.render_partial_update": "b61a8d73910172a0",  # renders all in the box
    "textual._compositor:Compositor._get_renders": "c5f86e10abeff84b",
    "textual.drivers.linux_driver:LinuxDriver.__init__": "6f29bfa419143f25",  # 0.1 s input polling
    "textual.drivers.linux_driver:LinuxDriver.run_input_thread": "3c7a9834635c05f9",
}

_installed = False
#: The corrections applied in this process, by the name of the function that applies each
APPLIED: set[str] = set()
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
    input_thread_waits()


def partial_update_renders_dirty_widgets() -> None:
    """Make ``Compositor.render_partial_update`` render only the widgets a dirty region touches."""
    if "partial_update_renders_dirty_widgets" in APPLIED:
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
    APPLIED.add("partial_update_renders_dirty_widgets")


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


class WakingEvent(threading.Event):
    """The driver's exit event: setting it also wakes the input thread waiting in ``select``."""

    def __init__(self) -> None:
        super().__init__()
        self.wake_lock = threading.Lock()  # held to write to or close the pipe
        self.wake_fd: int | None = None  # the pipe's write end while the input thread runs

    def set(self) -> None:
        super().set()
        with self.wake_lock:
            if self.wake_fd is not None:
                try:
                    os.write(self.wake_fd, b"\0")
                except OSError:  # the pipe is full: the thread is being woken already
                    pass


def input_thread_waits() -> None:
    """Make ``LinuxDriver``'s input thread wait for input, the parser's deadline or the stop."""
    if "input_thread_waits" in APPLIED:
        return
    init, upstream = LinuxDriver.__init__, LinuxDriver.run_input_thread

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.exit_event = WakingEvent()

    def run_input_thread(self) -> None:
        exit_event = self.exit_event
        if not isinstance(exit_event, WakingEvent):
            return upstream(self)
        try:
            wake_r, wake_w = os.pipe()
        except OSError:  # no file descriptors left: Textual's polling loop
            return upstream(self)
        fileno = self.fileno
        selector = selectors.SelectSelector()
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def dispatch(events, final: bool = False) -> bool:
            """As Textual's loop: read what the terminal sent, parse, then let the parser emit
            what its deadline released (a lone escape). True when the input has ended."""
            ended = False
            reads = [mask for key, mask in events if key.fd == fileno]
            for last, mask in loop_last(reads):
                if mask & selectors.EVENT_READ:
                    text = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not text:  # end of input (stdin piped and closed): nothing more comes
                        ended = True
                        break
                    for event in parser.feed(text):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return ended

        with exit_event.wake_lock:
            exit_event.wake_fd = wake_w
        try:
            ended = False
            while not exit_event.is_set() and not ended:
                due = parser._timeout_time  # the escape delay's end, while one runs
                # at the end of input the descriptor stays readable: stop, or select spins
                ended = dispatch(selector.select(None if due is None else max(due - get_time(), 0.0)))
            selector.unregister(fileno)
            if not ended:
                dispatch(selector.select(0.1), final=True)
        finally:
            with exit_event.wake_lock:
                exit_event.wake_fd = None
                os.close(wake_w)
            selector.close()
            os.close(wake_r)
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass

    run_input_thread.__doc__ = upstream.__doc__
    LinuxDriver.__init__ = __init__
    LinuxDriver.run_input_thread = run_input_thread
    APPLIED.add("input_thread_waits")
