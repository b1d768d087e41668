"""What a setup costs as it would be deployed: the cheapest catalog offer that holds it sanely.

The rule is the ranking's (:mod:`fleet_tui.core.ranking`): a tensor- or expert-parallel group talks
every layer, so it always lives inside one instance; devices that talk every step (training, a
pipeline) live in one instance, or span several only on HPC-class boxes (8 or more devices, a
cloud's own fleet: NVLink inside, EFA/InfiniBand between). Independent serving replicas may each
take their own box. A marketplace box (Vast, RunPod) is never multiplied for one group: its
network between hosts is unknown. So a TP8 group is never priced as eight one-GPU boxes.
"""

from __future__ import annotations

import math

from fleet_tui.core.catalog.models import Catalog, Instance
from fleet_tui.core.catalog.setup_cost import SetupCost, cheapest_setup
from fleet_tui.core.footprint import parallel_layout
from fleet_tui.core.perf.engines import expert_parallel
from fleet_tui.core.workload import Workload

#: Devices an instance needs before several of them may carry one communicating group (the
#: ranking's MULTI_INSTANCE_MIN_DEVICES: HGX/DGX-class boxes with a cluster network).
MULTI_INSTANCE_MIN_DEVICES = 8


def group_devices(w: Workload, gpus: int) -> tuple[int, bool]:
    """(devices that must share one instance, whether the groups talk to each other).

    Inference: one replica's tensor (or expert) parallel group; replicas are independent.
    Training: the tensor-parallel group inside an instance, and every rank talks every step."""
    lay = parallel_layout(w, gpus)
    if expert_parallel(w, gpus):
        return gpus, True
    if not w.is_training and lay.pp == 1:
        return max(1, lay.tp), False
    return max(1, lay.tp), True


def _boxes(inst: Instance, gpus: int, group: int, talking: bool) -> int | None:
    """Instances of ``inst`` the setup takes, or None when it cannot be deployed on them."""
    count = int(inst.accelerator_count)
    if count < 1 or group > count:
        return None  # a TP/EP group never spans instances
    if count >= gpus:
        return 1
    from fleet_tui.core.interconnects import marketplace_tier  # several boxes only: the tiers table

    marketplace = marketplace_tier(inst.cloud) is not None
    if talking and (count < MULTI_INSTANCE_MIN_DEVICES or marketplace):
        return None  # one communicating job over small or marketplace boxes: not a sane deployment
    per_box = count // group * group  # whole groups per instance
    return math.ceil(gpus / per_box)


def deployed_cost(catalog: Catalog, accelerator: str, w: Workload, gpus: int, *,
                  pricing: str = "on-demand", hours_per_month: float = 730.0,
                  tokens_per_s: float | None = None) -> SetupCost | None:
    """The cheapest way to rent ``gpus`` × ``accelerator`` for ``w`` as it would be deployed (see the
    module docstring); None when no priced offer can hold it. The cost per 1M tokens charges every
    device rented, idle ones included."""
    group, talking = group_devices(w, gpus)
    return cheapest_setup(catalog, accelerator, gpus, pricing=pricing, hours_per_month=hours_per_month,
                          tokens_per_s=tokens_per_s, boxes=lambda inst: _boxes(inst, gpus, group, talking))
