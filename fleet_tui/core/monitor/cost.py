"""The cost of what the monitor sees: $/hour, dollars so far, dollars spent idle or starved.

The user says which catalog instance this machine is (``--instance p5.48xlarge``); otherwise the
candidates are the catalog instances with the detected accelerator model and count, and one is used
only when there is a single candidate type. Cloud metadata endpoints are never queried.

Each device carries ``price / accelerator_count`` per hour. Every tick, each device's share of the
elapsed time is booked under its primary diagnosis; the cost-efficiency score is the dollar-weighted
useful-work fraction (see ``USEFUL_WORK``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from fleet_tui.core.errors import FieldError
from fleet_tui.core.monitor.analysis import DeviceAnalysis
from fleet_tui.core.records import record

# Share of a device-hour that counts as useful work, by primary diagnosis. Computing on tensor
# cores or streaming HBM at its limit is the work the hardware is for (1.0). Plain-FP32 math runs
# several times slower than tensor cores would (0.5). Waiting (idle, starved, launch or transfer
# bound) is 0. Other states (alarms, pressure, growth, power/thermal) use SM activity as the share
# of the GPU that was busy.
USEFUL_WORK = {
    "healthy_compute": 1.0, "memory_bandwidth_bound": 1.0, "compute_no_tensor_cores": 0.5,
    "idle": 0.0, "input_starved": 0.0, "launch_bound": 0.0, "host_transfer_bound": 0.0,
    "device_lost": 0.0,
}
WAITING_KINDS = ("input_starved", "launch_bound", "host_transfer_bound")


@record
class InstanceChoice:
    instance_type: str | None
    usd_per_hour: float | None
    accelerator_count: int | None
    region: str | None = None
    cloud: str | None = None
    candidates: tuple[str, ...] = ()
    note: str = ""


@record
class CostState:
    instance_type: str | None
    usd_per_hour: float | None
    elapsed_s: float
    usd_so_far: float
    usd_idle: float
    usd_waiting: float  # starved, launch-bound, transfer-bound
    usd_by_kind: tuple[tuple[str, float], ...] = ()
    efficiency: float | None = None  # 0-1, dollar-weighted useful-work fraction
    candidates: tuple[str, ...] = ()
    note: str = ""

    @property
    def usd_per_day(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour * 24

    @property
    def usd_wasted(self) -> float:
        return self.usd_idle + self.usd_waiting

    def lines(self) -> list[tuple[str, str]]:
        """(label, value) pairs for display."""
        if self.usd_per_hour is None:
            out = [("instance", "unknown: give --instance TYPE")]
            if self.candidates:
                out.append(("candidates", ", ".join(self.candidates[:6])))
            return out
        out = [("instance", f"{self.instance_type}"), ("rate", f"${self.usd_per_hour:,.2f}/h"),
               ("so far", f"${self.usd_so_far:,.2f} over {self.elapsed_s / 60:.1f} min"),
               ("idle", f"${self.usd_idle:,.2f}"), ("starved/waiting", f"${self.usd_waiting:,.2f}")]
        if self.efficiency is not None:
            out.append(("efficiency", f"{self.efficiency:.0%} useful work"))
        if self.note:
            out.append(("note", self.note))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance_type, "usd_per_hour": self.usd_per_hour,
                "usd_per_day": self.usd_per_day, "elapsed_s": round(self.elapsed_s, 3),
                "usd_so_far": round(self.usd_so_far, 6), "usd_idle": round(self.usd_idle, 6),
                "usd_waiting": round(self.usd_waiting, 6),
                "usd_by_kind": {k: round(v, 6) for k, v in self.usd_by_kind},
                "efficiency": None if self.efficiency is None else round(self.efficiency, 4),
                "candidates": list(self.candidates), "note": self.note}


def _cheapest(rows: Sequence[Any]) -> Any | None:
    priced = [r for r in rows if r.price("on-demand") is not None]
    return min(priced, key=lambda r: r.price("on-demand")) if priced else None


def accelerator_id_for(catalog: Any, device_name: str) -> str | None:
    """Catalog accelerator id for a device name as NVML reports it ("NVIDIA H100 80GB HBM3")."""
    name = device_name.strip()
    tries = [name]
    for prefix in ("NVIDIA ", "Tesla ", "AMD ", "Intel "):
        if name.startswith(prefix):
            tries.append(name[len(prefix):])
    words = tries[-1].split()
    tries += [" ".join(words[:n]) for n in range(len(words) - 1, 0, -1)]
    tries += ["-".join(words[:n]) for n in range(len(words), 0, -1)]
    for t in tries:
        acc = catalog.resolve_accelerator(t)
        if acc:
            return acc
    return None


def choose_instance(catalog: Any, instance_type: str | None = None, *,
                    device_name: str | None = None, device_count: int | None = None,
                    region: str | None = None) -> InstanceChoice:
    """Price this machine: the named instance type, or the single matching catalog type."""
    if instance_type:
        rows = catalog.find_instance(instance_type, region)
        best = _cheapest(rows)
        if best is None:
            shown = repr(instance_type).replace("{", "{{").replace("}", "}}")  # not a field
            raise FieldError("instance", f"{{instance}} {shown}: the catalog has no "
                             "on-demand price for it")
        note = (f"lowest on-demand price of {len(rows)} regions ({best.region})"
                if len(rows) > 1 else "")
        return InstanceChoice(best.instance_type, best.price("on-demand"),
                              int(best.accelerator_count), best.region, best.cloud, (), note)
    if not device_name:
        return InstanceChoice(None, None, None, note="no device detected")
    acc = accelerator_id_for(catalog, device_name)
    if acc is None:
        return InstanceChoice(None, None, None, note=f"{device_name!r} is not in the catalog")
    rows = [i for i in catalog.instances if i.accelerator == acc
            and (device_count is None or int(i.accelerator_count) == device_count)]
    types = sorted({r.instance_type for r in rows})
    if len(types) == 1:
        best = _cheapest(rows)
        if best is not None:
            return InstanceChoice(best.instance_type, best.price("on-demand"),
                                  int(best.accelerator_count), best.region, best.cloud,
                                  tuple(types), "the only catalog instance with these devices")
    return InstanceChoice(None, None, None, candidates=tuple(types),
                          note=f"{len(types)} catalog instances match {device_count or ''}x"
                               f"{acc}; pick one with --instance")


@dataclass
class CostMeter:
    """Accumulates dollars per device by primary diagnosis, tick by tick."""

    usd_per_hour: float | None
    accelerator_count: int | None = None
    instance_type: str | None = None
    candidates: tuple[str, ...] = ()
    note: str = ""
    _last_t: float | None = None
    _start_t: float | None = None
    _by_kind: dict[str, float] = field(default_factory=dict)
    _useful: float = 0.0
    _total: float = 0.0

    @classmethod
    def from_choice(cls, choice: InstanceChoice) -> "CostMeter":
        return cls(usd_per_hour=choice.usd_per_hour, accelerator_count=choice.accelerator_count,
                   instance_type=choice.instance_type, candidates=choice.candidates,
                   note=choice.note)

    def update(self, now: float, analyses: Mapping[str, DeviceAnalysis],
               device_count: int | None = None) -> CostState:
        if self._start_t is None:
            self._start_t = now
        dt = 0.0 if self._last_t is None else max(0.0, now - self._last_t)
        self._last_t = now
        n = self.accelerator_count or device_count or len(analyses) or 1
        if self.usd_per_hour is not None and dt > 0 and analyses:
            per_device = self.usd_per_hour / n * dt / 3600.0
            by_kind = self._by_kind
            total, useful = self._total, self._useful
            for an in analyses.values():
                kind = an.primary
                by_kind[kind] = by_kind.get(kind, 0.0) + per_device
                total += per_device
                share = USEFUL_WORK.get(kind)
                useful += per_device * (share if share is not None else _useful_share(an))
            self._total, self._useful = total, useful
            # devices of the instance the source does not show are booked as unobserved
            unseen = max(0, n - len(analyses))
            if unseen:
                self._by_kind["unobserved"] = (self._by_kind.get("unobserved", 0.0)
                                               + per_device * unseen)
        return self.state(now)

    def state(self, now: float | None = None) -> CostState:
        elapsed = 0.0 if self._start_t is None or now is None else now - self._start_t
        by_kind = self._by_kind
        get = by_kind.get
        # positional, in field order (runs every tick); sorted(reverse=True) keeps ties in
        # insertion order, exactly like sorting on the negated amount
        return CostState(
            self.instance_type, self.usd_per_hour, elapsed,
            sum(by_kind.values()),  # usd_so_far
            get("idle", 0.0),  # usd_idle
            sum([get(k, 0.0) for k in WAITING_KINDS]),  # usd_waiting
            tuple(sorted(by_kind.items(), key=itemgetter(1), reverse=True)),  # usd_by_kind
            (self._useful / self._total) if self._total > 0 else None,  # efficiency
            self.candidates, self.note)


def _useful_share(an: DeviceAnalysis) -> float:
    kind = an.primary
    if kind in USEFUL_WORK:
        return USEFUL_WORK[kind]
    # other primaries: fall back to how busy the SMs (or kernels) were
    for d in an.diagnoses:
        # evidence_value reads one signal without building the whole (display) evidence
        v = d.evidence_value("sm_active_pct")
        if v is None:
            v = d.evidence_value("gpu_util_pct")
        if isinstance(v, (int, float)):
            return max(0.0, min(1.0, v / 100.0))
    return 0.0
