"""``auto`` (the default source): the registry's local backends in their probe order (nvml, then
hpu, then neuron; ``SourceInfo.probe`` in ``sources/__init__.py``); otherwise a clear "no accelerator
found" state. It never falls back to simulated data: demos ask for ``sim`` or ``replay:demo``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.sources import load_opener, probe_order
from fleet_tui.core.monitor.sources.host import HostReader


class NoDeviceSource(Source):
    """What ``auto`` becomes when no backend works: host stats and a message saying why."""

    name = "none"
    kind = "none"

    def __init__(self, reasons: list[str] | None = None, *, host: bool = True) -> None:
        self.reasons = list(reasons or [])
        self.message = "no accelerator found" + (": " + "; ".join(self.reasons) if self.reasons else "")
        self._host = HostReader() if host else None

    async def sample(self) -> Snapshot:
        return Snapshot(
            timestamp=time.time(),
            source="none",
            source_kind="none",
            host=self._host.read() if self._host is not None else None,
            message=self.message,
        )


def _default_candidates(opts: dict[str, Any]) -> list[tuple[str, Callable[[], Source]]]:
    """The registry's probe order (``SourceInfo.probe``), each opened only when its turn comes."""
    def make(path: str) -> Callable[[], Source]:
        return lambda: load_opener(path)(**opts)

    return [(info.name, make(info.probe_opener or info.opener)) for info in probe_order()]


class AutoSource(Source):
    """Delegates to the first backend whose ``open()`` succeeds; ``chosen`` says which."""

    name = "auto"
    kind = "live"

    def __init__(self, *, candidates: list[tuple[str, Callable[[], Source]]] | None = None, **opts: Any) -> None:
        self._candidates = candidates if candidates is not None else _default_candidates(dict(opts))
        self._delegate: Source | None = None
        self.chosen: str | None = None
        self.reasons: list[str] = []

    async def open(self) -> None:
        if self._delegate is not None:
            return
        self.reasons = []
        for label, make in self._candidates:
            try:
                src = make()
                await src.open()
            except UserError as exc:  # SourceUnavailable and friends: say why, try the next
                self.reasons.append(f"{label}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a broken backend must not stop auto
                self.reasons.append(f"{label}: {type(exc).__name__}: {exc}")
                continue
            self._delegate, self.chosen = src, label
            self.name, self.kind = src.name, src.kind
            return
        self._delegate = NoDeviceSource(self.reasons)
        self.chosen = "none"
        self.name, self.kind = "none", "none"

    async def sample(self) -> Snapshot:
        if self._delegate is None:
            await self.open()
        assert self._delegate is not None
        return await self._delegate.sample()

    async def prime(self) -> bool:
        if self._delegate is None:
            await self.open()
        assert self._delegate is not None
        return await self._delegate.prime()

    async def close(self) -> None:
        if self._delegate is not None:
            await self._delegate.close()
