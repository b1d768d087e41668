"""Wall time and GPU-hours of a whole training run, from the training speed."""

from __future__ import annotations

from fleet_tui.core.interconnects import Fabric
from fleet_tui.core.perf.throughput import estimate_throughput
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class RunEstimate:
    seconds: float | None  # None when the training speed cannot be estimated (``unknown``)
    gpu_hours: float | None
    tokens: int = 0
    tokens_per_s: float | None = 0.0
    gpus: int = 1
    unknown: str = ""


def training_run(workload: Workload, accelerator: Accelerator, gpus: int | None, tokens: int,
                 fabric: Fabric | None = None) -> RunEstimate:
    """Wall time and GPU-hours to train on ``tokens`` tokens (None when the speed is unknown), the
    collectives charged on ``fabric`` (default: :func:`~fleet_tui.core.interconnects.default_fabric`)."""
    n = int(gpus or workload.gpus)
    if tokens <= 0:
        raise ValueError("tokens must be positive")
    w = workload if workload.is_training else workload.with_(kind="training")
    thr = estimate_throughput(w, accelerator, n, fabric)
    if not thr.tokens_per_s:
        return RunEstimate(seconds=None, gpu_hours=None, tokens=int(tokens), tokens_per_s=None, gpus=n,
                           unknown=thr.unknown or "training speed unknown")
    seconds = tokens / thr.tokens_per_s
    return RunEstimate(seconds=seconds, gpu_hours=seconds * n / 3600.0, tokens=int(tokens),
                       tokens_per_s=thr.tokens_per_s, gpus=n)
