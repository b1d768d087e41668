"""``replay:PATH[@SPEED]``: play a recording back at real time x speed.

Reads both formats through ``core.monitor.trace.iter_trace`` (the raw H200 capture and fleet-tui's
own recordings), streaming the file. Which snapshot is "now" follows the file's timestamps: after
``sample()`` has been running for E seconds of the injected clock, the latest snapshot with
``timestamp <= first + E * speed`` is returned, so a caller polling every second at speed 10 sees
every tenth second of the recording. ``phase`` labels are carried through untouched.

At the end of the file the source stays on the last snapshot and says so in ``message``; with
``loop=True`` it starts again, shifting timestamps forward so time never runs backwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Generator
from pathlib import Path

from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.trace import iter_trace, resolve_trace_path


def open_recording(path: str, speed: float = 1.0, **opts) -> "ReplaySource":
    """The ``replay:PATH[@SPEED]`` opener: ``demo`` is the bundled H200 trace; a missing file is a
    SourceUnavailable before anything opens."""
    if path != "demo" and not Path(path).expanduser().is_file():
        raise SourceUnavailable(f"recording {str(Path(path).expanduser())!r} does not exist or is not a "
                                "file (use replay:demo for the bundled H200 trace).")
    return ReplaySource("demo" if path == "demo" else Path(path).expanduser(), speed, **opts)


class ReplaySource(Source):
    kind = "replay"

    def __init__(
        self,
        path: str | os.PathLike[str],
        speed: float = 1.0,
        loop: bool = False,
        *,
        clock=time.monotonic,
        **_ignored,
    ) -> None:
        if not speed or speed <= 0:
            raise ValueError(f"replay speed must be positive, got {speed!r}")
        self.path = resolve_trace_path(path)
        self.speed = float(speed)
        self.loop = loop
        self._clock = clock
        label = "demo" if str(path) == "demo" else Path(path).name
        self.name = f"replay:{label}"
        self._it: Generator[Snapshot, None, None] | None = None
        self._current: Snapshot | None = None
        self._next: Snapshot | None = None
        self._first_ts = 0.0
        self._start = 0.0
        self._offset = 0.0  # added to timestamps after each loop
        self._last_ts = 0.0
        self._ended = False
        self.loops = 0
        self._count = 0

    @property
    def ended(self) -> bool:
        """True once a non-looping replay reached its last snapshot (it stays there)."""
        return self._ended

    async def open(self) -> None:
        if self._it is None:
            await asyncio.to_thread(self._restart)

    async def sample(self) -> Snapshot:
        if self._it is None:
            await self.open()
        snap = await asyncio.to_thread(self._advance)
        return snap

    async def close(self) -> None:
        it, self._it = self._it, None
        if it is not None:
            it.close()  # closes the file held by the generator

    # -- worker thread --------------------------------------------------------------------------

    def _restart(self) -> Snapshot:
        """Reads the recording again from its first snapshot, which it returns."""
        if self._it is not None:
            self._it.close()
        self._it = it = iter_trace(self.path)
        first = next(it, None)
        if first is None:
            raise SourceUnavailable(f"recording {str(self.path)!r} holds no snapshots")
        self._current = first
        self._next = next(it, None)
        self._first_ts = first.timestamp
        self._count = 1
        self._start = self._clock()
        self._ended = False
        return first

    def _advance(self) -> Snapshot:
        it, current = self._it, self._current
        if it is None or current is None:  # (sample() opens the recording first)
            raise SourceUnavailable("the replay is closed")
        target = self._first_ts + (self._clock() - self._start) * self.speed
        while self._next is not None and self._next.timestamp <= target + 1e-9:
            current, self._next = self._next, next(it, None)
            self._count += 1
        self._current = current
        if self._next is None:
            span = current.timestamp - self._first_ts
            step = span / max(1, self._count - 1) if span > 0 else 1.0
            if not self.loop:
                self._ended = True
            elif target + 1e-9 >= current.timestamp + step:  # the last snapshot had its turn
                self._offset += span + step
                self.loops += 1
                current = self._restart()
        return self._present(current)

    def _present(self, snap: Snapshot) -> Snapshot:
        notes = [snap.message] if snap.message else []
        if snap.source_kind != "replay" and snap.source:
            notes.append(f"replay of a {snap.source} recording")
        if self._ended:
            notes.append(f"end of recording {self.path.name}: showing its last snapshot")
        message = "; ".join(notes) or None
        if self._offset:
            off = self._offset
            snap = dataclasses.replace(
                snap,
                timestamp=snap.timestamp + off,
                devices=tuple(dataclasses.replace(d, timestamp=d.timestamp + off) for d in snap.devices),
            )
        return dataclasses.replace(snap, source=self.name, source_kind="replay", message=message)
