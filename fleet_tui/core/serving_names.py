"""Names and defaults of the serving demand that the CLI's flags need at registration, kept apart
from :mod:`fleet_tui.core.perf` so that building the parser imports nothing of the speed model."""

from __future__ import annotations

#: Percentile of requests a latency target holds for, unless --slo-percentile says otherwise.
DEFAULT_SLO_PERCENTILE = 95.0

#: The named request-length mixes of :data:`fleet_tui.core.perf.arrivals.LENGTH_MIXES` (a test
#: keeps the two equal).
LENGTH_MIX_NAMES: tuple[str, ...] = ("sharegpt",)
