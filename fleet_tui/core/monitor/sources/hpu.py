"""Intel Gaudi (HPU) through ``hl-smi -Q <fields> -f csv,noheader``.

Facts (docs.habana.ai, System Management Interface Tool): the query syntax and the default field
list are the ones a production monitor uses (all-smi ``src/device/hlsmi/config.rs``); values carry
their units (``131072 MiB``, ``226 W``, ``36 C``, ``0 %``) and ``N/A`` where a board has no reading;
hl-smi has no per-process utilization. hl-smi runs as an argv list (no shell) with a timeout, in a
worker thread. The ``pyhlml`` bindings are not used yet (see the module's report): hl-smi is what
every Gaudi host has.

When the ``pyhlml`` bindings (PyPI ``habana-pyhlml``, import name ``pyhlml``; names checked in
1.24.2.481 ``pyhlml/main.py``) import and ``hlmlInit`` succeeds, they are used instead (no process
spawn per tick, and they add the SoC clock, slowdown temperature, throttle reasons and ECC counters).
``backend="hl-smi"`` or ``"pyhlml"`` forces one.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from fleet_tui.core.monitor.snapshot import (
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    DeviceSnapshot,
    Snapshot,
)
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


# HLML return codes (pyhlml_types_generated.HLML_RETURN) and throttle bits (l.264-265)
_HLML_NOT_SUPPORTED = 3
_HLML_AIP_IS_LOST = 15
_HLML_THROTTLE_POWER = 1 << 0
_HLML_THROTTLE_THERMAL = 1 << 1
_HLML_FIELDS_OF = {
    "utilization": ("gpu_util_pct",), "memory": ("mem_used_bytes", "mem_total_bytes"),
    "temperature": ("temp_c",), "slowdown": ("slowdown_temp_c",), "power": ("power_w",),
    "power_limit": ("power_limit_w",), "clock": ("sm_clock_mhz",), "clock_max": ("sm_clock_max_mhz",),
    "throttle": ("clock_event_reasons",), "ecc": ("ecc_corrected", "ecc_uncorrected"),
}
_HL_BASE_UNSUPPORTED = frozenset({"sm_active_pct", "tensor_active_pct", "dram_active_pct", "processes"})


class _HlmlDevice:
    __slots__ = ("index", "handle", "name", "uuid", "learned", "lost", "slowdown", "clock_max")

    def __init__(self, index: int, handle: Any) -> None:
        self.index, self.handle = index, handle
        self.name, self.uuid = "Intel Gaudi", ""
        self.learned: set[str] = set()
        self.lost: str | None = None
        self.slowdown: float | None = None
        self.clock_max: float | None = None

    @property
    def unsupported(self) -> frozenset[str]:
        return _HL_BASE_UNSUPPORTED | {f for k in self.learned for f in _HLML_FIELDS_OF.get(k, ())}


class _AipLost(Exception):
    pass


class HlmlReader:
    """Gaudi devices through ``pyhlml``: unsupported calls are learned once per device (like NVML's
    NOT_SUPPORTED), a lost AIP is marked ``state="lost"`` and not polled again."""

    def __init__(self, hlml: Any) -> None:
        self.hl = hlml
        self.devices: list[_HlmlDevice] = []
        self.errors: list[str] = []

    def open(self) -> None:
        hl = self.hl
        try:
            hl.hlmlInit()
            count = hl.hlmlDeviceGetCount()
        except Exception as exc:  # noqa: BLE001 - pyhlml raises HLMLError (UNINITIALIZED when libhlml is missing)
            raise SourceUnavailable(f"pyhlml could not initialise HLML: {exc}") from exc
        if not count:
            self.close()
            raise SourceUnavailable("HLML found no Gaudi device.")
        for i in range(count):
            d = _HlmlDevice(i, None)
            try:
                d.handle = hl.hlmlDeviceGetHandleByIndex(i)
                d.name = product_name(_decode(self._get(d, "name", hl.hlmlDeviceGetName)) or "")
                d.uuid = _decode(self._get(d, "uuid", hl.hlmlDeviceGetUUID)) or ""
                d.slowdown = _fnum(self._get(d, "slowdown", hl.hlmlDeviceGetTemperatureThreshold, 1))
                d.clock_max = _fnum(self._get(d, "clock_max", hl.hlmlDeviceGetMaxClockInfo, 0))
            except _AipLost:
                d.lost = "Gaudi device is lost (HLML_ERROR_AIP_IS_LOST)."
            except Exception as exc:  # noqa: BLE001
                d.lost = f"HLML could not open device {i}: {exc}"
            self.devices.append(d)

    def close(self) -> None:
        try:
            self.hl.hlmlShutdown()
        except Exception:  # noqa: BLE001
            pass

    def _get(self, d: _HlmlDevice, key: str, fn: Any, *args: Any) -> Any:
        if key in d.learned:
            return None
        try:
            return fn(d.handle, *args)
        except Exception as exc:  # noqa: BLE001 - HLMLError carries .value
            code = getattr(exc, "value", None)
            if code == _HLML_NOT_SUPPORTED:
                d.learned.add(key)
            elif code == _HLML_AIP_IS_LOST:
                raise _AipLost from exc
            else:
                self.errors.append(f"Gaudi {d.index}: {key}: {exc}")
            return None

    def read(self, now: float) -> tuple[DeviceSnapshot, ...]:
        self.errors = []
        out = []
        for d in self.devices:
            if d.lost is None:
                try:
                    out.append(self._read(d, now))
                    continue
                except _AipLost:
                    d.lost = "Gaudi device is lost (HLML_ERROR_AIP_IS_LOST)."
            out.append(DeviceSnapshot(index=d.index, name=d.name, uuid=d.uuid, vendor="intel", timestamp=now,
                                      state="lost", error=d.lost, unsupported=d.unsupported))
        return tuple(out)

    def _read(self, d: _HlmlDevice, now: float) -> DeviceSnapshot:
        hl, get = self.hl, self._get
        util = get(d, "utilization", hl.hlmlDeviceGetUtilizationRates)
        if util is not None and not isinstance(util, (int, float)):
            util = util.aip  # struct in 1.24.x; the archived bindings returned the int
        mem = get(d, "memory", hl.hlmlDeviceGetMemoryInfo)
        temp = get(d, "temperature", hl.hlmlDeviceGetTemperature, 0)  # HLML_TEMPERATURE_ON_AIP
        power_mw = get(d, "power", hl.hlmlDeviceGetPowerUsage)
        limit_mw = get(d, "power_limit", hl.hlmlDeviceGetPowerManagementLimit)
        clock = get(d, "clock", hl.hlmlDeviceGetClockInfo, 0)  # HLML_CLOCK_SOC
        raw = get(d, "throttle", hl.hlmlDeviceGetCurrentClocksThrottleReasons)
        corr = get(d, "ecc", hl.hlmlDeviceGetTotalECCErrors, 0, 0)  # CORRECTED, VOLATILE
        unc = get(d, "ecc", hl.hlmlDeviceGetTotalECCErrors, 1, 0)
        reasons = None
        if raw is not None:  # Gaudi's own bits mapped onto the NVML meanings the analysis reads
            reasons = (CLOCK_EVENT_SW_POWER_CAP if raw & _HLML_THROTTLE_POWER else 0) | (
                CLOCK_EVENT_SW_THERMAL if raw & _HLML_THROTTLE_THERMAL else 0)
        return DeviceSnapshot(
            index=d.index, name=d.name, uuid=d.uuid, vendor="intel", timestamp=now,
            gpu_util_pct=_fnum(util),
            mem_used_bytes=int(mem.used) if mem is not None else None,
            mem_total_bytes=int(mem.total) if mem is not None else None,
            temp_c=_fnum(temp), slowdown_temp_c=d.slowdown,
            power_w=power_mw / 1000 if power_mw is not None else None,
            power_limit_w=limit_mw / 1000 if limit_mw is not None else None,
            sm_clock_mhz=_fnum(clock), sm_clock_max_mhz=d.clock_max,
            clock_event_reasons=reasons,
            ecc_corrected=int(corr) if corr is not None else None,
            ecc_uncorrected=int(unc) if unc is not None else None,
            gpm_supported=False, unsupported=d.unsupported,
            extra=(("hlml_throttle_reasons", float(raw)),) if raw is not None else (),
        )


def _decode(v: Any) -> str | None:
    return v.decode(errors="replace") if isinstance(v, bytes) else (str(v) if v is not None else None)


def _fnum(v: Any) -> float | None:
    return float(v) if v is not None else None


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
        backend: str = "auto",
        hlml: Any = None,
        **_ignored: Any,
    ) -> None:
        if backend not in ("auto", "hl-smi", "pyhlml"):
            raise ValueError(f"hpu backend must be auto, hl-smi or pyhlml, got {backend!r}")
        self.backend = backend
        self._hlml_module = hlml
        self._hlml: HlmlReader | None = None
        self.hl_smi = hl_smi
        self.fields = tuple(fields)
        self.timeout_s = timeout_s
        self._exe: str | None = None
        self._host = HostReader() if host else None
        self._last: tuple[DeviceSnapshot, ...] = ()

    def argv(self) -> list[str]:
        return [self._exe or self.hl_smi, "-Q", ",".join(self.fields), "-f", "csv,noheader"]

    async def open(self) -> None:
        if self.backend in ("auto", "pyhlml"):
            why = await asyncio.to_thread(self._open_hlml)
            if self._hlml is not None:
                return
            if self.backend == "pyhlml":
                raise SourceUnavailable(why)
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

    def _open_hlml(self) -> str:
        hl = self._hlml_module
        if hl is None:
            try:
                # optional (habana-pyhlml), and absent where the checker runs: imported by name
                hl = importlib.import_module("pyhlml")
            except ImportError:
                return "the pyhlml bindings (habana-pyhlml) are not installed"
        reader = HlmlReader(hl)
        try:
            # pyhlml prints "Failed to load libhlml" to stdout when the library is missing; keep it
            # off the terminal the app draws on (the reason is returned instead).
            with contextlib.redirect_stdout(io.StringIO()):
                reader.open()
        except SourceUnavailable as exc:
            return str(exc)
        self._hlml = reader
        return ""

    async def sample(self) -> Snapshot:
        return await asyncio.to_thread(self.sample_blocking)

    async def close(self) -> None:
        reader, self._hlml = self._hlml, None
        if reader is not None:
            await asyncio.to_thread(reader.close)

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
        if self._hlml is not None:
            devices = self._hlml.read(now)
            return Snapshot(timestamp=now, source="hpu", source_kind="live", devices=devices,
                            host=self._host.read() if self._host is not None else None,
                            errors=tuple(self._hlml.errors))
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
