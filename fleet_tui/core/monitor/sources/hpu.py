"""Intel Gaudi (HPU) through ``hl-smi -Q <fields> -f csv,noheader``.

Facts (``reference/field-notes/monitoring.md`` section 6): the query syntax and the default field
list are the ones a production monitor uses (all-smi ``src/device/hlsmi/config.rs``); values carry
their units (``131072 MiB``, ``226 W``, ``36 C``, ``0 %``) and ``N/A`` where a board has no reading;
hl-smi has no per-process utilization. hl-smi runs as an argv list (no shell) with a timeout, in a
worker thread. The ``pyhlml`` bindings are not used yet (see the module's report): hl-smi is what
every Gaudi host has.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.host import HostReader

DEFAULT_FIELDS: tuple[str, ...] = (
    "index", "uuid", "name", "driver_version", "memory.total", "memory.used", "memory.free",
    "power.draw", "power.max", "temperature.aip", "utilization.aip",
)
_TEXT_FIELDS = frozenset({"uuid", "name", "driver_version", "bus_id", "serial", "timestamp", "module_id"})
_UNIT_SCALE = {
    "": 1.0, "%": 1.0, "c": 1.0, "w": 1.0, "mw": 1e-3, "mhz": 1.0,
    "b": 1.0, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3,
    "kb": 1e3, "mb": 1e6, "gb": 1e9,
}
_VALUE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)$")
_NA = frozenset({"n/a", "[n/a]", "na", "", "-", "not supported", "[not supported]"})

# hl-smi model codes -> product (all-smi src/device/hlsmi/parser.rs map_device_name).
_MODELS = (
    ("HL-100", "Intel Gaudi"),
    ("HL-200", "Intel Gaudi 2"), ("HL-205", "Intel Gaudi 2"), ("HL-225", "Intel Gaudi 2"),
    ("HL-325L", "Intel Gaudi 3"), ("HL-325", "Intel Gaudi 3"), ("HL-328", "Intel Gaudi 3"),
    ("HL-338", "Intel Gaudi 3"), ("HL-388", "Intel Gaudi 3"),
)


def product_name(model: str) -> str:
    code = model.strip()
    for prefix, product in _MODELS:
        if code.upper().startswith(prefix):
            return f"{product} ({code})"
    return code or "Intel Gaudi"


def parse_value(field: str, raw: str) -> Any:
    """One CSV cell: text fields as strings, numbers with their unit converted, N/A -> None."""
    text = raw.strip()
    if text.lower() in _NA:
        return None
    if field in _TEXT_FIELDS:
        return text
    m = _VALUE.match(text)
    if not m:
        raise ValueError(f"{field}: {text!r} is not a number with a unit")
    unit = m.group(2).lower()
    if unit not in _UNIT_SCALE:
        raise ValueError(f"{field}: unknown unit {m.group(2)!r} in {text!r}")
    return float(m.group(1)) * _UNIT_SCALE[unit]


def parse_hlsmi_csv(text: str, fields: Sequence[str] = DEFAULT_FIELDS) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of ``hl-smi -Q ... -f csv,noheader`` keyed by field, and one problem per bad line."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            problems.append(
                f"hl-smi line {lineno}: expected {len(fields)} comma-separated values "
                f"({', '.join(fields)}), got {len(cells)}: {line.strip()[:120]!r}"
            )
            continue
        try:
            row = {f: parse_value(f, c) for f, c in zip(fields, cells)}
            if "index" in row:
                if row["index"] is None or row["index"] != int(row["index"]):
                    raise ValueError(f"index: {cells[fields.index('index')]!r} is not a device index")
                row["index"] = int(row["index"])
        except ValueError as exc:
            problems.append(f"hl-smi line {lineno}: {exc}")
            continue
        rows.append(row)
    return rows, problems


def row_to_device(row: dict[str, Any], position: int, timestamp: float) -> DeviceSnapshot:
    used, total = row.get("memory.used"), row.get("memory.total")
    if total is None and used is not None and row.get("memory.free") is not None:
        total = used + row["memory.free"]
    return DeviceSnapshot(
        index=int(row.get("index", position)),
        name=product_name(row.get("name") or ""),
        uuid=row.get("uuid") or "",
        vendor="intel",
        timestamp=timestamp,
        gpu_util_pct=row.get("utilization.aip"),
        mem_used_bytes=int(used) if used is not None else None,
        mem_total_bytes=int(total) if total is not None else None,
        temp_c=row.get("temperature.aip"),
        power_w=row.get("power.draw"),
        power_limit_w=row.get("power.max"),
        sm_clock_mhz=row.get("clocks.current.soc"),
        sm_clock_max_mhz=row.get("clocks.limit.soc"),
        gpm_supported=False,
        unsupported=frozenset({"sm_active_pct", "tensor_active_pct", "dram_active_pct", "processes"}),
    )


class HpuSource(Source):
    name = "hpu"
    kind = "live"

    def __init__(
        self,
        *,
        hl_smi: str = "hl-smi",
        fields: Sequence[str] = DEFAULT_FIELDS,
        timeout_s: float = 5.0,
        host: bool = True,
        **_ignored: Any,
    ) -> None:
        self.hl_smi = hl_smi
        self.fields = tuple(fields)
        self.timeout_s = timeout_s
        self._exe: str | None = None
        self._host = HostReader() if host else None
        self._last: tuple[DeviceSnapshot, ...] = ()

    def argv(self) -> list[str]:
        return [self._exe or self.hl_smi, "-Q", ",".join(self.fields), "-f", "csv,noheader"]

    async def open(self) -> None:
        exe = shutil.which(self.hl_smi)
        if exe is None:
            raise SourceUnavailable(
                f"{self.hl_smi} not found on PATH: is the Intel Gaudi software (hl-smi from the "
                "habanalabs tools) installed?"
            )
        self._exe = exe
        snap = await self.sample()
        if not snap.devices:
            why = "; ".join(snap.errors) or "no output"
            raise SourceUnavailable(f"hl-smi found no Gaudi device ({why}).")

    async def sample(self) -> Snapshot:
        return await asyncio.to_thread(self.sample_blocking)

    def _run(self) -> str:
        proc = subprocess.run(  # argv list, no shell
            self.argv(), capture_output=True, text=True, timeout=self.timeout_s, check=False
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"hl-smi exited with status {proc.returncode}: {tail[0][:200]}")
        return proc.stdout

    def sample_blocking(self) -> Snapshot:
        now = time.time()
        errors: list[str] = []
        try:
            out = self._run()
        except subprocess.TimeoutExpired:
            errors.append(f"hl-smi did not answer within {self.timeout_s:g} s")
            out = None
        except (OSError, RuntimeError) as exc:
            errors.append(str(exc))
            out = None
        if out is None:
            devices = tuple(
                DeviceSnapshot(index=d.index, name=d.name, uuid=d.uuid, vendor="intel", timestamp=now,
                               state="unavailable", error=errors[0])
                for d in self._last
            )
        else:
            rows, problems = parse_hlsmi_csv(out, self.fields)
            errors.extend(problems)
            devices = tuple(row_to_device(r, i, now) for i, r in enumerate(rows))
            self._last = devices
        return Snapshot(
            timestamp=now,
            source="hpu",
            source_kind="live",
            devices=devices,
            host=self._host.read() if self._host is not None else None,
            errors=tuple(errors),
        )
