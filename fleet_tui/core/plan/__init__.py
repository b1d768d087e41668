"""One planning use case: a workload and a target in, one typed report out.

:func:`plan_workload` answers "does it fit (or does the engine start), on which layout, what to
change when not, how fast, at which capacity plan and for what money" for one accelerator and
count; :func:`plan_best` takes the catalog as the target (the ranking's top offer, then planned).
``fleet-tui size``, the Workload builder and the ranking's top offer render the same
:class:`PlanReport`; none of them orders the core calls itself. The method of each step is in
:mod:`.build`; how a setup is priced as deployed in :mod:`.deploy`.
"""

from fleet_tui.core.plan.build import REFERENCE_ACCELERATOR, PlanRequest, plan_best, plan_offer, plan_workload
from fleet_tui.core.plan.deploy import deployed_cost, group_devices
from fleet_tui.core.plan.report import PlanReport, Verdict, VerdictStatus

__all__ = ["REFERENCE_ACCELERATOR", "PlanReport", "PlanRequest", "Verdict", "VerdictStatus", "deployed_cost",
           "group_devices", "plan_best", "plan_offer", "plan_workload"]
