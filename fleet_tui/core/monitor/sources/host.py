"""Host readings shared by the live sources: CPU per core, RAM, load, and who owns a GPU process.

psutil reads /proc; every call here is cheap (tens of µs) but still blocking, so sources call it from
the same worker thread that does their device reads, never from the event loop.
"""

from __future__ import annotations

import os
import shlex

from fleet_tui.core.monitor.snapshot import HostSnapshot

try:  # psutil is a declared dependency; stay importable without it (host stats become N/A)
    import psutil
except ImportError:  # pragma: no cover - only on broken installs
    psutil = None  # type: ignore[assignment]

_COMMAND_MAX_CHARS = 200


class HostReader:
    """Reads host CPU/RAM/load. The first per-core CPU reading is primed at construction, because
    psutil's ``cpu_percent(interval=None)`` measures since the previous call."""

    def __init__(self) -> None:
        if psutil is not None:
            psutil.cpu_percent(percpu=True)

    def read(self) -> HostSnapshot:
        if psutil is None:
            return HostSnapshot()
        per_core = tuple(float(v) for v in psutil.cpu_percent(percpu=True))
        vm = psutil.virtual_memory()
        try:
            load = os.getloadavg()
        except (OSError, AttributeError):  # Windows
            load = None
        return HostSnapshot(
            cpu_pct=(sum(per_core) / len(per_core)) if per_core else None,
            cpu_per_core_pct=per_core,
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            load_avg=(float(load[0]), float(load[1]), float(load[2])) if load else None,
        )


class ProcessResolver:
    """pid -> (user, command), cached while the pid keeps showing up on a device.

    Looking a process up costs ~50-100 µs (several /proc reads), so a training job seen every tick
    is looked up once. Inside a container without the host PID namespace NVML reports host pids that
    do not exist here (nvidia-docker #1483); those resolve to (None, None) rather than a wrong name.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[str | None, str | None]] = {}

    def lookup(self, pid: int) -> tuple[str | None, str | None]:
        hit = self._cache.get(pid)
        if hit is None:
            hit = self._cache[pid] = _describe(pid)
        return hit

    def forget_except(self, live_pids: set[int]) -> None:
        """Drop pids that no device reports any more (pids get reused)."""
        if len(self._cache) > len(live_pids):
            for pid in [p for p in self._cache if p not in live_pids]:
                del self._cache[pid]


def _describe(pid: int) -> tuple[str | None, str | None]:
    if psutil is None:
        return None, None
    try:
        proc = psutil.Process(pid)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None, None
    user = command = None
    try:
        user = proc.username()
    except (psutil.Error, KeyError):  # KeyError: uid without a passwd entry
        pass
    try:
        argv = proc.cmdline()
        command = shlex.join(argv) if argv else proc.name()
    except psutil.Error:
        try:
            command = proc.name()
        except psutil.Error:
            command = None
    if command and len(command) > _COMMAND_MAX_CHARS:
        command = command[: _COMMAND_MAX_CHARS - 1] + "…"
    return user, command
