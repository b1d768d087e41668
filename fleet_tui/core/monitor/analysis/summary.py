"""How a device's time was spent, from its phases: "idle 40 % of the time"."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis


class TimeShares:
    """Seconds per primary diagnosis for each device, added phase by phase (bounded: one number
    per device and kind)."""

    def __init__(self, analyses: Iterable[DeviceAnalysis] = ()):
        self.seconds: dict[int, dict[str, float]] = {}
        for a in analyses:
            self.add(a)

    def add(self, a: DeviceAnalysis) -> None:
        per = self.seconds.setdefault(a.device_index, {})
        per[a.primary] = per.get(a.primary, 0.0) + max(0.0, a.end - a.start)

    def shares(self, device: int) -> dict[str, float]:
        """Share of the device's analysed time per primary, largest first."""
        per = self.seconds.get(device, {})
        total = sum(per.values())
        if total <= 0:
            return {}
        return dict(sorted(((k, v / total) for k, v in per.items()), key=lambda kv: -kv[1]))

    def idle_share(self, device: int) -> float:
        return self.shares(device).get("idle", 0.0)

    def lines(self, words: Callable[[str], str] = str) -> list[str]:
        """One sentence per device: its time by primary (each kind shown as ``words(kind)``)."""
        out = []
        for dev in sorted(self.seconds):
            parts = [f"{words(k)} {v:.0%}" for k, v in self.shares(dev).items()]
            out.append(f"gpu {dev}: " + ", ".join(parts) + " of the time")
        return out
