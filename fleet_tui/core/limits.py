"""The upper bound of every size that comes from input, in one registry.

Each bound is checked before anything is allocated from the value it bounds, and its error names
the value, where it came from (``file:line`` or the flag) and the bound. ``docs/hostile-input.md``
lists this table (a test checks the two agree). The bounds are far above any real fleet or trace
(the largest published GPU clusters hold ~10^5 devices; a year of 1 s samples is ~3·10^7 lines) and
low enough that the memory of one input stays well under 1.5 GB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleet_tui.core.errors import UserError


@dataclass(frozen=True, slots=True)
class Bound:
    name: str
    limit: float
    unit: str
    why: str


_MIB = 2**20

BOUNDS: dict[str, Bound] = {b.name: b for b in (
    Bound("file_bytes", 128 * _MIB, "bytes",
          "a data file read whole (job list, device list, rules, model config); its parsed "
          "form stays under ~1 GB"),
    Bound("demand_file_bytes", 16 * _MIB, "bytes", "a demand profile (10 years of hours is ~1 MB)"),
    Bound("catalog_file_bytes", 16 * _MIB, "bytes", "one catalog TOML file"),
    Bound("line_bytes", 16 * _MIB, "bytes", "one line of a trace or recording (streamed files)"),
    Bound("devices", 1_000_000, "devices", "devices in a demand profile's hour or a device list"),
    Bound("demand_hours", 24 * 366 * 10, "hours", "hours in a demand profile (10 years)"),
    Bound("jobs", 1_000_000, "jobs", "jobs in one job list (~0.5 GB of jobs in memory)"),
    Bound("job_gpus", 1_000_000, "GPUs", "GPUs one job asks for"),
    Bound("instance_devices", 65536, "devices",
          "accelerators in one catalog offer (the largest, a TPU v5p pod, has 8,960 chips)"),
    Bound("price_usd_per_hour", 1_000_000.0, "USD/h",
          "one catalog price (the largest listed offer, a TPU pod, is ~$30,000/h)"),
    Bound("time_s", 1e10, "s", "a timestamp or duration in seconds (year 2286; larger is "
                               "likely milli-, micro- or nanoseconds)"),
    Bound("window_s", 1e7, "s", "an analysis --window or --step (and at least 0.001 s)"),
    Bound("window_overlap", 1000, "windows", "windows one sample falls in (--window / --step)"),
    Bound("flag_number", 1e12, "", "any numeric flag's magnitude (seconds, counts, prices)"),
    Bound("timeout_s", 3600.0, "s", "a network timeout"),
    Bound("name_bytes", 255, "bytes", "a file name component (the POSIX NAME_MAX)"),
)}

# the catalog's smallest price: below a cent per thousand hours a price is a typo or a unit slip
MIN_PRICE_USD_PER_HOUR = 1e-5


def limit(name: str) -> float:
    return BOUNDS[name].limit


def int_limit(name: str) -> int:
    return int(BOUNDS[name].limit)


def check_count(value: float, name: str, where: str, what: str | None = None) -> None:
    """``UserError`` naming ``where`` when ``value`` exceeds the bound ``name`` (or is not finite)."""
    bound = BOUNDS[name]
    if not math.isfinite(value) or value > bound.limit:
        label = what or bound.name.replace("_", " ")
        raise UserError(f"{where}: {label} {value:g} is over the bound of {bound.limit:g} "
                        f"{bound.unit} ({bound.why})".rstrip())


def check_time(value: float, where: str, field: str, *, allow_negative: bool = False) -> float:
    """A time in seconds, finite and within ``time_s``: the value, or ``UserError`` naming it."""
    bound = limit("time_s")
    if not math.isfinite(value):
        raise UserError(f"{where}: {field} must be a finite number of seconds, got {value!r}")
    if abs(value) > bound or (value < 0 and not allow_negative):
        raise UserError(f"{where}: {field} {value:g} s is outside 0-{bound:g} s "
                        f"({BOUNDS['time_s'].why})")
    return value
