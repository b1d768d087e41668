"""A stand-in fleet for the Prometheus tests: local HTTP servers that speak dcgm-exporter's text format.

Each simulated node is one ``ThreadingHTTPServer`` on 127.0.0.1 (its own port, so Prometheus scrapes
it as its own target) serving ``/metrics`` for its GPUs. A GPU replays a run of frames from the real
H200 trace (``fleet_tui/demo/h200_trace_labelled.jsonl``, read with ``iter_trace``) at the trace's
own 0.2 s pace, starting at a per-node offset so that nodes differ. Every answer is logged with the
frames it contained, so a test can tell exactly which reading a Prometheus sample came from.

The rendering follows dcgm-exporter's label template and units (its ``render_metrics.go`` and
``etc/default-counters.csv``):
``FIELD{gpu,UUID,pci_bus_id,device,modelName,Hostname|hostname,DCGM_FI_DRIVER_VERSION}``, memory in
MiB as integers, utilization as integer percent, DCP profiling metrics as 0-1 ratios, power in W.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.monitor.trace import DEMO_TRACE, iter_trace

MIB = 1024 * 1024
BLANK = "9223372036854775794"  # a DCGM int64 blank sentinel, as in dcgm-exporter's README
FRAME_PERIOD_S = 0.2  # the trace's sampling period


def load_frames() -> list[DeviceSnapshot]:
    return [snap.devices[0] for snap in iter_trace(DEMO_TRACE)]


def phase_runs(frames: list[DeviceSnapshot], *, trim: float = 0.25) -> dict[str, list[DeviceSnapshot]]:
    """Steady-state frames of each labelled phase (edges trimmed, where phases change)."""
    runs: dict[str, list[DeviceSnapshot]] = {}
    for f in frames:
        runs.setdefault(f.phase or "", []).append(f)
    out = {}
    for phase, run in runs.items():
        cut = int(len(run) * trim)
        out[phase] = run[cut: len(run) - cut] or run
    return out


def _fmt(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def dcgm_values(d: DeviceSnapshot) -> dict[str, str]:
    """The DCGM field values dcgm-exporter would print for this NVML reading."""
    total_mib = (d.mem_total_bytes or 0) // MIB
    used_mib = (d.mem_used_bytes or 0) // MIB
    vals: dict[str, float | str | None] = {
        "DCGM_FI_DEV_GPU_UTIL": None if d.gpu_util_pct is None else int(d.gpu_util_pct),
        "DCGM_FI_DEV_MEM_COPY_UTIL": None if d.mem_util_pct is None else int(d.mem_util_pct),
        "DCGM_FI_DEV_FB_USED": used_mib,
        "DCGM_FI_DEV_FB_FREE": total_mib - used_mib,
        "DCGM_FI_DEV_FB_RESERVED": 0,
        "DCGM_FI_DEV_GPU_TEMP": d.temp_c,
        "DCGM_FI_DEV_MEMORY_TEMP": BLANK,  # unsupported field: the blank sentinel
        "DCGM_FI_DEV_SLOWDOWN_TEMP": d.slowdown_temp_c,
        "DCGM_FI_DEV_POWER_USAGE": d.power_w,
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": d.power_limit_w,
        "DCGM_FI_DEV_SM_CLOCK": d.sm_clock_mhz,
        "DCGM_FI_DEV_MAX_SM_CLOCK": d.sm_clock_max_mhz,
        "DCGM_FI_DEV_MEM_CLOCK": d.mem_clock_mhz,
        "DCGM_FI_DEV_MAX_MEM_CLOCK": d.mem_clock_max_mhz,
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": d.clock_event_reasons,
        "DCGM_FI_DEV_PSTATE": d.pstate,
        "DCGM_FI_DEV_XID_ERRORS": 0,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
        "DCGM_FI_PROF_PCIE_TX_BYTES": d.pcie_tx_bytes_s,
        "DCGM_FI_PROF_PCIE_RX_BYTES": d.pcie_rx_bytes_s,
        "DCGM_FI_PROF_NVLINK_TX_BYTES": d.nvlink_tx_bytes_s,
        "DCGM_FI_PROF_NVLINK_RX_BYTES": d.nvlink_rx_bytes_s,
    }
    for name, pct in (("DCGM_FI_PROF_SM_ACTIVE", d.sm_active_pct),
                      ("DCGM_FI_PROF_SM_OCCUPANCY", d.sm_occupancy_pct),
                      ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", d.tensor_active_pct),
                      ("DCGM_FI_PROF_DRAM_ACTIVE", d.dram_active_pct),
                      ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", d.fp32_active_pct),
                      ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", d.fp16_active_pct)):
        vals[name] = None if pct is None else pct / 100.0
    return {k: (v if isinstance(v, str) else _fmt(v)) for k, v in vals.items() if v is not None}


def expected_device(d: DeviceSnapshot, *, node: str, index: int, uuid: str) -> DeviceSnapshot:
    """What a reader of the DCGM values above should reconstruct (MiB and integer % rounding)."""
    total_mib = (d.mem_total_bytes or 0) // MIB
    used_mib = (d.mem_used_bytes or 0) // MIB
    return replace(
        d, node=node, index=index, uuid=uuid,
        gpu_util_pct=None if d.gpu_util_pct is None else float(int(d.gpu_util_pct)),
        mem_util_pct=None if d.mem_util_pct is None else float(int(d.mem_util_pct)),
        mem_used_bytes=used_mib * MIB, mem_total_bytes=total_mib * MIB,
    )


COMPARED_FIELDS = (
    "gpu_util_pct", "mem_util_pct", "mem_used_bytes", "mem_total_bytes", "temp_c", "power_w",
    "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "clock_event_reasons",
    "pstate", "pcie_tx_bytes_s", "pcie_rx_bytes_s", "sm_active_pct", "sm_occupancy_pct",
    "tensor_active_pct", "dram_active_pct", "fp32_active_pct", "fp16_active_pct",
)


@dataclass
class NodeSpec:
    hostname: str
    gpus: list[list[DeviceSnapshot]]  # per GPU: the frames it cycles through
    offsets: list[int]  # per GPU: first frame
    label_style: str = "Hostname"  # Hostname | hostname | uuid-old (lower-case uuid) | none
    alive: bool = True
    served: deque = field(default_factory=lambda: deque(maxlen=400))  # (time, (frame, ...))

    def uuid(self, gpu: int) -> str:
        n = int("".join(ch for ch in self.hostname if ch.isdigit()) or 0)
        return f"GPU-{n:08x}-0000-4000-8000-{gpu:012x}"

    def frames_at(self, now: float, t0: float) -> tuple[DeviceSnapshot, ...]:
        step = int((now - t0) / FRAME_PERIOD_S)
        return tuple(run[(off + step) % len(run)] for run, off in zip(self.gpus, self.offsets))

    def render(self, frames: tuple[DeviceSnapshot, ...]) -> str:
        per_metric: dict[str, list[str]] = {}
        for gpu, frame in enumerate(frames):
            labels = [f'gpu="{gpu}"']
            uuid_key = "uuid" if self.label_style == "uuid-old" else "UUID"
            labels.append(f'{uuid_key}="{self.uuid(gpu)}"')
            labels += [f'pci_bus_id="00000000:{0x18 + gpu:02X}:00.0"', f'device="nvidia{gpu}"',
                       f'modelName="{frame.name}"']
            if self.label_style in ("Hostname", "uuid-old"):
                labels.append(f'Hostname="{self.hostname}"')
            elif self.label_style == "hostname":
                labels.append(f'hostname="{self.hostname}"')
            labels.append('DCGM_FI_DRIVER_VERSION="580.159.04"')
            label_text = ",".join(labels)
            values = dcgm_values(frame)
            if self.label_style == "uuid-old":  # an old exporter: blank and NaN fields too
                values["DCGM_FI_DEV_SLOWDOWN_TEMP"] = BLANK
                values["DCGM_FI_DEV_PSTATE"] = "NaN"
            for name, value in values.items():
                per_metric.setdefault(name, []).append(f"{name}{{{label_text}}} {value}")
        out = []
        for name, lines in per_metric.items():
            out.append(f"# HELP {name} {name}")
            out.append(f"# TYPE {name} gauge")
            out.extend(lines)
        return "\n".join(out) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: "_NodeServer"

    def do_GET(self):  # noqa: N802 - http.server API
        node = self.server.node
        if self.path.split("?")[0] != "/metrics" or not node.alive:
            self.send_error(404 if node.alive else 503)
            return
        now = time.time()
        frames = node.frames_at(now, self.server.t0)
        body = node.render(frames).encode()
        node.served.append((now, frames))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


class _NodeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, node: NodeSpec, t0: float):
        self.node, self.t0 = node, t0
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request, client_address):
        # Prometheus gives up on a scrape at its timeout and closes the socket; on a loaded machine
        # that happens mid-write. The default handler prints the traceback to sys.stderr, which a
        # test capturing stderr (capsys) then reads as the command's own output.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class ReplayFleet:
    """N nodes × G GPUs, each node its own DCGM-format exporter on a 127.0.0.1 port."""

    def __init__(self, nodes: list[NodeSpec]):
        self.nodes = nodes
        self.t0 = time.time()
        self.servers: list[_NodeServer | None] = []
        self.threads: list[threading.Thread] = []
        for node in nodes:
            srv = _NodeServer(node, self.t0)
            thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                                      daemon=True, name=f"dcgm-{node.hostname}")
            thread.start()
            self.servers.append(srv)
            self.threads.append(thread)
        self.ports = [srv.server_address[1] for srv in self.servers if srv]

    @property
    def targets(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.ports]

    def node_names(self) -> dict[str, int]:
        """The node name a reader should show for each node (the scrape target when the exporter
        runs with --no-hostname) -> node index."""
        return {(n.hostname if n.label_style != "none" else self.targets[i]): i
                for i, n in enumerate(self.nodes)}

    def kill(self, i: int) -> None:
        """The node's exporter dies: its port stops answering."""
        srv = self.servers[i]
        if srv is not None:
            srv.shutdown()
            srv.server_close()
            self.servers[i] = None

    def close(self) -> None:
        for i in range(len(self.servers)):
            self.kill(i)

    def __enter__(self) -> "ReplayFleet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def node(self, hostname: str) -> NodeSpec:
        return next(n for n in self.nodes if n.hostname == hostname)

    def frames_served_at(self, node_index: int, sample_ts: float) -> tuple[DeviceSnapshot, ...] | None:
        """The frames of the answer to the scrape that started at ``sample_ts`` (Prometheus stamps a
        sample with the scrape's start time, just before the exporter answers)."""
        best = None
        for served_at, frames in list(self.nodes[node_index].served):
            if served_at >= sample_ts - 0.005 and (best is None or served_at < best[0]):
                best = (served_at, frames)
        if best is None or best[0] - sample_ts > 0.9:
            return None
        return best[1]


def make_nodes(n_nodes: int, gpus_per_node: int, *, phases: list[str] | None = None,
               frames: list[DeviceSnapshot] | None = None) -> list[NodeSpec]:
    """Node i replays phase ``phases[i % len]`` at offset 3*i (+5 per GPU); label styles rotate so
    every dcgm-exporter variant (Hostname, hostname, old lower-case uuid) is scraped."""
    frames = frames or load_frames()
    runs = phase_runs(frames)
    phases = phases or [p for p in runs if not p.startswith("sizing:")]
    styles = ["Hostname", "hostname", "uuid-old", "none"]
    nodes = []
    for i in range(n_nodes):
        run = runs[phases[i % len(phases)]]
        nodes.append(NodeSpec(
            hostname=f"node-{i:02d}",
            gpus=[run] * gpus_per_node,
            offsets=[(3 * i + 5 * g) % len(run) for g in range(gpus_per_node)],
            label_style=styles[i % len(styles)],
        ))
    return nodes
