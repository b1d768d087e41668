"""The one answer to "does it fit, how fast, what does it cost": :class:`PlanReport` and its JSON.

Every front end renders this record: ``fleet-tui size`` prints :meth:`PlanReport.to_dict` (its
``--json``) or a text view of it, the Workload builder lays the same record out as markup, and the
ranking's top offer is planned into one. Sentences that name an input hold ``{field}`` placeholders
(argparse dests); :meth:`PlanReport.to_dict` takes the front end's ``label`` for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fleet_tui.core.errors import render_fields

if TYPE_CHECKING:  # the capacity plan and the catalog are imported only when a plan asks for them
    from fleet_tui.core.catalog.query import SetupCost
    from fleet_tui.core.perf.run import RunEstimate
    from fleet_tui.core.perf.serving_plan import ServingPlan
    from fleet_tui.core.perf.sim_plan import BurstReport
    from fleet_tui.core.perf.throughput import Throughput
    from fleet_tui.core.sizing.fit import FitSuggestion
    from fleet_tui.core.sizing.kv_pool import EngineFit, KVCapacity
    from fleet_tui.core.sizing.memory import MemoryBreakdown
    from fleet_tui.core.workload import Workload

#: The verdict, in one closed set: ``fits``/``does_not_fit`` for training and Hugging Face runs,
#: ``starts``/``does_not_start`` for a serving engine, ``unchecked`` without an accelerator.
VerdictStatus = Literal["fits", "does_not_fit", "starts", "does_not_start", "unchecked"]


@dataclass(frozen=True, slots=True)
class Verdict:
    status: VerdictStatus
    message: str  # one sentence: "uses 17.6 of 79.2 GiB per GPU (61.6 GiB free)"
    capacity_bytes: int | None = None
    headroom_bytes: int | None = None
    precision_supported: bool | None = None
    precision_note: str = ""
    engine_error: str = ""  # a serving engine that does not start: its own error message
    running: int | None = None  # a serving engine that starts: sequences it runs at once
    queued: int | None = None  # the batch's other requests, waiting
    running_limit: str = ""  # what sets ``running``: "kv cache", "max_num_seqs", "batch"

    @property
    def ok(self) -> bool | None:
        """True when it fits or starts, False when not, None when unchecked."""
        return None if self.status == "unchecked" else self.status in ("fits", "starts")

    @property
    def headline(self) -> str:
        return {"fits": "FITS", "does_not_fit": "DOES NOT FIT", "starts": "STARTS",
                "does_not_start": "DOES NOT START", "unchecked": "NOT CHECKED"}[self.status]


@dataclass(frozen=True, slots=True)
class PlanReport:
    """Everything about one workload on one target (see the module docstring)."""

    workload: Workload  # as placed: its layout set when the layout was searched
    accelerator: str | None  # the target device (None: no device asked for)
    gpus: int
    layout: str | None  # "TP4", "TP2 × DP2", None on one device
    verdict: Verdict
    memory: MemoryBreakdown  # per GPU; a serving engine's: the least it starts on
    engine: EngineFit | None  # a serving engine on the target: its reserve, pool and queue
    kv_capacity: KVCapacity | None
    fixes: tuple[FitSuggestion, ...]  # changes that make it fit or start, cheapest first, each once
    speed: Throughput | None  # None when it does not fit
    speed_accelerator: str | None  # the device the speed is for (the reference one without a target)
    training_run: RunEstimate | None
    serving_plan: ServingPlan | None
    plan_price_source: str | None
    burst: BurstReport | None
    burst_replicas: int
    burst_requests: int | None  # the burst asked for (its speed in ``burst``, None when unknown)
    cost: SetupCost | None
    assumptions: tuple[str, ...]  # ``{field}`` templates
    notes: tuple[str, ...] = ()  # about the target itself ("no --gpu given: speed shown for H100")
    offer: str | None = None  # with the catalog as target: the top-ranked offer planned here
    links: str | None = None  # the links the speed was charged on, and where they come from (perf.fabric)

    def assumption_lines(self, label: Callable[[str], str]) -> list[str]:
        return list(dict.fromkeys(render_fields(a, label) for a in self.assumptions))

    def to_dict(self, label: Callable[[str], str]) -> dict[str, Any]:
        """The ``size --json`` document (keys in the ``commands.size`` docstring)."""
        from fleet_tui.core.plan.json import report_dict

        return report_dict(self, label)
