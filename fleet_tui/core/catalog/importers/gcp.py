"""GCP's rows in a SkyPilot catalog: VMs and GPUs priced apart, TPU slices priced on their own.

Accelerator-optimised families (a2, a3, a4, g2) come with fixed GPUs: offer price = VM row + the
matching GPU row of the same zone. Attachable GPUs (T4, V100, P100, P4) are offered on an
``n1-standard`` host with 8 vCPUs per GPU (within every GPU's documented vCPU limit), named e.g.
``n1-standard-8+1xT4``. TPU rows become offers named by the TPU type, counting chips (v2/v3/v4/v5p
names count TensorCores, 2 per chip). Rules documented in catalogs/README.md, "Import rules".
"""

from __future__ import annotations

import re

from fleet_tui.core.catalog.importers.vms_csv import ImportReport, Row

# accelerator-optimised families: machine type -> (GPU row name, count).
_GCP_G2_L4 = {"4": 1, "8": 1, "12": 1, "16": 1, "32": 1, "24": 2, "48": 4, "96": 8}
_GCP_ATTACHABLE = ("T4", "V100", "P100", "P4")
_GCP_VCPUS_PER_ATTACHED_GPU = 8


def gcp_bundled_accelerator(machine_type: str) -> tuple[str, int] | None:
    """(GPU row name, count) for a GCP machine type that comes with GPUs, else None."""
    mt = machine_type.removesuffix("-nolssd")
    m = re.fullmatch(r"a2-(highgpu|megagpu|ultragpu)-(\d+)g", mt)
    if m:
        return ("A100-80GB" if m.group(1) == "ultragpu" else "A100", int(m.group(2)))
    m = re.fullmatch(r"a3-(highgpu|edgegpu|megagpu|ultragpu)-(\d+)g", mt)
    if m:
        name = {"megagpu": "H100-MEGA", "ultragpu": "H200"}.get(m.group(1), "H100")
        return (name, int(m.group(2)))
    m = re.fullmatch(r"a4-highgpu-(\d+)g", mt)
    if m:
        return ("B200", int(m.group(1)))
    m = re.fullmatch(r"g2-standard-(\d+)", mt)
    if m and m.group(1) in _GCP_G2_L4:
        return ("L4", _GCP_G2_L4[m.group(1)])
    return None


def tpu_chips(tpu_type: str) -> tuple[str, float] | None:
    """('TPU-v5p', chips) for a GCP TPU type such as ``tpu-v5p-8``; None if not a TPU name."""
    m = re.fullmatch(r"tpu-(v\d+(?:litepod|p|e)?)-(\d+)", tpu_type.strip().lower())
    if not m:
        return None
    gen, n = m.group(1), int(m.group(2))
    if gen == "v5litepod":
        gen = "v5e"
    # v2, v3, v4 and v5p type names count TensorCores (2 per chip); v5e and v6e count chips
    chips = n / 2 if gen in ("v2", "v3", "v4", "v5p") else float(n)
    return (f"TPU-{gen}", chips)


def gcp_offers(rows: list[Row], report: ImportReport) -> list[Row]:
    """Combine GCP VM rows with their GPU rows (same zone) into priced offers."""
    gpu_rows: dict[tuple[str, str, float], Row] = {}
    vm_rows: dict[tuple[str, str], Row] = {}
    out: list[Row] = []
    for r in rows:
        if not r.instance_type and r.acc_name:
            if r.acc_name.lower().startswith("tpu-"):
                r.instance_type = r.acc_name  # a TPU slice is priced on its own
                out.append(r)
            else:
                gpu_rows[(r.zone, r.acc_name, r.acc_count or 0)] = r
        elif r.instance_type:
            vm_rows[(r.zone, r.instance_type)] = r
    for (zone, mt), vm in vm_rows.items():
        bundled = gcp_bundled_accelerator(mt)
        if bundled is None:
            continue
        name, count = bundled
        g = gpu_rows.get((zone, name, float(count)))
        if g is None:
            report.skip(f"GCP {mt}: no {count}x{name} GPU price row in the same zone")
            continue
        out.append(_combine(mt, vm, g, name, count))
    # attachable GPUs on an n1-standard host with 8 vCPUs per GPU
    for (zone, name, count), g in gpu_rows.items():
        if name not in _GCP_ATTACHABLE or not count:
            continue
        host = f"n1-standard-{int(_GCP_VCPUS_PER_ATTACHED_GPU * count)}"
        vm = vm_rows.get((zone, host))
        if vm is None:
            report.skip(f"GCP {name}: no {host} host price row in the same zone")
            continue
        out.append(_combine(f"{host}+{int(count)}x{name}", vm, g, name, count))
    return out


def _combine(instance_type: str, vm: Row, g: Row, name: str, count: float) -> Row:
    notes = []

    def add(a: float | None, b: float | None, what: str) -> float | None:
        if a is None or b is None:
            return None
        if a == 0 or b == 0:
            part = "VM" if a == 0 else "GPU"
            notes.append(f"zero-price: {what} of the {part} part is 0.0 in the source")
            return None
        return round(a + b, 5)

    if g.price and g.spot and g.spot >= g.price:
        notes.append(f"spot>=on-demand: GPU part spot {g.spot:g} >= on-demand {g.price:g} in the source")
    price = add(vm.price, g.price, "on-demand")
    spot = add(vm.spot, g.spot, "spot")
    return Row(file=g.file, instance_type=instance_type, region=vm.region, zone=vm.zone, acc_name=name,
                acc_count=float(count), vcpus=vm.vcpus, ram_gib=vm.ram_gib, gpu_mib=g.gpu_mib,
                gpu_info_name=g.gpu_info_name, price=price, spot=spot, notes=notes)

