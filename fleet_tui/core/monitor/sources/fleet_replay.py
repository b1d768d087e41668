"""``fleet-replay:demo`` (or ``fleet-replay:PATH``): a recorded fleet to try the fleet panes, the
Jobs pane, ``jobs``, ``plan`` and ``queue`` without a DCGM fleet. Everything it serves is labelled
REPLAY (the source name, every snapshot's message).

The recording (``fleet_tui/demo/fleet_demo.json``, written by ``scripts/make_fleet_demo.py``) is a
two-week schedule of GPU jobs on 32 nodes × 8 H200 GPUs — user, account, partition, submit, start,
end, time limit, the GPUs (node:index) and the workload phase each job runs — and the GPUs'
dcgm-exporter identity. The readings are frames of the bundled real H200 trace: a GPU running a
job plays the trace's frames labelled with the job's phase, a GPU without a job the ``idle``
frames, each GPU from its own offset. Playback stands at the end of the two weeks: the jobs running
then are live, their GPUs' frames advance with the clock (``speed`` × real time).

It answers what the fleet views ask a Prometheus source for, from the recording:

- ``query_instant`` of the job-label query: dcgm-exporter's ``hpc_job``/``hpc_user`` labels with
  ``Hostname``, ``gpu``, ``UUID``, ``device`` for every GPU running a job now;
- ``query_range`` of the plan's hourly demand query: the GPUs busy in each hour of the schedule.

``job_list_path`` is the recording's jobs as a CSV job list for ``queue simulate`` and the Queue
pane (written next to nothing: a temporary file made once per source).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.trace import DEMO_TRACE, iter_trace

DEMO_FLEET = DEMO_TRACE.parent / "fleet_demo.json"
FRAME_PERIOD_S = 0.2  # the H200 trace's sampling period
MAX_RECORDING_BYTES = 8 * 2**20
MAX_JOBS = 100_000
REPLAY_NOTE = ("REPLAY: the bundled fleet recording (32 nodes × 8 H200, a two-week job schedule, "
               "readings from the real H200 trace), not a live fleet")


def open_fleet_recording(path: str = "demo", speed: float = 1.0, **opts: Any) -> "FleetReplaySource":
    p = DEMO_FLEET if path == "demo" else Path(path).expanduser()
    if not p.is_file():
        raise SourceUnavailable(f"fleet recording {str(p)!r} does not exist or is not a file "
                                "(use fleet-replay:demo for the bundled one).")
    return FleetReplaySource(p, speed, label="demo" if path == "demo" else p.name, **opts)


@dataclasses.dataclass(frozen=True, slots=True)
class RecordedJob:
    job: str
    user: str
    account: str
    partition: str
    name: str
    submit_h: float
    start_h: float
    end_h: float
    limit_h: float
    phase: str
    gpus: tuple[tuple[str, int], ...]


def load_recording(path: Path) -> dict[str, Any]:
    """The recording, checked: errors name the file and the field."""
    if path.stat().st_size > MAX_RECORDING_BYTES:
        raise SourceUnavailable(f"{path}: larger than {MAX_RECORDING_BYTES // 2**20} MiB")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        nodes = [str(n) for n in doc["nodes"]]
        per_node = int(doc["gpus_per_node"])
        hours = float(doc["hours"])
        jobs = []
        for j in doc["jobs"][:MAX_JOBS]:
            gpus = []
            for slot in j["gpus"]:
                node, _, idx = str(slot).rpartition(":")
                gpus.append((node, int(idx)))
            jobs.append(RecordedJob(str(j["job"]), str(j["user"]), str(j.get("account", "")),
                                    str(j.get("partition", "")), str(j.get("name", "")),
                                    float(j["submit_h"]), float(j["start_h"]), float(j["end_h"]),
                                    float(j.get("limit_h", 0.0)), str(j.get("phase", "idle")),
                                    tuple(gpus)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SourceUnavailable(f"{path}: not a fleet recording ({exc})") from None
    if not nodes or not 1 <= per_node <= 64 or not 0 < hours <= 24 * 366:
        raise SourceUnavailable(f"{path}: nodes, gpus_per_node (1-64) and hours (up to a year) "
                                "must be given")
    return {"nodes": nodes, "gpus_per_node": per_node, "hours": hours, "jobs": jobs,
            "model": str(doc.get("model", "GPU"))}


class FleetReplaySource(Source):
    kind = "fleet"

    def __init__(self, path: Path, speed: float = 1.0, *, label: str = "demo",
                 clock: Callable[[], float] = time.time, **_ignored: Any) -> None:
        self.path = path
        self.speed = float(speed)
        self.name = f"fleet-replay:{label} (REPLAY)"
        self.spec = f"fleet-replay:{label}"
        self._clock = clock
        rec = load_recording(path)
        self.nodes: list[str] = rec["nodes"]
        self.gpus_per_node: int = rec["gpus_per_node"]
        self.hours: float = rec["hours"]
        self.jobs: list[RecordedJob] = rec["jobs"]
        self.model: str = rec["model"]
        self._runs: dict[str, list[DeviceSnapshot]] = {}
        self._t0 = clock()
        self._job_list: Path | None = None

    # ----- the recording at a moment --------------------------------------------------------
    def _hour_of(self, wall: float) -> float:
        """Recording hour of a wall-clock time: now is the end of the schedule."""
        return self.hours - (self._clock() - wall) / 3600.0

    def running_at(self, hour: float) -> dict[tuple[str, int], RecordedJob]:
        out = {}
        for j in self.jobs:
            if j.start_h <= hour < j.end_h:
                for slot in j.gpus:
                    out[slot] = j
        return out

    def _frames(self) -> dict[str, list[DeviceSnapshot]]:
        if not self._runs:
            for snap in iter_trace(DEMO_TRACE):
                d = snap.devices[0]
                self._runs.setdefault(d.phase or "", []).append(d)
        return self._runs

    # ----- Source ---------------------------------------------------------------------------
    async def sample(self) -> Snapshot:
        now = self._clock()
        frames = self._frames()
        idle = frames.get("idle") or next(iter(frames.values()))
        step = int((now - self._t0) * self.speed / FRAME_PERIOD_S)
        running = self.running_at(self.hours)
        devices = []
        for n, node in enumerate(self.nodes):
            for i in range(self.gpus_per_node):
                job = running.get((node, i))
                run = frames.get(job.phase, idle) if job is not None else idle
                frame = run[(step + 7 * n + 3 * i) % len(run)]
                devices.append(dataclasses.replace(
                    frame, index=i, node=node, name=self.model, timestamp=now,
                    uuid=f"GPU-{node}-{i}", phase=None))
        return Snapshot(timestamp=now, source=self.name, source_kind="fleet",
                        devices=tuple(devices), message=REPLAY_NOTE)

    # ----- what a Prometheus source answers --------------------------------------------------
    def query_instant(self, query: str) -> list[dict[str, Any]]:
        if "hpc_job" not in query:
            return []
        now = self._clock()
        return [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node, "gpu": str(i),
                            "UUID": f"GPU-{node}-{i}", "device": f"nvidia{i}",
                            "modelName": self.model, "hpc_job": j.job, "hpc_user": j.user},
                 "value": [now, "1"]}
                for (node, i), j in sorted(self.running_at(self.hours).items())]

    def query_range(self, query: str, start: float, end: float, step_s: float,
                    deadline: Any = None) -> list[dict[str, Any]]:
        """The plan's demand query: GPUs busy (running a job whose phase is not idle) per step."""
        if not query.startswith("count(") or step_s <= 0:
            return []
        values = []
        t = start
        for _ in range(11_000):
            if t > end:
                break
            hour = self._hour_of(t)
            if 0 <= hour <= self.hours:
                busy = sum(len(j.gpus) for j in self.jobs
                           if j.phase != "idle" and j.start_h < hour and j.end_h > hour - 1)
                values.append([t, str(min(busy, len(self.nodes) * self.gpus_per_node))])
            t += step_s
        return [{"metric": {}, "values": values}] if values else []

    def slurm_jobs(self) -> list[Any]:
        """The jobs running at the end of the schedule as Slurm would list them (user, account,
        partition, nodes, GPU indices, start and limit on the wall clock): what ``jobs`` and the
        Jobs pane attribute the replay's GPUs with in place of a head node's squeue."""
        from fleet_tui.core.cluster.slurm import SlurmJob

        now = self._clock()
        out = []
        for j in {id(j): j for j in self.running_at(self.hours).values()}.values():
            by_node: dict[str, list[int]] = {}
            for node, i in j.gpus:
                by_node.setdefault(node, []).append(i)
            out.append(SlurmJob(
                job=j.job, job_raw=j.job, user=j.user, account=j.account, state="RUNNING",
                nodes=tuple(by_node), gpus=len(j.gpus),
                gpu_indices={n: tuple(sorted(v)) for n, v in by_node.items()},
                submit_s=now - (self.hours - j.submit_h) * 3600.0,
                start_s=now - (self.hours - j.start_h) * 3600.0,
                time_limit_s=j.limit_h * 3600.0, partition=j.partition, name=j.name))
        return sorted(out, key=lambda sj: sj.job)

    @property
    def job_list_path(self) -> Path:
        """The recording's jobs as a ``queue simulate`` CSV (made once, in a temporary file)."""
        if self._job_list is None:
            fd, name = tempfile.mkstemp(prefix="fleet-replay-jobs-", suffix=".csv")
            with open(fd, "w", newline="", encoding="utf-8") as fh:
                write_job_list(self.jobs, fh)
            self._job_list = Path(name)
        return self._job_list


def write_job_list(jobs: Sequence[RecordedJob], fh: Any) -> None:
    w = csv.writer(fh)
    w.writerow(["job", "user", "submit_s", "run_s", "gpus", "requested_s"])
    for j in jobs:
        w.writerow([j.job, j.user, round(j.submit_h * 3600), round((j.end_h - j.start_h) * 3600),
                    len(j.gpus), round(max(j.limit_h, j.end_h - j.start_h) * 3600)])

