"""AWS Trainium / Inferentia through the ``neuron-monitor`` JSON stream.

``neuron-monitor`` (aws-neuron-tools) prints one complete JSON document per update on stdout
(aws-neuron-sdk ``tools/neuron-sys-tools/neuron-monitor-user-guide.rst``). This source runs it once as a long-lived
subprocess (argv list, no shell; ``-c CONFIG`` optional), reads documents on a daemon thread and keeps
only the latest; ``sample()`` maps that document, so a tick never waits for the monitor's period.

Mapping per Neuron device (there is no per-device utilization field):
* utilization = sum of ``neuroncores_in_use[core].neuroncore_utilization`` over the device's cores
  (core // ``neuroncore_per_device_count``) divided by the cores per device (idle cores are absent);
* memory used = the runtimes' ``usage_breakdown.neuroncore_memory_usage`` of the device's cores;
  total = ``neuron_device_memory_size``;
* processes = the runtimes (pid, memory they hold on that device), user/command via psutil;
* ECC = ``neuron_hw_counters`` mem + sram corrected / uncorrected;
* per-core utilization goes to ``extra`` as ``nc<N>_util_pct``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, HostSnapshot, ProcessInfo, Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.host import ProcessResolver

_DEVICE_NAMES = {
    "inferentia": "AWS Inferentia",
    "inferentia2": "AWS Inferentia2",
    "trainium": "AWS Trainium",
    "trainium1": "AWS Trainium",
    "trainium2": "AWS Trainium2",
}
_NOT_FROM_NEURON = frozenset({
    "sm_active_pct", "tensor_active_pct", "dram_active_pct", "power_w", "temp_c", "sm_clock_mhz",
})


def _f(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def device_name(kind: str | None) -> str:
    if not kind:
        return "AWS Neuron device"
    return _DEVICE_NAMES.get(kind.lower(), f"AWS {kind}")


class _Usage:
    """What the runtimes of one document use: utilisation per core, memory and processes per device."""

    def __init__(self, n_dev: int, per_dev: int) -> None:
        self.per_dev = per_dev
        self.core_util: dict[int, float] = {}
        self.mem_used = [0] * n_dev
        self.mem_seen = [False] * n_dev
        self.procs: list[list[ProcessInfo]] = [[] for _ in range(n_dev)]

    def add_runtime(self, rt: dict[str, Any], resolver: ProcessResolver | None, problems: list[str]) -> None:
        """One ``neuron_runtime_data`` entry: its cores' utilisation, its memory per device (spread
        over its devices when there is no per-core breakdown) and its process on each device."""
        pid = int(rt.get("pid") or 0)
        tag = rt.get("neuron_runtime_tag") or str(pid)
        if rt.get("error"):
            problems.append(f"runtime {tag}: {rt['error']}")
        report = rt.get("report") or {}
        counters = report.get("neuroncore_counters") or {}
        if counters.get("error"):
            problems.append(f"runtime {tag}: neuroncore_counters: {counters['error']}")
        rt_devs: set[int] = set()
        for core, v in (counters.get("neuroncores_in_use") or {}).items():
            try:
                c = int(core)
            except ValueError:
                continue
            u = _f((v or {}).get("neuroncore_utilization"))
            if u is not None:
                self.core_util[c] = self.core_util.get(c, 0.0) + u
            rt_devs.add(c // self.per_dev)
        used = ((report.get("memory_used") or {}).get("neuron_runtime_used_bytes") or {})
        breakdown = ((used.get("usage_breakdown") or {}).get("neuroncore_memory_usage") or {})
        rt_mem: dict[int, int] = {}
        for core, parts in breakdown.items():
            try:
                d = int(core) // self.per_dev
            except ValueError:
                continue
            rt_mem[d] = rt_mem.get(d, 0) + int(sum(v for v in (parts or {}).values() if isinstance(v, (int, float))))
        if not rt_mem and rt_devs and used.get("neuron_device"):
            # no per-core breakdown: spread the runtime's device total over the devices it runs on
            share = int(used["neuron_device"]) // len(rt_devs)
            rt_mem = dict.fromkeys(rt_devs, share)
        user, command = resolver.lookup(pid) if resolver and pid else (None, None)
        if command is None and tag != str(pid):
            command = tag
        for d in sorted(set(rt_mem) | rt_devs):
            if 0 <= d < len(self.procs):
                if d in rt_mem:
                    self.mem_used[d] += rt_mem[d]
                    self.mem_seen[d] = True
                self.procs[d].append(ProcessInfo(pid=pid, device_index=d, used_gpu_bytes=rt_mem.get(d),
                                                 user=user, command=command))


def _ecc(doc: dict[str, Any]) -> dict[int, tuple[int, int]]:
    """(corrected, uncorrected) ECC errors per device index, memory and SRAM together."""
    ecc: dict[int, tuple[int, int]] = {}
    hwc = ((doc.get("system_data") or {}).get("neuron_hw_counters") or {})
    for entry in hwc.get("neuron_devices") or ():
        idx = int(entry.get("neuron_device_index", -1))
        corr = int(entry.get("mem_ecc_corrected") or 0) + int(entry.get("sram_ecc_corrected") or 0)
        unc = int(entry.get("mem_ecc_uncorrected") or 0) + int(entry.get("sram_ecc_uncorrected") or 0)
        ecc[idx] = (corr, unc)
    return ecc


# One host's report: a trn2.48xlarge has 16 devices of 8 NeuronCores; these leave room for any
# future instance while keeping a hostile count from building millions of devices.
MAX_DEVICES = 1024
MAX_CORES_PER_DEVICE = 64


def map_document(
    doc: dict[str, Any], *, timestamp: float, resolver: ProcessResolver | None = None, age_s: float | None = None
) -> tuple[tuple[DeviceSnapshot, ...], HostSnapshot | None, list[str]]:
    """One neuron-monitor document -> (devices, host, problems)."""
    problems: list[str] = []
    hw = doc.get("neuron_hardware_info") or {}
    if hw.get("error"):
        problems.append(f"neuron_hardware_info: {hw['error']}")
    n_dev = int(hw.get("neuron_device_count") or 0)
    per_dev = max(1, int(hw.get("neuroncore_per_device_count") or 1))
    if not 0 <= n_dev <= MAX_DEVICES or per_dev > MAX_CORES_PER_DEVICE:  # one host's report
        raise ValueError(f"neuron_device_count {n_dev} or neuroncore_per_device_count {per_dev} is "
                         f"beyond one host (at most {MAX_DEVICES} devices of {MAX_CORES_PER_DEVICE} cores)")
    mem_size = hw.get("neuron_device_memory_size")
    name = device_name(hw.get("neuron_device_type"))

    usage = _Usage(n_dev, per_dev)
    for rt in doc.get("neuron_runtime_data") or ():
        usage.add_runtime(rt, resolver, problems)
    core_util, mem_used, mem_seen, procs = usage.core_util, usage.mem_used, usage.mem_seen, usage.procs
    ecc = _ecc(doc)

    devices = []
    for d in range(n_dev):
        cores = range(d * per_dev, (d + 1) * per_dev)
        util = sum(core_util.get(c, 0.0) for c in cores) / per_dev
        extra = tuple((f"nc{c}_util_pct", core_util.get(c, 0.0)) for c in cores)
        corr, unc = ecc.get(d, (None, None))
        devices.append(
            DeviceSnapshot(
                index=d,
                name=name,
                vendor="aws",
                timestamp=timestamp,
                gpu_util_pct=round(min(100.0, util), 3),
                # no runtime on this device => nothing of ours allocated there
                mem_used_bytes=mem_used[d] if mem_seen[d] or mem_size else None,
                mem_total_bytes=int(mem_size) if mem_size else None,
                ecc_corrected=corr,
                ecc_uncorrected=unc,
                gpm_supported=False,
                unsupported=_NOT_FROM_NEURON,
                processes=tuple(procs[d]),
                extra=extra,
                age_s=age_s,
            )
        )
    return tuple(devices), _host(doc), problems


def _host(doc: dict[str, Any]) -> HostSnapshot | None:
    system = doc.get("system_data") or {}
    vcpu = system.get("vcpu_usage") or {}
    mem = system.get("memory_info") or {}
    if not vcpu and not mem:
        return None

    def busy(u: dict[str, Any]) -> float:
        idle = _f(u.get("idle"))
        return round(100.0 - idle, 2) if idle is not None else 0.0

    per_core = tuple(busy(v) for _, v in sorted((vcpu.get("usage_data") or {}).items(),
                                                key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0))
    avg = vcpu.get("average_usage")
    try:
        load = os.getloadavg()
    except (OSError, AttributeError):
        load = None
    return HostSnapshot(
        cpu_pct=busy(avg) if avg else None,
        cpu_per_core_pct=per_core,
        mem_used_bytes=int(mem["memory_used_bytes"]) if mem.get("memory_used_bytes") is not None else None,
        mem_total_bytes=int(mem["memory_total_bytes"]) if mem.get("memory_total_bytes") is not None else None,
        load_avg=load if load else None,
    )


class NeuronSource(Source):
    name = "neuron"
    kind = "live"

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        config: str | None = None,
        first_report_timeout_s: float = 3.0,
        require_devices: bool = False,
        **_ignored: Any,
    ) -> None:
        self._own_config: str | None = None
        # Without -c, neuron-monitor reports every 5 s; a live view wants 1 s, so unless the user
        # gives a config, open() writes the user guide's example config (period 1 s) to a temp file.
        self._default_config = command is None and config is None
        if command is None:
            command = ["neuron-monitor", *(["-c", config] if config else [])]
        self.command = list(command)
        self.first_report_timeout_s = first_report_timeout_s
        self.require_devices = require_devices
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._err_reader: threading.Thread | None = None
        self._latest: tuple[float, dict[str, Any]] | None = None
        self._have_doc = threading.Event()
        self._bad_lines = 0
        self._stderr: deque[str] = deque(maxlen=5)
        self._resolver = ProcessResolver()

    async def open(self) -> None:
        if self._proc is not None:
            return
        exe = shutil.which(self.command[0])
        if exe is None:
            raise SourceUnavailable(
                f"{self.command[0]} not found on PATH: is the AWS Neuron tools package "
                "(aws-neuronx-tools) installed?"
            )
        args = list(self.command[1:])
        if self._default_config:
            self._own_config = _write_default_config()
            args = ["-c", self._own_config]
        try:
            self._proc = subprocess.Popen(  # argv list, no shell
                [exe, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as exc:
            self._remove_config()
            raise SourceUnavailable(f"could not start {self.command[0]}: {exc}") from exc
        self._reader = threading.Thread(target=self._read_stdout, name="neuron-monitor", daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_stderr, name="neuron-monitor-err", daemon=True)
        self._err_reader.start()
        if self.first_report_timeout_s > 0:
            got = await asyncio.to_thread(self._have_doc.wait, self.first_report_timeout_s)
            if self.require_devices:
                snap = await asyncio.to_thread(self.sample_blocking) if got else None
                if snap is None or not snap.devices:
                    await self.close()
                    why = (
                        f"no report within {self.first_report_timeout_s:g} s" if snap is None
                        else "it reports no Neuron device"
                    )
                    raise SourceUnavailable(f"neuron-monitor runs but {why}.")

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                self._bad_lines += 1
                continue
            if isinstance(doc, dict):
                self._latest = (time.time(), doc)  # one reference swap: atomic for readers
                self._have_doc.set()

    def _read_stderr(self) -> None:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return
        for line in proc.stderr:
            if line.strip():
                self._stderr.append(line.strip())

    async def sample(self) -> Snapshot:
        if self._proc is None:
            await self.open()
        return await asyncio.to_thread(self.sample_blocking)

    def sample_blocking(self) -> Snapshot:
        now = time.time()
        errors: list[str] = []
        message = None
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            tail = self._stderr[-1] if self._stderr else "no message"
            errors.append(f"neuron-monitor stopped (exit status {proc.returncode}): {tail}")
        if self._bad_lines:
            errors.append(f"neuron-monitor printed {self._bad_lines} line(s) that are not JSON")
        latest = self._latest
        if latest is None:
            message = "waiting for neuron-monitor's first report"
            return Snapshot(timestamp=now, source="neuron", source_kind="live", message=message, errors=tuple(errors))
        received, doc = latest
        try:
            devices, host, problems = map_document(doc, timestamp=received, resolver=self._resolver,
                                                   age_s=round(now - received, 3))
        except (AttributeError, TypeError, ValueError) as exc:  # a report not in neuron-monitor's shape
            errors.append(f"neuron-monitor's report is not in the shape it documents ({exc}); "
                          "its readings are left out")
            return Snapshot(timestamp=now, source="neuron", source_kind="live", message=message,
                            errors=tuple(errors))
        errors.extend(problems)
        if not devices:
            message = "neuron-monitor reports no Neuron device"
        return Snapshot(
            timestamp=now, source="neuron", source_kind="live", devices=devices, host=host,
            message=message, errors=tuple(errors),
        )

    def _remove_config(self) -> None:
        if self._own_config:
            try:
                os.unlink(self._own_config)
            except OSError:
                pass
            self._own_config = None

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._remove_config()
        readers = [t for t in (self._reader, self._err_reader) if t is not None]
        self._reader = self._err_reader = None
        await asyncio.to_thread(_stop, proc, readers)


DEFAULT_CONFIG = {
    "period": "1s",
    "neuron_runtimes": [{
        "tag_filter": ".*",
        "metrics": [
            {"type": "neuroncore_counters"},
            {"type": "memory_used"},
            {"type": "neuron_runtime_vcpu_usage"},
            {"type": "execution_stats"},
        ],
    }],
    "system_metrics": [
        {"type": "vcpu_usage"},
        {"type": "memory_info"},
        {"period": "2s", "type": "neuron_hw_counters"},
    ],
}


def _write_default_config() -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="fleet-tui-neuron-monitor-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(DEFAULT_CONFIG, fh)
    return path


def _stop(proc: subprocess.Popen[str], readers: list[threading.Thread]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=2)
    for t in readers:  # they end at EOF once the process is gone
        t.join(timeout=2)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def probing_source(**opts: Any) -> NeuronSource:
    """What ``auto`` tries: it waits longer for the first report (neuron-monitor starts slowly) and
    counts "no devices in the report" as unavailable, so auto moves on."""
    return NeuronSource(**{"first_report_timeout_s": 6.0, **opts, "require_devices": True})
