"""Which links a job of ``gpus`` × one accelerator runs on, and why: the one answer ``size`` prices.

:func:`job_fabric` picks, in this order:

1. the network the user names (``--network 3200G``, ``400G/gpu``, ``efa-v2``:
   :func:`fleet_tui.core.interconnects.with_network`) between nodes of the device's own link;
2. the priced offer: the cheapest catalog offer that carries the devices. A job that spans
   several instances is priced only on offers whose inter-node network is published
   (``catalogs/interconnects.toml``): a marketplace box with no stated fabric is not assumed to
   reach its neighbours at any speed. The fabric is that instance type's (its link inside, its
   network between instances);
3. no offer: the device's reference system (DGX H100's InfiniBand for an H100 SXM), stated as an
   assumption; a device with none has an *unknown* network, charged 10 Gbit/s and said so.

``FabricChoice.words`` says which one was taken; front ends print it next to the speed.
"""

from __future__ import annotations

import math

from fleet_tui.core.catalog.query import SetupCost, cheapest_setup
from fleet_tui.core.interconnects import Fabric, default_fabric, fabric_for, load_interconnects, with_network
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator


@record
class FabricChoice:
    fabric: Fabric
    setup: SetupCost | None  # the priced offer whose fabric this is (None: assumed or user-named)
    words: str  # which fabric, and why


def _network_known(cloud: str, instance_type: str) -> bool:
    net = load_interconnects().instances.get((cloud.lower(), instance_type.lower()))
    return net is not None and bool(net.gbps)


def _cheapest_with_network(catalog, acc: Accelerator, gpus: int, pricing: str) -> SetupCost | None:
    """The cheapest offer of several instances whose network between them is published."""
    best: tuple[float, int, object] | None = None
    for inst in catalog.offers_of(acc.id):
        if inst.accelerator_count < 1 or not _network_known(inst.cloud, inst.instance_type):
            continue
        price = inst.price(pricing)
        if price is None:
            continue
        boxes = max(1, math.ceil(gpus / inst.accelerator_count - 1e-9))
        if best is None or (price * boxes, boxes) < best[:2]:
            best = (price * boxes, boxes, inst)
    if best is None:
        return None
    usd_h, boxes, inst = best
    return SetupCost(instance=inst, instances=boxes, pricing=pricing, usd_per_hour=usd_h,  # type: ignore[arg-type]
                     usd_per_month=usd_h * 730.0, hours_per_month=730.0,
                     idle_devices=boxes * inst.accelerator_count - gpus,  # type: ignore[attr-defined]
                     usd_per_million_tokens=None)


def job_fabric(catalog, acc: Accelerator, gpus: int, network: str | None = None,
               pricing: str = "on-demand") -> FabricChoice:
    """The links ``gpus`` × ``acc`` run on (module doc), with the offer they were taken from."""
    n = max(1, int(gpus))
    if network:
        fab = with_network(default_fabric(acc.id, acc.software_stack), network)
        return FabricChoice(fab, None, f"network as given: {fab.describe(n)}")
    setup = None
    if catalog is not None:
        setup = cheapest_setup(catalog, acc.id, n, pricing=pricing)
        if setup is not None and setup.instances > 1 and acc.software_stack != "XLA":
            setup = _cheapest_with_network(catalog, acc, n, pricing)
    if setup is not None:
        inst = setup.instance
        per_box = max(1, int(inst.accelerator_count))
        fab = fabric_for(acc.id, per_box, inst.cloud, inst.instance_type, acc.software_stack)
        where = (f"{setup.instances}× {inst.instance_type} ({inst.cloud})" if setup.instances > 1
                 else f"{inst.instance_type} ({inst.cloud})")
        return FabricChoice(fab, setup, f"links of the priced offer, {where}: {fab.describe(n)}")
    fab = default_fabric(acc.id, acc.software_stack)
    if n <= fab.node_devices:
        return FabricChoice(fab, None, f"no priced offer: {fab.describe(n)}")
    if fab.inter_known:
        return FabricChoice(fab, None, f"no priced offer with a published network: {fab.describe(n)}")
    return FabricChoice(fab, None, f"no priced offer and no reference network for {acc.id}: {fab.describe(n)}; "
                                   "give --network")
