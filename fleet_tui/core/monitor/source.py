"""The interface every live-data source implements.

A source is opened once, sampled repeatedly, and closed. ``sample`` is async; anything that blocks
(NVML C calls, subprocesses, HTTP) runs in a thread (``asyncio.to_thread``) so the event loop never
stalls. The caller schedules the next sample after the previous one finishes, so polls never pile up.
"""

from __future__ import annotations

import abc

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.snapshot import Snapshot, SourceKind


class SourceUnavailable(UserError):
    """The source cannot run here (no driver, no library, no such file/URL)."""


class Source(abc.ABC):
    name: str = "source"
    kind: SourceKind = "live"

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire handles; raise SourceUnavailable with a clear message if impossible."""

    @abc.abstractmethod
    async def sample(self) -> Snapshot:
        """One reading of every device (and the host where the source has it)."""

    async def prime(self) -> bool:
        """Take the first of the two samples that interval readings need (GPM's SM, tensor and
        DRAM activity describe the time between two samples), so the next ``sample`` has them.
        True when something was primed and the caller should wait an interval; the default
        source has nothing to prime. A one-shot read calls it; a running monitor needs no prime
        (each tick is the next one's start)."""
        return False

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release handles. Safe to call twice."""

    async def __aenter__(self) -> "Source":
        await self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
