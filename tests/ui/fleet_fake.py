"""A simulated fleet for the app's tests and screenshots: N nodes of the core's SimSource devices,
relabelled with node names and the "fleet" kind (what the Prometheus source emits). Test-only."""

from __future__ import annotations

from dataclasses import replace

from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.sources.sim import SimSource


class SimFleetSource(Source):
    kind = "fleet"

    def __init__(self, nodes: int = 4, devices_per_node: int = 8) -> None:
        self.name = f"sim-fleet:{nodes}x{devices_per_node}"
        self._nodes = [(f"node-{i:02d}", SimSource(n=devices_per_node, seed=i, phase_ticks=3 + i))
                       for i in range(nodes)]

    async def open(self) -> None:
        for _, sim in self._nodes:
            await sim.open()

    async def sample(self) -> Snapshot:
        devices = []
        ts = 0.0
        for node, sim in self._nodes:
            snap = await sim.sample()
            ts = snap.timestamp
            devices += [replace(d, node=node) for d in snap.devices]
        return Snapshot(timestamp=ts, source=self.name, source_kind="fleet", devices=tuple(devices),
                        message="simulated fleet (test data, not a real cluster)")
