"""What a setup costs at the cheapest catalog offer that can carry it: :class:`SetupCost` and the
one search over the offers (:func:`cheapest_setup`). How many boxes an offer takes is the caller's
rule (``boxes``): whole instances by default; as deployed (a tensor-parallel group inside one
instance) in :func:`fleet_tui.core.plan.deploy.deployed_cost`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fleet_tui.core.catalog.models import Catalog, Instance, check_pricing
from fleet_tui.core.errors import UserError
from fleet_tui.core.pricing import cost_per_million_tokens
from fleet_tui.core.records import record


@record
class SetupCost:
    """What ``devices`` of one accelerator cost at the cheapest catalog offer that carries them."""

    instance: Instance
    instances: int  # boxes needed (devices / devices per box, rounded up)
    pricing: str
    usd_per_hour: float  # all boxes
    usd_per_month: float
    hours_per_month: float
    idle_devices: float  # devices paid for but not used (a 2-GPU job on an 8-GPU box: 6)
    usd_per_million_tokens: float | None  # at the given speed; None without one

    def to_dict(self) -> dict[str, Any]:
        i = self.instance
        return {"instance_type": i.instance_type, "cloud": i.cloud, "region": i.region,
                "instances": self.instances, "devices_per_instance": i.accelerator_count,
                "pricing": self.pricing, "usd_per_hour": round(self.usd_per_hour, 6),
                "usd_per_month": round(self.usd_per_month, 2),
                "hours_per_month": self.hours_per_month, "idle_devices": self.idle_devices,
                "usd_per_million_tokens": (None if self.usd_per_million_tokens is None
                                           else round(self.usd_per_million_tokens, 6)),
                "source": i.source, "as_of": i.as_of}


def whole_instances(inst: Instance, devices: int) -> int | None:
    """Boxes of ``inst`` that hold ``devices`` (rounded up); None for an offer without devices."""
    if inst.accelerator_count <= 0:
        return None
    return max(1, math.ceil(devices / inst.accelerator_count - 1e-9))


def cheapest_setup(catalog: Catalog, accelerator: str, devices: int, *, pricing: str = "on-demand",
                   hours_per_month: float = 730.0, tokens_per_s: float | None = None,
                   boxes: Callable[[Instance], int | None] | None = None) -> SetupCost | None:
    """The cheapest way in the catalog to rent ``devices`` × ``accelerator`` (any cloud and region;
    offers excluded from ranking have no price and are left out), ``boxes(offer)`` instances of an
    offer at a time (None: the offer cannot carry it; default :func:`whole_instances`). None when no
    priced offer can. The cost per million tokens charges every device rented, idle ones included."""
    check_pricing(pricing)
    if not (isinstance(devices, int) and devices >= 1):
        raise UserError(f"devices must be a whole number >= 1, got {devices!r}")
    best: tuple[float, int, Instance] | None = None
    for inst in catalog.offers_of(catalog.accelerator(accelerator).id):
        price = inst.price(pricing)
        if price is None:
            continue
        n = boxes(inst) if boxes is not None else whole_instances(inst, devices)
        if n is None:
            continue
        if best is None or (price * n, n) < best[:2]:  # cheapest, then fewest boxes
            best = (price * n, n, inst)
    if best is None:
        return None
    usd_h, n, inst = best
    per_million = (cost_per_million_tokens(usd_h, tokens_per_s)
                   if tokens_per_s and math.isfinite(tokens_per_s) and tokens_per_s > 0 else None)
    return SetupCost(instance=inst, instances=n, pricing=pricing, usd_per_hour=usd_h,
                     usd_per_month=usd_h * hours_per_month, hours_per_month=hours_per_month,
                     idle_devices=n * inst.accelerator_count - devices, usd_per_million_tokens=per_million)
