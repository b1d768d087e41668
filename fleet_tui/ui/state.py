"""What the app shows about itself: immutable values the panes read (never mutate in place)."""

from __future__ import annotations

from fleet_tui.core.records import record

KIND_LABELS = {
    "live": "LIVE",
    "replay": "REPLAY",
    "simulated": "SIMULATED",
    "fleet": "FLEET",
    "none": "NO DEVICE",
}


@record
class SourceStatus:
    """The monitor source as the status line shows it (so a replay is never mistaken for live)."""

    kind: str = "none"  # live | replay | simulated | fleet | none
    spec: str = ""  # what the user asked for, e.g. "sim:8", "replay:demo"
    devices: int = 0
    message: str | None = None  # e.g. "no accelerator found: NVML library not found"
    paused: bool = False
    interval_s: float = 1.0
    replay_position: str | None = None  # e.g. "t=12.4 s of 180 s" while replaying
    ended: bool = False  # a replay that reached its end (it shows its last snapshot)

    @property
    def badge(self) -> str:
        if self.spec.startswith("fleet-replay"):  # a recorded fleet: never taken for a live one
            return "REPLAY FLEET"
        return KIND_LABELS.get(self.kind, self.kind.upper())


@record
class CatalogStatus:
    state: str = "loading"  # loading | ready | error
    message: str = ""
    instances: int = 0
