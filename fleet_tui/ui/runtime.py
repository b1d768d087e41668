"""The app's garbage-collector policy, in one place (the only module that calls ``gc``).

Python's collector walks every tracked object on a full collection with the GIL held. The app
keeps what lives as long as the process (catalog, themes, widgets) and, at fleet scale, ~40 objects
per device in the core's history: without a policy those walks were the UI's longest blocks. The
measurements behind each setting are printed by ``bench/bench_monitor_cpu.py --gc`` (one machine)
and ``bench/bench_fleet.py --app-refreshes N`` (a fleet); ``docs/speed.md`` quotes them.
"""

from __future__ import annotations

import gc
import sys

#: Young collections every 5,000 net allocations instead of 700: a tick's survivors (history,
#: widgets' line caches) mostly die a few ticks later, so collecting them sooner only costs time.
STEADY_GC_THRESHOLDS = (5000, 4, 10)
#: A fleet pane runs a full collection only when Python's memory has grown by this share since the
#: base: what unknown reference cycles can hold is bounded by what lives (Go's GOGC=100 rule).
FULL_COLLECT_GROWTH = 1.0

_steady = False


def settle_after_first_tick() -> None:
    """Once a process, when the first reading is drawn: what exists then lives as long as the app,
    so freeze it out of full collections, and set the steady thresholds."""
    global _steady
    if _steady:
        return
    _steady = True
    gc.freeze()
    gc.set_threshold(*STEADY_GC_THRESHOLDS)


def release_frozen() -> None:
    """What was frozen goes back to the collector (a pane unmounted: tests run many apps)."""
    gc.unfreeze()


class FrozenSurvivors:
    """What a fleet pane keeps out of the collector's sight: after each drawn view the survivors are
    frozen, so young collections see only what later refreshes made; reference counting still
    frees frozen objects, and a full collection runs only when memory grew by
    ``FULL_COLLECT_GROWTH`` once the engine's windows are full (while they fill, memory grows by
    design and a full collection finds nothing)."""

    def __init__(self) -> None:
        self.base: int | None = None  # Python's memory blocks when the base was last taken
        self.full_collections = 0
        self._filled = False  # the base was retaken after the engine's windows filled

    def freeze(self, filling: bool = False) -> None:
        """After a drawn view: collect this refresh's young garbage, then freeze what survives;
        in full on the first view and when memory outgrew the base. ``filling``: the engine's
        history and windows are still filling (``MonitorEngine.filling``); the first view after
        that retakes the base."""
        blocks = sys.getallocatedblocks()  # 30 µs, where counting frozen objects walks them all
        if self.base is None or (not filling and self._filled
                                 and blocks > self.base * (1 + FULL_COLLECT_GROWTH)):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.base = sys.getallocatedblocks()
            self.full_collections += 1
            return
        if not filling and not self._filled:
            self._filled = True
            self.base = blocks  # what the pane needs with its windows full
        gc.collect(1)  # this refresh's young garbage first, so none of it is frozen
        gc.freeze()
