"""Slurm on a head node: who runs what, where, on which GPUs.

Reads the JSON that Slurm's own commands print, run as argv lists (no shell) with a timeout:

* ``squeue --json`` — pending, running and recently finished jobs (Slurm 21.08+);
* ``scontrol show job --json`` — the same records (Slurm 23.02+; on older Slurm ``squeue`` is used);
* ``sacct --json`` — finished jobs from accounting (needs slurmdbd; with accounting off it fails
  with "Slurm accounting storage is disabled", reported as such).

Two JSON generations are read. Slurm 22.05 (OpenAPI v0.0.38) prints plain numbers, ``job_state``
as a string and ``gres_detail`` as one string per allocated node, e.g. ``"gpu:4(IDX:0-3)"`` or
``"gpu:a100:2(IDX:0,2)"``. Slurm 23.11+ (data_parser v0.0.40+) wraps numbers as
``{"set": true, "infinite": false, "number": N}`` and lists states (``["RUNNING"]``). The node list
is Slurm hostlist syntax (``gpu[01-03,07]``, ``rack[1-2]-n[1-2]``), expanded by
:func:`expand_hostlist`, zero padding kept.

Checked against the real ``slurmctld``/``slurmd`` 22.05.8 from Debian in tests/cluster/.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record

DEFAULT_TIMEOUT_S = 10.0


class SlurmError(UserError):
    """A Slurm command is missing, failed, timed out or printed something unreadable."""


@record
class SlurmJob:
    job: str
    user: str
    state: str  # RUNNING, PENDING, COMPLETED, ...
    nodes: tuple[str, ...] = ()
    gpus: int = 0  # GPUs allocated (or requested, while pending)
    gpu_indices: dict[str, tuple[int, ...]] = field(default_factory=dict)  # node -> GPU indices
    submit_s: float | None = None  # epoch seconds
    start_s: float | None = None
    end_s: float | None = None
    time_limit_s: float | None = None
    priority: float | None = None
    partition: str = ""
    name: str = ""

    def runtime_s(self, now: float) -> float | None:
        if not self.start_s:
            return None
        end = self.end_s if self.end_s and self.state not in ("RUNNING", "SUSPENDED") else now
        return max(0.0, min(end, now) - self.start_s)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "user": self.user, "state": self.state, "nodes": list(self.nodes),
                "gpus": self.gpus, "gpu_indices": {n: list(v) for n, v in self.gpu_indices.items()},
                "submit_s": self.submit_s, "start_s": self.start_s, "end_s": self.end_s,
                "time_limit_s": self.time_limit_s, "priority": self.priority,
                "partition": self.partition, "name": self.name}


# --------------------------------------------------------------------------------------------
# Hostlists and GRES


def _split_top(text: str, open_: str = "[", close: str = "]") -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _ranges(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} in hostlist {whole!r}")
        if not dash:
            out.append(lo)
            continue
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        a, b = int(lo), int(hi)
        if b < a:
            raise ValueError(f"range {item!r} runs backwards in hostlist {whole!r}")
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


def expand_hostlist(text: str | None) -> tuple[str, ...]:
    """``"gpu[01-03,07],login1"`` -> ``("gpu01", "gpu02", "gpu03", "gpu07", "login1")``.
    Several bracket groups in one name give every combination, in Slurm's order."""
    if not text or text in ("(null)", "None"):
        return ()
    hosts: list[str] = []
    for part in _split_top(text):
        names = [""]
        for piece in re.split(r"(\[[^\]]*\])", part):
            if piece.startswith("["):
                if not piece.endswith("]"):
                    raise ValueError(f"unclosed bracket in hostlist {text!r}")
                names = [n + s for n in names for s in _ranges(piece[1:-1], text)]
            elif "[" in piece or "]" in piece:
                raise ValueError(f"unbalanced brackets in hostlist {text!r}")
            else:
                names = [n + piece for n in names]
        hosts.extend(names)
    return tuple(hosts)


_GRES_IDX = re.compile(r"^gpu(?::[^:(]+)?:(\d+)(?:\(IDX:([^)]*)\))?")


def parse_gres_detail(text: str) -> tuple[int, tuple[int, ...]]:
    """``"gpu:a100:2(IDX:0,2)"`` -> ``(2, (0, 2))``; several comma-joined GRES are searched for
    the GPU one; no GPU -> ``(0, ())``."""
    for part in _split_top(text, "(", ")"):
        m = _GRES_IDX.match(part)
        if not m:
            continue
        count = int(m.group(1))
        idx: list[int] = []
        if m.group(2) and m.group(2).upper() != "N/A":
            for item in m.group(2).split(","):
                lo, _, hi = item.partition("-")
                idx.extend(range(int(lo), int(hi or lo) + 1))
        return count, tuple(idx)
    return 0, ()


def slurm_number(v: Any) -> float | None:
    """A number from either Slurm JSON shape: ``60`` or ``{"set": true, "infinite": false, "number": 60}``."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _epoch(v: Any) -> float | None:
    n = slurm_number(v)
    return n if n else None  # Slurm prints 0 for "not yet"


def _state(v: Any) -> str:
    if isinstance(v, list):
        return str(v[0]) if v else ""
    if isinstance(v, dict):  # sacct: {"current": ..., "reason": ...}
        return _state(v.get("current"))
    return str(v or "")


_TRES_GPU = re.compile(r"gres[:/]gpu(?::[^:=,]+)?[:=](\d+)")


def _gpus_in_tres(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    m = _TRES_GPU.search(text)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------------------------
# Records


def job_from_record(rec: dict[str, Any]) -> SlurmJob:
    """One ``jobs[]`` record of squeue/scontrol (either generation) or sacct."""
    nodes_text = rec.get("nodes") or (rec.get("job_resources") or {}).get("nodes") or ""
    if isinstance(nodes_text, dict):  # sacct 23.x: {"list": ...}? keep the plain forms only
        nodes_text = nodes_text.get("list", "") or ""
    nodes = expand_hostlist(str(nodes_text)) if nodes_text else ()
    indices: dict[str, tuple[int, ...]] = {}
    gpus = 0
    detail = rec.get("gres_detail") or []
    for node, gres in zip(nodes, detail):
        count, idx = parse_gres_detail(str(gres))
        gpus += count
        if idx:
            indices[node] = idx
    if not gpus:  # pending or finished: from the TRES strings
        per_node = _gpus_in_tres(rec.get("tres_per_node"))
        alloc = _gpus_in_tres(rec.get("tres_alloc_str")) or _gpus_in_tres(rec.get("tres_req_str"))
        tres = rec.get("tres") if isinstance(rec.get("tres"), dict) else {}
        from_sacct = _sacct_gpus(tres.get("allocated")) or _sacct_gpus(tres.get("requested"))
        node_count = int(slurm_number(rec.get("node_count")) or len(nodes) or 1)
        gpus = alloc or from_sacct or (per_node * node_count if per_node else 0)
    t = rec.get("time") if isinstance(rec.get("time"), dict) else {}  # sacct keeps times here
    limit_min = slurm_number(rec.get("time_limit")) if "time_limit" in rec else slurm_number(t.get("limit"))
    user = rec.get("user_name") or rec.get("user") or ""
    jid = slurm_number(rec.get("job_id"))
    return SlurmJob(
        job=str(int(jid)) if jid is not None else str(rec.get("job_id", "")),
        user=str(user),
        state=_state(rec.get("job_state") if "job_state" in rec else rec.get("state")),
        nodes=nodes, gpus=gpus, gpu_indices=indices,
        submit_s=_epoch(rec.get("submit_time", t.get("submission"))),
        start_s=_epoch(rec.get("start_time", t.get("start"))),
        end_s=_epoch(rec.get("end_time", t.get("end"))),
        time_limit_s=limit_min * 60.0 if limit_min else None,
        priority=slurm_number(rec.get("priority")),
        partition=str(rec.get("partition") or ""),
        name=str(rec.get("name") or ""),
    )


def _sacct_gpus(entries: Any) -> int | None:
    for e in entries or ():
        if isinstance(e, dict) and e.get("type") == "gres" and str(e.get("name", "")).startswith("gpu"):
            n = slurm_number(e.get("count"))
            if n:
                return int(n)
    return None


def parse_jobs_json(text: str, what: str = "squeue --json") -> list[SlurmJob]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        first = text.strip().splitlines()[0][:200] if text.strip() else "no output"
        # e.g. sacct with accounting off prints "Slurm accounting storage is disabled", status 0
        raise SlurmError(f"{what}: {first} (not JSON: line {exc.lineno}: {exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise SlurmError(f"{what}: expected an object with a \"jobs\" list")
    errors = [e for e in doc.get("errors") or () if e]
    if errors and not doc["jobs"]:
        first = errors[0]
        msg = first.get("description") or first.get("error") if isinstance(first, dict) else first
        raise SlurmError(f"{what}: {msg}")
    return [job_from_record(r) for r in doc["jobs"] if isinstance(r, dict)]


# --------------------------------------------------------------------------------------------
# Running the commands


class SlurmReader:
    """Runs Slurm's commands (argv, timeout) and parses their JSON. ``env`` (e.g. ``SLURM_CONF``)
    is passed to the commands."""

    def __init__(self, *, timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
                 bindir: str | None = None):
        self.timeout_s = timeout_s
        self.env = env
        self.bindir = bindir

    def _exe(self, name: str) -> str:
        path = shutil.which(name, path=self.bindir) if self.bindir else shutil.which(name)
        if path is None:
            raise SlurmError(f"{name} not found on PATH: is this a Slurm head node (slurm-client)?")
        return path

    def run(self, argv: Sequence[str]) -> str:
        cmd = [self._exe(argv[0]), *argv[1:]]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s,
                                  env=self.env, check=False)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{' '.join(argv)} did not answer within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise SlurmError(f"{' '.join(argv)}: {exc}") from None
        if proc.returncode != 0 or not proc.stdout.strip():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
            raise SlurmError(f"{' '.join(argv)} failed (status {proc.returncode}): {tail[0][:200]}")
        return proc.stdout

    def squeue(self, *, user: str | None = None) -> list[SlurmJob]:
        argv = ["squeue", "--json"] + (["--user", user] if user else [])
        return parse_jobs_json(self.run(argv), "squeue --json")

    def scontrol(self) -> list[SlurmJob]:
        return parse_jobs_json(self.run(["scontrol", "show", "job", "--json"]),
                               "scontrol show job --json")

    def sacct(self, *, since: str | None = None, user: str | None = None) -> list[SlurmJob]:
        argv = ["sacct", "--json", "--allusers"] + (["--starttime", since] if since else [])
        if user:
            argv[2:3] = ["--user", user]
        return parse_jobs_json(self.run(argv), "sacct --json")

    def jobs(self, *, user: str | None = None) -> list[SlurmJob]:
        """Current jobs: ``scontrol show job --json`` where Slurm has it, else ``squeue --json``."""
        try:
            found = self.scontrol()
        except SlurmError as exc:
            if "not found on PATH" in str(exc):
                raise
            found = self.squeue()
        return [j for j in found if user is None or j.user == user]


def running_on(jobs: Iterable[SlurmJob]) -> list[SlurmJob]:
    return [j for j in jobs if j.state in ("RUNNING", "SUSPENDED", "COMPLETING") and j.nodes]


# states of a job that ended (sacct); a running job's GPUs are seen live instead
FINISHED_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE")


def finished_gpu_jobs(jobs: Iterable[SlurmJob], now: float) -> list[dict[str, Any]]:
    """Jobs that held GPUs and ended (from ``sacct``), latest end first, with their GPU-hours.
    Accounting says what they held, not how well they used it: utilization needs the fleet's
    history (the Prometheus range) for the job's nodes and time."""
    out = []
    for j in jobs:
        if j.gpus <= 0 or not any(j.state.startswith(s) for s in FINISHED_STATES):
            continue
        runtime = j.runtime_s(now) or 0.0
        out.append({"job": j.job, "user": j.user, "state": j.state, "nodes": list(j.nodes),
                    "devices": j.gpus, "start_s": j.start_s, "end_s": j.end_s,
                    "runtime_s": round(runtime, 1), "gpu_hours": round(j.gpus * runtime / 3600, 3),
                    "partition": j.partition, "name": j.name})
    out.sort(key=lambda d: -(d["end_s"] or 0))
    return out
