"""AMD GPUs (Instinct MI200/MI300, Radeon) through AMD SMI.

Two backends, like the Gaudi source: the ``amdsmi`` Python library (ROCm's bindings to
``libamd_smi``; no process spawn per tick) when it imports and ``amdsmi_init`` succeeds, else the
``amd-smi`` CLI run as argv lists with a timeout in a worker thread:
``amd-smi metric --json`` every tick, ``amd-smi static --json`` once (name, power cap, slowdown
temperatures) and ``amd-smi process --json`` every tick (best effort). ``backend="amdsmi"`` or
``"amd-smi"`` forces one.

Shapes read (fixtures in tests/fixtures/amd/, cited there): amd-smi 6.1+ prints a list of per-GPU
objects whose leaves are ``{"value": N, "unit": "MB"}`` or ``"N/A"``; ROCm 6.4+/7 wraps the list
as ``{"gpu_data": [...]}``. amd-smi's ``MB`` is 2^20 bytes (an 8 GiB RX 6600 reports 8176 MB).
The library's ``amdsmi_get_gpu_metrics_info`` returns one flat dict (``average_gfx_activity``,
``current_gfxclk``, ``temperature_hotspot``, ``throttle_status`` ...), ``amdsmi_get_gpu_vram_usage``
MB, ``amdsmi_get_power_cap_info`` microwatts (rocm.docs.amd.com, amdsmi_power_cap_info_t).

Mapping onto :class:`DeviceSnapshot`: utilization = GFX activity (like NVML utilization it says an
engine was busy, not how much of it); memory utilization = UMC (memory controller) activity;
temperature = hotspot (junction), with the hotspot slowdown limit; SM clock = GFX clock; power cap =
the socket power limit. AMD SMI reports only *whether* the GPU is throttled, not why: a throttled
GPU at >= 95% of its power cap is read as power-capped, at or above its slowdown temperature as
thermally throttled (otherwise the reason stays unknown and is kept in ``extra``).

What AMD does not expose (so the matching diagnoses cannot fire on AMD; ``UNSUPPORTED``): SM / CU
activity and occupancy, tensor (matrix core) activity and DRAM activity as DCGM's profiling fields
do — AMD has them only as rocprofiler hardware counters, which need a profiling session per process;
per-link NVLink-style transfer rates (XGMI read/write are accumulated counters on MI300 only); the
reason a GPU is throttled (see above); XID-style error events (ECC counts are read).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from typing import Any

from fleet_tui.core.monitor.snapshot import (
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    DeviceSnapshot,
    ProcessInfo,
    Snapshot,
)
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.host import HostReader

UNSUPPORTED = frozenset({"sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
                         "dram_active_pct", "nvlink_tx_bytes_s", "nvlink_rx_bytes_s", "xid_errors"})
_MIB = 1024.0 * 1024.0
_UNIT_BYTES = {"b": 1.0, "kb": 1024.0, "mb": _MIB, "gb": _MIB * 1024.0}
POWER_CAPPED_FRAC = 0.95  # a throttled GPU this close to its cap is taken as power-capped

# AMD's device-metrics-exporter (github.com/ROCm/device-metrics-exporter,
# docs/configuration/metricslist.md) as Prometheus sees it: lower-case names, ``gpu_id`` label (and
# ``job_id``/``job_user``/``job_partition`` with its Slurm integration). Name -> (DeviceSnapshot
# field, factor to its unit). For the Prometheus fleet source to read AMD nodes.
EXPORTER_METRICS: dict[str, tuple[str, float]] = {
    "gpu_gfx_activity": ("gpu_util_pct", 1.0),
    "gpu_umc_activity": ("mem_util_pct", 1.0),
    "gpu_used_vram": ("mem_used_bytes", _MIB),  # MB (2^20 bytes, as amd-smi)
    "gpu_total_vram": ("mem_total_bytes", _MIB),
    "gpu_package_power": ("power_w", 1.0),  # MI3xx
    "gpu_average_package_power": ("power_w", 1.0),  # MI2xx
    "gpu_junction_temperature": ("temp_c", 1.0),  # MI3xx hotspot
    "gpu_edge_temperature": ("temp_c", 1.0),  # MI2xx
    "gpu_clock": ("sm_clock_mhz", 1.0),  # one series per clock; the GFX clock is the SM clock
    "gpu_max_clock": ("sm_clock_max_mhz", 1.0),
    "gpu_ecc_correct_total": ("ecc_corrected", 1.0),
    "gpu_ecc_uncorrect_total": ("ecc_uncorrected", 1.0),
}


def _val(x: Any) -> float | None:
    """A number from ``5``, ``"5"``, ``{"value": 5, "unit": ...}``; ``"N/A"`` and the rest -> None."""
    if isinstance(x, dict):
        x = x.get("value")
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(str(x).strip().rstrip("%"))
    except ValueError:
        return None


def _bytes(x: Any) -> int | None:
    v = _val(x)
    if v is None:
        return None
    unit = str(x.get("unit", "MB")).lower() if isinstance(x, dict) else "mb"
    return int(v * _UNIT_BYTES.get(unit, _MIB))


def gpu_index(e: dict[str, Any], position: int) -> int:
    v = _val(e.get("gpu"))
    return int(v) if v is not None else position


def _section(entry: dict[str, Any], key: str) -> dict[str, Any]:
    """``entry[key]`` when it is an object, else empty (amd-smi omits or nulls what it cannot read)."""
    value = entry.get(key)
    return value if isinstance(value, dict) else {}


def gpu_entries(doc: Any) -> list[dict[str, Any]]:
    """Per-GPU objects of ``amd-smi ... --json`` (list, or ``{"gpu_data": [...]}``)."""
    if isinstance(doc, dict):
        doc = doc.get("gpu_data", [doc] if "gpu" in doc else [])
    if not isinstance(doc, list):
        raise ValueError("expected a list of GPUs or {\"gpu_data\": [...]}")
    return [e for e in doc if isinstance(e, dict)]


def parse_json(text: str, what: str) -> list[dict[str, Any]]:
    try:
        return gpu_entries(json.loads(text))
    except (json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"{what}: unreadable output ({exc})") from None


def static_info(entries: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """``amd-smi static --json`` -> per GPU: name, power cap, hotspot slowdown temperature."""
    out: dict[int, dict[str, Any]] = {}
    for i, e in enumerate(entries):
        limit = _section(e, "limit")
        asic = _section(e, "asic")
        name = asic.get("market_name")
        out[gpu_index(e, i)] = {
            "name": name if isinstance(name, str) and name != "N/A" else None,
            "power_limit_w": _val(limit.get("socket_power")) or _val(limit.get("max_power")),
            "slowdown_temp_c": _val(limit.get("slowdown_hotspot_temperature"))
            or _val(limit.get("slowdown_edge_temperature")),
            "uuid": str(asic.get("asic_serial")) if asic.get("asic_serial") not in (None, "N/A") else "",
        }
    return out


def processes_by_gpu(entries: list[dict[str, Any]]) -> dict[int, tuple[ProcessInfo, ...]]:
    """``amd-smi process --json``: ``[{"gpu": 0, "process_list": [{"process_info": {...}}]}]``."""
    out: dict[int, tuple[ProcessInfo, ...]] = {}
    for e in entries:
        gpu = gpu_index(e, 0)
        procs = []
        for item in e.get("process_list") or ():
            info = _section(item, "process_info") if isinstance(item, dict) else {}
            pid = _val(info.get("pid"))
            if pid is None:
                continue  # e.g. "No running processes detected"
            mem = _section(info, "memory_usage")
            procs.append(ProcessInfo(pid=int(pid), device_index=gpu,
                                     used_gpu_bytes=_bytes(mem.get("vram_mem")),
                                     command=str(info.get("name") or "") or None))
        out[gpu] = tuple(procs)
    return out


def _throttle_bits(throttled: bool | None, power_w, limit_w, temp_c, slowdown_c) -> int | None:
    if throttled is None:
        return None
    if not throttled:
        return 0
    bits = 0
    if power_w is not None and limit_w and power_w >= POWER_CAPPED_FRAC * limit_w:
        bits |= CLOCK_EVENT_SW_POWER_CAP
    if temp_c is not None and slowdown_c and temp_c >= slowdown_c:
        bits |= CLOCK_EVENT_SW_THERMAL
    return bits


def _throttled(status: Any) -> bool | None:
    if isinstance(status, bool):
        return status
    if isinstance(status, str) and status.upper() in ("THROTTLED", "UNTHROTTLED"):
        return status.upper() == "THROTTLED"
    return None


def metric_to_device(e: dict[str, Any], position: int, timestamp: float,
                     static: dict[str, Any] | None = None,
                     processes: tuple[ProcessInfo, ...] = ()) -> DeviceSnapshot:
    """One ``amd-smi metric --json`` GPU object as a snapshot."""
    st = static or {}
    index = gpu_index(e, position)
    usage = _section(e, "usage")
    power = _section(e, "power")
    temp = _section(e, "temperature")
    clock = _section(e, "clock")
    mem = _section(e, "mem_usage")
    ecc = _section(e, "ecc")
    gfx = _section(clock, "gfx_0")
    mclk = _section(clock, "mem_0")
    power_w = _val(power.get("socket_power"))
    limit_w = _val(power.get("power_limit")) or st.get("power_limit_w")
    temp_c = _val(temp.get("hotspot"))
    if temp_c is None:
        temp_c = _val(temp.get("edge"))
    slowdown = st.get("slowdown_temp_c")
    throttled = _throttled(power.get("throttle_status"))
    corr, unc = _val(ecc.get("total_correctable_count")), _val(ecc.get("total_uncorrectable_count"))
    return DeviceSnapshot(
        index=index, name=st.get("name") or f"AMD GPU {index}", uuid=st.get("uuid", ""),
        vendor="amd", timestamp=timestamp,
        gpu_util_pct=_val(usage.get("gfx_activity")), mem_util_pct=_val(usage.get("umc_activity")),
        mem_used_bytes=_bytes(mem.get("used_vram")), mem_total_bytes=_bytes(mem.get("total_vram")),
        temp_c=temp_c, slowdown_temp_c=slowdown, power_w=power_w, power_limit_w=limit_w,
        sm_clock_mhz=_val(gfx.get("clk")), sm_clock_max_mhz=_val(gfx.get("max_clk")),
        mem_clock_mhz=_val(mclk.get("clk")), mem_clock_max_mhz=_val(mclk.get("max_clk")),
        clock_event_reasons=_throttle_bits(throttled, power_w, limit_w, temp_c, slowdown),
        ecc_corrected=int(corr) if corr is not None else None,
        ecc_uncorrected=int(unc) if unc is not None else None,
        gpm_supported=False, unsupported=UNSUPPORTED, processes=processes,
        extra=(("amd_throttled", 1.0 if throttled else 0.0),) if throttled is not None else (),
    )


# --------------------------------------------------------------------------------------------
# The amdsmi library


class AmdSmiLibReader:
    """GPUs through the ``amdsmi`` module; a call that fails is learned and not made again."""

    def __init__(self, lib: Any):
        self.lib = lib
        self.handles: list[Any] = []
        self.static: list[dict[str, Any]] = []
        self.learned: list[set[str]] = []
        self.errors: list[str] = []

    def open(self) -> None:
        try:
            self.lib.amdsmi_init()
            self.handles = list(self.lib.amdsmi_get_processor_handles())
        except Exception as exc:  # noqa: BLE001 - AmdSmiLibraryException and friends
            raise SourceUnavailable(f"amdsmi could not initialise: {exc}") from exc
        if not self.handles:
            self.close()
            raise SourceUnavailable("amdsmi found no AMD GPU.")
        for i, h in enumerate(self.handles):
            self.learned.append(set())
            asic = self._get(i, "asic", self.lib.amdsmi_get_gpu_asic_info, h) or {}
            cap = self._get(i, "power_cap", self.lib.amdsmi_get_power_cap_info, h) or {}
            name = asic.get("market_name")
            self.static.append({
                "name": name if isinstance(name, str) and name != "N/A" else None,
                "power_limit_w": (_val(cap.get("power_cap")) or 0) / 1e6 or None,
                "uuid": "",
            })

    def close(self) -> None:
        try:
            self.lib.amdsmi_shut_down()
        except Exception:  # noqa: BLE001
            pass

    def _get(self, i: int, key: str, fn: Any, *args: Any) -> Any:
        if key in self.learned[i]:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - unsupported on this GPU/platform: ask once
            self.learned[i].add(key)
            self.errors.append(f"AMD GPU {i}: {key} not available ({exc})")
            return None

    def read(self, now: float) -> tuple[DeviceSnapshot, ...]:
        self.errors = []
        out = []
        for i, h in enumerate(self.handles):
            m = self._get(i, "metrics", self.lib.amdsmi_get_gpu_metrics_info, h) or {}
            vram = self._get(i, "vram", self.lib.amdsmi_get_gpu_vram_usage, h) or {}
            procs = self._get(i, "processes", self.lib.amdsmi_get_gpu_process_list, h) or []
            power = _val(m.get("current_socket_power"))
            if power is None:
                power = _val(m.get("average_socket_power"))
            entry = {
                "gpu": i,
                "usage": {"gfx_activity": m.get("average_gfx_activity"),
                          "umc_activity": m.get("average_umc_activity")},
                "power": {"socket_power": power, "throttle_status": m.get("throttle_status")},
                "temperature": {"hotspot": m.get("temperature_hotspot"),
                                "edge": m.get("temperature_edge")},
                "clock": {"gfx_0": {"clk": m.get("current_gfxclk")},
                          "mem_0": {"clk": m.get("current_uclk")}},
                "mem_usage": {"used_vram": {"value": vram.get("vram_used"), "unit": "MB"},
                              "total_vram": {"value": vram.get("vram_total"), "unit": "MB"}},
            }
            plist = tuple(ProcessInfo(pid=int(p["pid"]), device_index=i,
                                      used_gpu_bytes=_bytes((p.get("memory_usage") or {}).get("vram_mem")),
                                      command=p.get("name") or None)
                          for p in procs if isinstance(p, dict) and _val(p.get("pid")) is not None)
            out.append(metric_to_device(entry, i, now, self.static[i], plist))
        return tuple(out)


# --------------------------------------------------------------------------------------------
# The source


class AmdSource(Source):
    name = "amd"
    kind = "live"

    def __init__(self, *, amd_smi: str = "amd-smi", timeout_s: float = 5.0, host: bool = True,
                 backend: str = "auto", amdsmi: Any = None, **_ignored: Any) -> None:
        if backend not in ("auto", "amdsmi", "amd-smi"):
            raise ValueError(f"amd backend must be auto, amdsmi or amd-smi, got {backend!r}")
        self.backend = backend
        self.amd_smi = amd_smi
        self.timeout_s = timeout_s
        self._lib_module = amdsmi
        self._lib: AmdSmiLibReader | None = None
        self._exe: str | None = None
        self._static: dict[int, dict[str, Any]] = {}
        self._host = HostReader() if host else None
        self._last: tuple[DeviceSnapshot, ...] = ()

    async def open(self) -> None:
        if self.backend in ("auto", "amdsmi"):
            why = await asyncio.to_thread(self._open_lib)
            if self._lib is not None:
                return
            if self.backend == "amdsmi":
                raise SourceUnavailable(why)
        exe = shutil.which(self.amd_smi)
        if exe is None:
            raise SourceUnavailable(f"{self.amd_smi} not found on PATH: is ROCm's AMD SMI "
                                    "(amd-smi-lib) installed?")
        self._exe = exe
        try:
            self._static = static_info(parse_json(await asyncio.to_thread(self._run, "static"),
                                                  "amd-smi static --json"))
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired):
            self._static = {}  # name and limits are nice to have; metrics are what matter
        snap = await self.sample()
        if not snap.devices:
            raise SourceUnavailable(f"amd-smi found no AMD GPU ({'; '.join(snap.errors) or 'no output'}).")

    def _open_lib(self) -> str:
        lib = self._lib_module
        if lib is None:
            try:
                import amdsmi as lib  # pyright: ignore[reportMissingImports]  # optional: ROCm's bindings
            except (ImportError, OSError) as exc:  # OSError: the module loads libamd_smi.so
                return f"the amdsmi Python library is not available ({exc})"
        reader = AmdSmiLibReader(lib)
        try:
            reader.open()
        except SourceUnavailable as exc:
            return str(exc)
        self._lib = reader
        return ""

    def argv(self, command: str) -> list[str]:
        return [self._exe or self.amd_smi, command, "--json"]

    def _run(self, command: str) -> str:
        proc = subprocess.run(self.argv(command), capture_output=True, text=True,  # argv, no shell
                              timeout=self.timeout_s, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"amd-smi {command} exited with status {proc.returncode}: {tail[0][:200]}")
        return proc.stdout

    async def sample(self) -> Snapshot:
        return await asyncio.to_thread(self.sample_blocking)

    async def close(self) -> None:
        reader, self._lib = self._lib, None
        if reader is not None:
            await asyncio.to_thread(reader.close)

    def sample_blocking(self) -> Snapshot:
        now = time.time()
        host = self._host.read() if self._host is not None else None
        if self._lib is not None:
            return Snapshot(timestamp=now, source="amd", source_kind="live",
                            devices=self._lib.read(now), host=host, errors=tuple(self._lib.errors))
        errors: list[str] = []
        try:
            entries = parse_json(self._run("metric"), "amd-smi metric --json")
        except subprocess.TimeoutExpired:
            entries, errors = None, [f"amd-smi did not answer within {self.timeout_s:g} s"]
        except (OSError, RuntimeError, ValueError) as exc:
            entries, errors = None, [str(exc)]
        if entries is None:
            devices = tuple(DeviceSnapshot(index=d.index, name=d.name, uuid=d.uuid, vendor="amd",
                                           timestamp=now, state="unavailable", error=errors[0])
                            for d in self._last)
            return Snapshot(timestamp=now, source="amd", source_kind="live", devices=devices,
                            host=host, errors=tuple(errors))
        try:
            procs = processes_by_gpu(parse_json(self._run("process"), "amd-smi process --json"))
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired):
            procs = {}  # needs root on some systems; metrics stand without it
        devices = tuple(metric_to_device(e, i, now, self._static.get(gpu_index(e, i)),
                                         procs.get(gpu_index(e, i), ()))
                        for i, e in enumerate(entries))
        self._last = devices
        return Snapshot(timestamp=now, source="amd", source_kind="live", devices=devices,
                        host=host, errors=tuple(errors))
