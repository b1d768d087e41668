"""Links between accelerators: inside a node and between nodes, per instance type (with sources).

Data: ``catalogs/interconnects.toml`` (one row per accelerator's intra-node link, per instance
type's network, and per marketplace cloud), read lazily on first use with :mod:`.tomlio` and
validated. :func:`fabric_for` answers "what links does this offer's traffic cross":

* ``intra`` — the device-to-device link inside one instance (NVLink/NVSwitch, Infinity Fabric,
  ICI, NeuronLink or PCIe), its bandwidth as the datasheet quotes it (bidirectional);
* ``inter`` — the instance's network to other instances (EFA, InfiniBand, RoCE, Ethernet) in Gbit/s.

**Unknown stays unknown and is assumed slow.** An instance not listed has no known inter-node
fabric: it is charged :data:`UNKNOWN_INTER_GBPS` (a plain 10 GbE link) and the fabric says so; a
device without a listed link is assumed to talk over PCIe Gen3 x16 (:data:`UNKNOWN_INTRA_GBS`).
These are assumptions, not data: the output names them.
"""

from __future__ import annotations

import functools
from pathlib import Path

from fleet_tui.core import paths
from fleet_tui.core.errors import UserError
from fleet_tui.core.records import FORBID_EXTRA, Record, record
from fleet_tui.core.types import PositiveFloat

#: Chips one TPU slice joins on ICI (v5e/v6e pods are 256 chips; v4/v5p slices can be larger).
TPU_ICI_DOMAIN = 256
#: Assumed for a device whose intra-node link is not listed: PCIe Gen3 x16 (32 GB/s bidirectional).
UNKNOWN_INTRA_GBS = 32.0
#: Assumed for an instance whose network is not listed (e.g. a marketplace box): 10 Gbit Ethernet.
UNKNOWN_INTER_GBPS = 10.0


@record(kw_only=True)
class DeviceLink(Record):
    """A device's own link inside a node (``[[device]]``)."""

    __pydantic_config__ = FORBID_EXTRA
    accelerator: str
    link: str
    gbs: PositiveFloat  # GB/s per device, bidirectional
    source: str
    checked: bool = False


@record(kw_only=True)
class InstanceNetwork(Record):
    """An instance type's network between nodes and, when it differs, its link inside one."""

    __pydantic_config__ = FORBID_EXTRA
    cloud: str
    instance_type: str
    network: str
    gbps: PositiveFloat | None = None  # None: not published
    intra_link: str | None = None
    intra_gbs: PositiveFloat | None = None
    source: str
    checked: bool = False


@record(kw_only=True)
class CloudTier(Record):
    """A marketplace cloud's reliability tier."""

    __pydantic_config__ = FORBID_EXTRA
    cloud: str
    tier: str  # "marketplace"
    reliability: str
    source: str
    checked: bool = False


@record
class Fabric:
    """The links one offer's collectives cross (hashable: a cache key of the speed estimate)."""

    intra_link: str
    intra_gbs: float  # GB/s per device, bidirectional
    inter_link: str
    inter_gbps: float  # Gbit/s per instance (all NICs)
    node_devices: int  # devices inside one node (one instance, or one TPU slice)
    intra_known: bool = True
    inter_known: bool = True

    def describe(self, devices: int | None = None) -> str:
        """The links in words; ``devices`` that all fit inside one node cross no network."""
        inter = (f"{self.inter_link} {self.inter_gbps:g} Gbit/s" if self.inter_known else
                 f"unknown network (assumed {self.inter_gbps:g} Gbit/s)")
        intra = (f"{self.intra_link} {self.intra_gbs:g} GB/s" if self.intra_known else
                 f"unknown link (assumed PCIe, {self.intra_gbs:g} GB/s)")
        if not self.inter_link or (devices is not None and devices <= self.node_devices):
            return f"{intra} inside one node"  # one instance (or slice): no traffic between nodes
        return f"{intra} inside a node (up to {self.node_devices} devices); {inter} between nodes"


@record
class Interconnects:
    """The whole interconnects table, by accelerator, (cloud, instance type) and cloud."""

    devices: dict[str, DeviceLink]
    instances: dict[tuple[str, str], InstanceNetwork]  # (cloud, instance type) lower case
    clouds: dict[str, CloudTier]
    problems: tuple[str, ...] = ()


def _file() -> Path:
    return paths.bundled_catalog_dir() / "interconnects.toml"


@functools.lru_cache(maxsize=4)
def load_interconnects(path: Path | None = None) -> Interconnects:
    """The interconnect table (bundled file by default), read once (and kept validated in the
    user cache dir: :func:`fleet_tui.core.catalog.compiled.cached_load`); a broken file is a
    UserError."""
    from fleet_tui.core.catalog.compiled import cached_load

    file = path or _file()
    return cached_load("interconnects", [file], lambda: _read_interconnects(file))


def _read_interconnects(path: Path) -> Interconnects:
    from fleet_tui.core.tomlio import read_toml, validate_table

    doc, problems = read_toml(path)
    if doc is None:
        raise UserError("; ".join(problems))
    devices, p1 = validate_table(doc, "device", DeviceLink)
    nets, p2 = validate_table(doc, "instance", InstanceNetwork)
    clouds, p3 = validate_table(doc, "cloud", CloudTier)
    problems = p1 + p2 + p3
    unknown = set(doc.data) - {"device", "instance", "cloud", "meta"}
    problems += [f"{doc.path}: {k}: unknown table (allowed: [[device]], [[instance]], [[cloud]], meta)"
                 for k in sorted(unknown)]
    if problems:
        raise UserError("; ".join(problems))
    return Interconnects(
        devices={d.accelerator: d for _, d in devices},
        instances={(n.cloud.lower(), n.instance_type.lower()): n for _, n in nets},
        clouds={c.cloud.lower(): c for _, c in clouds},
    )


def listed(cloud: str, instance_type: str) -> bool:
    """Whether the instance type has its own row (its network, or its own intra-node link)."""
    return (cloud.lower(), instance_type.lower()) in load_interconnects().instances


def marketplace_tier(cloud: str) -> CloudTier | None:
    """The cloud's marketplace tier (its reliability), or None for a cloud provider's own fleet."""
    return load_interconnects().clouds.get(cloud.lower())


@functools.lru_cache(maxsize=1024)
def fabric_for(accelerator: str, devices: int, cloud: str | None = None,
               instance_type: str | None = None, software_stack: str = "") -> Fabric:
    """The links of ``devices`` × ``accelerator`` in one node of ``instance_type`` (None: the
    device's own link and an unknown network). TPU slices are one ICI domain however large."""
    table = load_interconnects()
    dev = table.devices.get(accelerator)
    net = table.instances.get(((cloud or "").lower(), (instance_type or "").lower()))
    intra_link, intra_gbs, intra_known = ((dev.link, dev.gbs, True) if dev else
                                          ("PCIe (assumed)", UNKNOWN_INTRA_GBS, False))
    if net is not None and net.intra_gbs:
        intra_link, intra_gbs, intra_known = net.intra_link or "PCIe", net.intra_gbs, True
    if net is not None and net.gbps:
        inter_link, inter_gbps, inter_known = net.network, net.gbps, True
    else:
        inter_link, inter_gbps, inter_known = "unknown", UNKNOWN_INTER_GBPS, False
    node = max(1, int(devices))
    if software_stack == "XLA" and dev is not None:  # a TPU slice: every chip on the ICI torus
        node = max(node, TPU_ICI_DOMAIN)
    return Fabric(intra_link=intra_link, intra_gbs=intra_gbs, inter_link=inter_link,
                  inter_gbps=inter_gbps, node_devices=node, intra_known=intra_known,
                  inter_known=inter_known)


def default_fabric(accelerator: str, software_stack: str = "", node_devices: int = 8) -> Fabric:
    """Links assumed when no instance is named (``size --gpu H100 --gpus 64``): the device's own
    link inside nodes of ``node_devices`` (8, as HGX/DGX boards), an unknown network between them."""
    return fabric_for(accelerator, node_devices, None, None, software_stack)
