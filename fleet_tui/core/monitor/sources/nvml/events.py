"""XID errors: there is no "last XID" query, only events, so a daemon thread waits for them.

The thread waits on an event set registered for ``nvmlEventTypeXidCriticalError`` on every device
that is not lost and keeps the last ``XID_KEEP`` XIDs per device index, oldest first. Events before
``start()`` are not seen (NVML docs). A device whose registration fails learns ``"xid"`` as N/A.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from fleet_tui.core.monitor.sources.nvml.codes import ERR_TIMEOUT
from fleet_tui.core.monitor.sources.nvml.device import Device

XID_KEEP = 16
EVENT_WAIT_MS = 200


class XidWatcher:
    """The XID event thread of one NVML session; ``of(index)`` is safe from any thread."""

    def __init__(self) -> None:
        self._xids: dict[int, deque[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self._event_set: Any = None

    def of(self, index: int) -> tuple[int, ...]:
        """The XIDs seen on device ``index`` since ``start()`` (last ``XID_KEEP``, oldest first)."""
        q = self._xids.get(index)
        if not q:
            return ()
        with self._lock:
            return tuple(q)

    def start(self, nv: Any, devices: list[Device]) -> None:
        try:
            es = nv.nvmlEventSetCreate()
        except (nv.NVMLError, AttributeError):
            for d in devices:
                d.learn("xid")
            return
        registered = 0
        for d in devices:
            if d.lost is not None:
                continue
            try:
                nv.nvmlDeviceRegisterEvents(d.handle, nv.nvmlEventTypeXidCriticalError, es)
                registered += 1
            except nv.NVMLError:
                d.learn("xid")
        if not registered:
            try:
                nv.nvmlEventSetFree(es)
            except nv.NVMLError:
                pass
            return
        self._event_set = es
        self._stop.clear()
        self.thread = threading.Thread(target=self._loop, args=(nv, es), name="nvml-xid", daemon=True)
        self.thread.start()

    def stop(self, nv: Any) -> None:
        """Stop the thread and free the event set (before ``nvmlShutdown``)."""
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2 * EVENT_WAIT_MS / 1000 + 1)
            self.thread = None
        if self._event_set is not None:
            try:
                nv.nvmlEventSetFree(self._event_set)
            except Exception:  # noqa: BLE001 - closing: nothing useful to do
                pass
            self._event_set = None

    def _loop(self, nv: Any, es: Any) -> None:
        while not self._stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(es, EVENT_WAIT_MS)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == ERR_TIMEOUT:
                    continue
                time.sleep(EVENT_WAIT_MS / 1000)  # e.g. GPU lost: do not spin
                continue
            try:
                index = int(nv.nvmlDeviceGetIndex(data.device))
            except nv.NVMLError:
                continue
            with self._lock:
                self._xids.setdefault(index, deque(maxlen=XID_KEEP)).append(int(data.eventData))
