"""One device's gathered values (``parse.Acc``) -> a ``DeviceSnapshot`` in fleet-tui's units."""

from __future__ import annotations

from collections.abc import Mapping

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.monitor.sources.prometheus.metrics import (
    AMD_FIELDS,
    BLANK_THRESHOLD,
    DCGM_FIELDS,
    HABANA_FIELDS,
    MIB,
    VIOLATION_ACTIVE_FRAC,
    VIOLATION_BITS,
)
from fleet_tui.core.monitor.sources.prometheus.parse import Acc


def _whole(fields: dict[str, object], names: tuple[str, ...]) -> None:
    """Byte and error counts as ints (every value the metric table mapped is a float)."""
    for name in names:
        value = fields.get(name)
        if isinstance(value, float):
            fields[name] = int(value)


def device_from_acc(acc: Acc, *, timestamp: float,
                    previous_counters: Mapping[str, tuple[float, float]] | None = None,
                    ) -> tuple[DeviceSnapshot, dict[str, tuple[float, float]]]:
    """Build one DeviceSnapshot; returns it with the violation counters seen (for the next rate)."""
    fields: dict[str, object] = {}
    extra: list[tuple[str, float]] = []
    counters: dict[str, tuple[float, float]] = {}
    table = {"intel": HABANA_FIELDS, "amd": AMD_FIELDS}.get(acc.vendor, DCGM_FIELDS)
    # one pass converts every sample string (this runs ~25 times per GPU per refresh); plainly
    # mapped metrics go straight to their field, the rest to ``v`` for the rules below
    v: dict[str, float] = {}
    get = table.get
    for metric, raw in (acc.values or {}).items():
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if value != value or not -BLANK_THRESHOLD < value < BLANK_THRESHOLD:  # NaN, Inf, blank
            continue
        mapped = get(metric)
        if mapped is None:
            v[metric] = value
        elif mapped[1] == 1.0:
            fields[mapped[0]] = value
        else:
            fields[mapped[0]] = value * mapped[1]
    if acc.vendor == "intel":
        _whole(fields, ("mem_used_bytes", "mem_total_bytes"))
    elif acc.vendor == "amd":
        _amd_fields(v, fields)
    elif acc.vendor == "aws":
        _neuron_fields(acc, v, fields, extra)
    else:
        counters = _dcgm_fields(acc, v, fields, extra, timestamp, previous_counters)
    name = acc.name
    if acc.mig_profile:
        name = f"{name} MIG {acc.mig_profile}"
        fields["mig_enabled"] = True
    device = DeviceSnapshot(
        index=acc.index, name=name, uuid=acc.uuid, vendor=acc.vendor, node=acc.node,
        timestamp=acc.sample_ts or timestamp, extra=tuple(extra),
        age_s=max(0.0, timestamp - acc.sample_ts) if acc.sample_ts else None,
        **fields,  # type: ignore[arg-type]
    )
    return device, counters


def _amd_fields(v: dict[str, float], fields: dict[str, object]) -> None:
    """AMD's exporter: whole bytes and ECC counts, the edge temperature where no other is given."""
    _whole(fields, ("mem_used_bytes", "mem_total_bytes", "ecc_corrected", "ecc_uncorrected"))
    if "temp_c" not in fields and "gpu_edge_temperature" in v:
        fields["temp_c"] = v["gpu_edge_temperature"]


def _neuron_fields(acc: Acc, v: dict[str, float], fields: dict[str, object], extra: list[tuple[str, float]]) -> None:
    """Neuron: a device's utilisation is its cores' mean (one core's ratio when the series is per core)."""
    cores = sorted((acc.values or {}).get("_cores") or [])
    if "neuroncore_utilization_ratio" in (acc.values or {}):
        cores = [(acc.index, v.get("neuroncore_utilization_ratio"))]
    known = [u for _, u in cores if u is not None]
    if known:
        fields["gpu_util_pct"] = 100.0 * sum(known) / len(known)
    extra.extend((f"nc{i}_util_pct", 100.0 * u) for i, u in cores if u is not None)


def _dcgm_fields(acc: Acc, v: dict[str, float], fields: dict[str, object], extra: list[tuple[str, float]],
                 timestamp: float, previous_counters: Mapping[str, tuple[float, float]] | None,
                 ) -> dict[str, tuple[float, float]]:
    """DCGM: frame-buffer memory, power limit, pstate, XIDs, ECC, and the clock-event reasons (derived
    from the violation counters' rates when no mask is exported); returns the counters seen."""
    counters: dict[str, tuple[float, float]] = {}
    used, free = v.get("DCGM_FI_DEV_FB_USED"), v.get("DCGM_FI_DEV_FB_FREE")
    reserved, total = v.get("DCGM_FI_DEV_FB_RESERVED"), v.get("DCGM_FI_DEV_FB_TOTAL")
    if used is not None:
        fields["mem_used_bytes"] = int(used * MIB)
    if total is None and used is not None and free is not None:
        total = used + free + (reserved or 0.0)  # no FB_TOTAL in the default CSV (§5.4)
    if total is not None:
        fields["mem_total_bytes"] = int(total * MIB)
    limit = v.get("DCGM_FI_DEV_ENFORCED_POWER_LIMIT") or v.get("DCGM_FI_DEV_POWER_MGMT_LIMIT")
    if limit is not None:
        fields["power_limit_w"] = limit
    reasons = v.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
    if reasons is None:
        reasons = v.get("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
    pstate = v.get("DCGM_FI_DEV_PSTATE")
    if pstate is not None:
        fields["pstate"] = int(pstate)
    xid = v.get("DCGM_FI_DEV_XID_ERRORS")
    if xid:
        fields["xid_errors"] = (int(xid),)
    sbe = v.get("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")
    dbe = v.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    sbe = v.get("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL") if sbe is None else sbe
    dbe = v.get("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL") if dbe is None else dbe
    if sbe is not None:
        fields["ecc_corrected"] = int(sbe)
    if dbe is not None:
        fields["ecc_uncorrected"] = int(dbe)
    gr = v.get("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    if gr is not None:
        extra.append(("gr_engine_active_pct", 100.0 * gr))
    # Violation counters: derive "active" throttle bits when no reason mask is exported.
    derived_mask = 0
    sample_time = acc.sample_ts or timestamp
    for metric, (extra_name, bit) in VIOLATION_BITS.items():
        value = v.get(metric)
        if value is None:
            continue
        counters[metric] = (sample_time, value)
        before = (previous_counters or {}).get(metric)
        if before and sample_time > before[0] and value >= before[1]:
            frac = (value - before[1]) / 1e9 / (sample_time - before[0])
            extra.append((extra_name, frac))
            if frac > VIOLATION_ACTIVE_FRAC:
                derived_mask |= bit
    if reasons is not None:
        fields["clock_event_reasons"] = int(reasons)
    elif counters:
        fields["clock_event_reasons"] = derived_mask
    if "sm_active_pct" in fields or "tensor_active_pct" in fields \
            or "dram_active_pct" in fields:
        fields["gpm_supported"] = True
    return counters


def devices_from_groups(groups: Mapping[tuple, Acc], *, timestamp: float) -> list[DeviceSnapshot]:
    """Every grouped device as a snapshot, sorted by node, vendor, index (a history step)."""
    devices = [device_from_acc(acc, timestamp=timestamp)[0] for acc in groups.values()]
    devices.sort(key=lambda d: (d.node, d.vendor, d.index, d.uuid))
    return devices
