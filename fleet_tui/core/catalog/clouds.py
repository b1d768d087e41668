"""The clouds registry: one record per cloud the bundled catalog knows.

Each :class:`Cloud` says how the cloud is written (id, display name), how its SkyPilot ``vms.csv``
differs from the common format (the importer's per-cloud rules, each documented in
``catalogs/README.md``, "Import rules") and which standard commitment discount estimates its
reserved prices (``catalogs/README.md``, "Reserved prices"). Adding a cloud whose SkyPilot file has
no quirks is one line in :data:`CLOUDS`; user catalogs may still name any other cloud (``onprem``).

Spot interruption rates per cloud live with the rest of the spot arithmetic in
:mod:`fleet_tui.core.pricing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType

from fleet_tui.core.records import record


@record
class ReservedDiscount:
    """A published standard commitment discount, used to ESTIMATE reserved prices where the source
    has none: ``reserved = on-demand x (1 - discount)``."""

    one_year: float
    three_year: float
    source: str


def _frozen(d: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@record
class Cloud:
    """One cloud. The SkyPilot fields are import quirks; a cloud without quirks leaves them out."""

    id: str  # lower-case, as offers and --cloud write it
    name: str  # for people
    reserved: ReservedDiscount | None = None
    # SkyPilot import quirks (see catalogs/README.md, "Import rules"):
    skypilot_folder: str = ""  # folder of the cloud in skypilot-catalog (default: the id)
    vm_and_gpu_rows: bool = False  # VMs and GPUs priced in separate rows, summed per zone (GCP)
    tpu_slices: bool = False  # TPU rows are offers of their own, counted in chips (GCP)
    gpuinfo_is_measured: bool = True  # False: GpuInfo is synthesised from a name table (GCP)
    # instance type -> (accelerator, count) where the source leaves the accelerator blank
    blank_accelerators: Mapping[str, tuple[str, float]] = field(default_factory=_frozen)
    # instance type (lower case) -> fraction of one GPU the type gets
    fractional_gpus: Mapping[str, float] = field(default_factory=_frozen)
    # regular expression on the lower-case type: an "H100" there is the H100 NVL (94 GB)
    h100_nvl_types: str | None = None
    # spot at exactly this fraction of on-demand is a floor the source writes, not a market price
    spot_floor_ratio: float | None = None

    @property
    def folder(self) -> str:
        return self.skypilot_folder or self.id


_AWS_AZURE_NOTE = "deliberately below the headline maximum, which applies to 3-year all-upfront on some families only"

#: Every cloud the bundled catalog knows, by id.
CLOUDS: Mapping[str, Cloud] = _frozen({c.id: c for c in (
    Cloud("aws", "Amazon Web Services",
          reserved=ReservedDiscount(0.30, 0.50, "EC2 Savings Plans / Reserved Instances, "
                                    "aws.amazon.com/savingsplans/compute-pricing ('up to 72%'); " + _AWS_AZURE_NOTE),
          # trn2.48xlarge: 16 Trainium2 chips (https://aws.amazon.com/ec2/instance-types/trn2/)
          blank_accelerators=_frozen({"trn2.48xlarge": ("Trainium2", 16.0)}),
          # 61 zone rows of skypilot-catalog v8 @ 00148f2 (af-south-1, ap-east-1, eu-south-1,
          # me-south-1, ...) have spot at exactly 10 % of on-demand (catalog-sources/README.md)
          spot_floor_ratio=0.10),
    Cloud("gcp", "Google Cloud",
          reserved=ReservedDiscount(0.37, 0.55, "resource-based committed use discounts, "
                                    "cloud.google.com/compute/docs/instances/signing-up-committed-use-discounts"),
          vm_and_gpu_rows=True, tpu_slices=True, gpuinfo_is_measured=False),
    Cloud("azure", "Microsoft Azure",
          reserved=ReservedDiscount(0.30, 0.50, "Azure Reserved VM Instances, "
                                    "azure.microsoft.com/pricing/reserved-vm-instances ('up to 72%'); "
                                    + _AWS_AZURE_NOTE),
          # NVv4: smaller sizes get a fraction of one MI25
          # (https://learn.microsoft.com/en-us/azure/virtual-machines/nvv4-series)
          fractional_gpus=_frozen({"standard_nv4as_v4": 0.125, "standard_nv8as_v4": 0.25,
                                   "standard_nv16as_v4": 0.5}),
          # NCads / NCCads H100 v5 carry the H100 NVL (94 GB)
          h100_nvl_types=r"standard_ncc?\d+ad"),
    Cloud("lambda", "Lambda"),
    Cloud("oci", "Oracle Cloud Infrastructure"),
    Cloud("nebius", "Nebius"),
    Cloud("vast", "Vast.ai"),
    Cloud("runpod", "RunPod"),
)})

def cloud(cloud_id: str) -> Cloud:
    """The registry record for ``cloud_id`` (any case); an unregistered cloud gets no quirks."""
    return CLOUDS.get(cloud_id.strip().lower()) or Cloud(cloud_id, cloud_id)


def registered_cloud(name: str) -> Cloud | None:
    """The registered cloud written ``name`` in any case, or None."""
    return CLOUDS.get(name.strip().lower())
