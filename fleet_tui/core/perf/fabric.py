"""Which links a job of ``gpus`` × one accelerator runs on, and why: the links of the offer it is priced on.

:func:`job_fabric` picks, in this order:

1. the network the user names (``--network 3200G``, ``400G/gpu``, ``efa-v2``:
   :func:`fleet_tui.core.interconnects.with_network`) between nodes: of the priced offer's
   instance type (its link and devices inside, as ``recommend --network`` charges each offer),
   else of the device's reference system;
2. the priced offer (the plan's :func:`fleet_tui.core.plan.deploy.deployed_cost`, which never
   multiplies marketplace boxes for one communicating job): that instance type's link inside and
   network between instances (``catalogs/interconnects.toml``);
3. no offer: the device's reference system (DGX H100's InfiniBand for an H100 SXM), stated as an
   assumption; a device with none has an *unknown* network, charged 10 Gbit/s and said so.

``FabricChoice.words`` says which one was taken; front ends print it next to the speed.
"""

from __future__ import annotations

from fleet_tui.core.catalog.setup_cost import SetupCost
from fleet_tui.core.interconnects import Fabric, default_fabric, fabric_for, with_network
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator


@record
class FabricChoice:
    fabric: Fabric
    setup: SetupCost | None  # the priced offer whose fabric this is (None: assumed or user-named)
    words: str  # which fabric, and why


def job_fabric(acc: Accelerator, gpus: int, setup: SetupCost | None = None,
               network: str | None = None) -> FabricChoice:
    """The links ``gpus`` × ``acc`` run on (module doc): ``setup``'s instance type (with
    ``network`` between instances when named), else the device's reference system (idem)."""
    n = max(1, int(gpus))
    if setup is not None:
        inst = setup.instance
        per_box = max(1, int(inst.accelerator_count))
        fab = fabric_for(acc.id, per_box, inst.cloud, inst.instance_type, acc.software_stack)
        where = (f"{setup.instances}× {inst.instance_type} ({inst.cloud})" if setup.instances > 1
                 else f"{inst.instance_type} ({inst.cloud})")
        if network:  # the offer's own link and node size inside, as recommend charges it
            fab = with_network(fab, network)
            return FabricChoice(fab, setup, f"network as given, inside {where}: {fab.describe(n)}")
        return FabricChoice(fab, setup, f"links of the priced offer, {where}: {fab.describe(n)}")
    if network:
        fab = with_network(default_fabric(acc.id, acc.software_stack), network)
        return FabricChoice(fab, None, f"network as given: {fab.describe(n)}")
    fab = default_fabric(acc.id, acc.software_stack)
    if n <= fab.node_devices:
        return FabricChoice(fab, None, f"no priced offer: {fab.describe(n)}")
    if fab.inter_known:
        return FabricChoice(fab, None, f"no priced offer: {fab.describe(n)}")
    return FabricChoice(fab, None, f"no priced offer and no reference network for {acc.id}: {fab.describe(n)}; "
                                   "give --network")
