"""Links between accelerators: inside a node and between nodes, per instance type (with sources).

Data: ``catalogs/interconnects.toml`` (one row per accelerator's intra-node link, per instance
type's network, and per marketplace cloud), read lazily on first use with :mod:`.tomlio` and
validated. :func:`fabric_for` answers "what links does this offer's traffic cross":

* ``intra`` — the device-to-device link inside one instance (NVLink/NVSwitch, Infinity Fabric,
  ICI, NeuronLink or PCIe), its bandwidth as the datasheet quotes it (bidirectional);
* ``inter`` — the instance's network to other instances (EFA, InfiniBand, RoCE, Ethernet) in Gbit/s.

**Where the network comes from, said every time** (``Fabric.inter_source``): the priced
instance's row; a network the user names (``--network 3200G`` per node, ``400G/gpu`` per device,
or a fabric name from ``[[fabric]]`` such as ``efa-v2``, ``ib-ndr``: :func:`parse_network`); or,
when no instance is named, the network the device's reference system ships with (``[[device]]``
``network``: DGX H100's 8 × 400 Gbit/s InfiniBand for an H100 SXM, HLS-Gaudi2's scale-out ports for
a Gaudi2), stated as an assumption. A device with no reference system and an instance not listed
have no known network: :data:`UNKNOWN_INTER_GBPS` (10 GbE) is charged and the output says
"unknown network (assumed 10 Gbit/s)". A device without a listed link is assumed to talk over PCIe
Gen3 x16 (:data:`UNKNOWN_INTRA_GBS`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

from fleet_tui.core import paths
from fleet_tui.core.errors import UserError
from fleet_tui.core.records import FORBID_EXTRA, Record, record
from fleet_tui.core.types import PositiveFloat, PositiveInt

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
    # the inter-node network of the system the device is sold in when no instance says otherwise
    network: str | None = None
    network_gbps: PositiveFloat | None = None  # per node of ``node_devices``
    node_devices: PositiveInt = 8
    network_source: str | None = None


@record(kw_only=True)
class NamedFabric(Record):
    """A network a user can name (``--network efa-v2``): its bandwidth per device."""

    __pydantic_config__ = FORBID_EXTRA
    name: str
    aliases: tuple[str, ...] = ()
    network: str
    gbps_per_device: PositiveFloat
    source: str


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
    inter_source: str = ""  # where the network figure comes from (instance row, --network, assumed)

    def describe(self, devices: int | None = None) -> str:
        """The links in words; ``devices`` that all fit inside one node cross no network."""
        inter = (f"{self.inter_link} {self.inter_gbps:g} Gbit/s" if self.inter_known else
                 f"unknown network (assumed {self.inter_gbps:g} Gbit/s)")
        if self.inter_source:
            inter += f" ({self.inter_source})"
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
    fabrics: dict[str, NamedFabric] = dataclasses.field(default_factory=dict)  # name and aliases, lower case
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
    named, p4 = validate_table(doc, "fabric", NamedFabric)
    problems = p1 + p2 + p3 + p4
    unknown = set(doc.data) - {"device", "instance", "cloud", "fabric", "meta"}
    problems += [f"{doc.path}: {k}: unknown table (allowed: [[device]], [[instance]], [[cloud]], [[fabric]], meta)"
                 for k in sorted(unknown)]
    if problems:
        raise UserError("; ".join(problems))
    return Interconnects(
        devices={d.accelerator: d for _, d in devices},
        instances={(n.cloud.lower(), n.instance_type.lower()): n for _, n in nets},
        clouds={c.cloud.lower(): c for _, c in clouds},
        fabrics={key.lower(): f for _, f in named for key in (f.name, *f.aliases)},
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
    source = ""
    if net is not None and net.gbps:
        inter_link, inter_gbps, inter_known = net.network, net.gbps, True
        source = f"{instance_type}'s network"
    else:
        inter_link, inter_gbps, inter_known = "unknown", UNKNOWN_INTER_GBPS, False
        if instance_type:
            source = f"{instance_type} publishes no network"
    node = max(1, int(devices))
    if software_stack == "XLA" and dev is not None:  # a TPU slice: every chip on the ICI torus
        node = max(node, TPU_ICI_DOMAIN)
    return Fabric(intra_link=intra_link, intra_gbs=intra_gbs, inter_link=inter_link,
                  inter_gbps=inter_gbps, node_devices=node, intra_known=intra_known,
                  inter_known=inter_known, inter_source=source)


def default_fabric(accelerator: str, software_stack: str = "", node_devices: int = 8) -> Fabric:
    """Links assumed when no instance is named (``size --gpu H100 --gpus 64``): the device's own
    link inside nodes of ``node_devices`` (8, as HGX/DGX boards) and, between them, the network of
    the device's reference system (stated as assumed), else an unknown one."""
    base = fabric_for(accelerator, node_devices, None, None, software_stack)
    dev = load_interconnects().devices.get(accelerator)
    if dev is None or not dev.network_gbps:
        return base  # (a TPU's "node" is its ICI slice; its network is the DCN between slices)
    per_node = dev.network_gbps / dev.node_devices * base.node_devices
    return dataclasses.replace(base, inter_link=dev.network or "network", inter_gbps=per_node, inter_known=True,
                               inter_source=f"assumed: the network {accelerator} is usually sold with; "
                                            "--network or an instance to change it")


#: ``3200G``, ``3.2T``, ``400G/gpu``, ``100`` (Gbit/s): a network's bandwidth as ``--network`` takes it.
_BANDWIDTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([gt])?(?:bit/s|bps|b)?\s*(/\s*(?:gpu|device|chip))?\s*$", re.I)
#: Bounds of a node's network: one slow NIC to a whole NVL72 rack's worth.
MIN_NETWORK_GBPS, MAX_NETWORK_GBPS = 1.0, 100_000.0


def fabric_names() -> tuple[str, ...]:
    """The named fabrics ``--network`` accepts (without aliases)."""
    return tuple(sorted({f.name for f in load_interconnects().fabrics.values()}))


def parse_network(text: str, field: str = "network") -> tuple[float, bool, str]:
    """``(gbit/s, per_device, name)`` of a network as the user gives it: a named fabric
    (``efa-v2``; per device), ``N[G|T]`` per node or ``N[G|T]/gpu`` per device. A bad value is a
    :class:`FieldError` naming ``field`` and what is allowed."""
    from fleet_tui.core.errors import FieldError

    key = str(text).strip().lower()
    named = load_interconnects().fabrics.get(key)
    if named is not None:
        return named.gbps_per_device, True, named.network
    m = _BANDWIDTH.match(key)
    if m is None:
        raise FieldError(field, f"{{{field}}} {text!r}: give Gbit/s per node (3200G, 3.2T), per device "
                         f"(400G/gpu) or a fabric name ({', '.join(fabric_names())})")
    gbps = float(m.group(1)) * (1000.0 if (m.group(2) or "").lower() == "t" else 1.0)
    if not MIN_NETWORK_GBPS <= gbps <= MAX_NETWORK_GBPS:
        raise FieldError(field, f"{{{field}}} {text!r}: {gbps:g} Gbit/s is outside "
                         f"{MIN_NETWORK_GBPS:g}-{MAX_NETWORK_GBPS:,.0f}")
    per_device = bool(m.group(3))
    return gbps, per_device, f"{gbps:g} Gbit/s per {'device' if per_device else 'node'}"


def with_network(fabric: Fabric, text: str, field: str = "network") -> Fabric:
    """``fabric`` with the network the user named (:func:`parse_network`) between its nodes."""
    gbps, per_device, name = parse_network(text, field)
    per_node = gbps * fabric.node_devices if per_device else gbps
    return dataclasses.replace(fabric, inter_link=name, inter_gbps=per_node, inter_known=True,
                               inter_source=f"--{field.replace('_', '-')} {text}")
