"""What the app shows about itself: immutable values the panes read (never mutate in place)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_tui.core.records import record

if TYPE_CHECKING:  # for the checker only: the core's planning loads in the sizing worker
    from fleet_tui.core.perf.serving_plan import Demand
    from fleet_tui.core.workload import Workload

#: The worker group of the panes' deferred mounts (``PaneScreen.mount_later``): quitting waits for it.
MOUNTING = "pane-mounting"

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


@record
class BuilderChoice:
    """What the builder adds around the workload for the Recommendations pane."""

    accelerator: str | None = None
    hours_per_month: float = 730.0
    spot_allowed: bool = False
    current_instance: str | None = None
    rate_rps: float | None = None  # serving demand: shows the capacity plan
    ttft_ms: float | None = None  # latency targets of the plan
    tpot_ms: float | None = None
    slo_percentile: float = 95.0  # the percentile the targets are for (the core's default, p95)
    layout_given: bool = False  # the sharding field names one (else the layout is searched)

    def demand(self, workload: Workload) -> Demand | None:
        """The checked serving demand (None without a rate), as the CLI's --rate/--ttft-ms/--tpot-ms."""
        if self.rate_rps is None and self.ttft_ms is None and self.tpot_ms is None:
            return None
        from fleet_tui.core.perf.serving_plan import demand

        return demand(self.rate_rps, None, self.ttft_ms, self.tpot_ms, workload=workload,
                      slo_percentile=self.slo_percentile)
