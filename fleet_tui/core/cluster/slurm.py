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
from dataclasses import field, replace
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record

DEFAULT_TIMEOUT_S = 10.0


class SlurmError(UserError):
    """A Slurm command is missing, failed, timed out or printed something unreadable."""


@record
class SlurmJob:
    job: str  # as squeue/sacct print it: "11" or, for an array task, "11_0"
    user: str
    state: str  # RUNNING, PENDING, COMPLETED, ...
    nodes: tuple[str, ...] = ()  # allocated nodes; empty until the job starts
    gpus: int = 0  # GPUs allocated (allocated TRES/GRES only); while pending, GPUs requested
    gpu_indices: dict[str, tuple[int, ...]] = field(default_factory=dict)  # node -> GPU indices
    submit_s: float | None = None  # epoch seconds
    start_s: float | None = None
    end_s: float | None = None
    time_limit_s: float | None = None
    priority: float | None = None
    partition: str = ""
    name: str = ""
    job_raw: str = ""  # Slurm's own job id (an array task has one too: "17" for "11_0")
    account: str = ""
    reason: str = ""  # why a pending job waits (Resources, Priority, Dependency, JobHeldUser...)
    exit_code: str = ""  # "rc:signal", as sacct prints it
    cpus: int | None = None  # allocated CPUs (requested while pending)
    mem_bytes: int | None = None  # allocated memory, all nodes
    total_cpu_s: float | None = None  # sacct TotalCPU: CPU time of all steps
    max_rss_bytes: int | None = None  # sacct MaxRSS: the largest task's peak RSS

    @property
    def started(self) -> bool:
        """The job was given nodes (a job cancelled while pending never was)."""
        return bool(self.nodes) and self.start_s is not None and self.state != "PENDING"

    @property
    def ids(self) -> tuple[str, ...]:
        """The names a user may give the job by: ``11_0`` and its raw id ``17``."""
        return (self.job,) if not self.job_raw or self.job_raw == self.job else (self.job,
                                                                                self.job_raw)

    def runtime_s(self, now: float) -> float | None:
        if not self.start_s:
            return None
        end = self.end_s if self.end_s and self.state not in ("RUNNING", "SUSPENDED") else now
        return max(0.0, min(end, now) - self.start_s)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "job_raw": self.job_raw or self.job, "user": self.user,
                "account": self.account, "state": self.state, "reason": self.reason,
                "nodes": list(self.nodes), "gpus": self.gpus,
                "gpu_indices": {n: list(v) for n, v in self.gpu_indices.items()},
                "submit_s": self.submit_s, "start_s": self.start_s, "end_s": self.end_s,
                "time_limit_s": self.time_limit_s, "priority": self.priority,
                "partition": self.partition, "name": self.name, "exit_code": self.exit_code,
                "cpus": self.cpus, "mem_bytes": self.mem_bytes, "total_cpu_s": self.total_cpu_s,
                "max_rss_bytes": self.max_rss_bytes}


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
    if not text or text in ("(null)", "None", "None assigned"):  # sacct: never started
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


def _obj(v: object) -> dict[str, Any]:
    """A JSON object, or an empty one where Slurm omits the field or prints another shape."""
    return v if isinstance(v, dict) else {}


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


def _tres_entry(entries: Any, kind: str, name_prefix: str | None = None) -> float | None:
    """A count from sacct's ``tres.allocated``/``tres.requested`` lists."""
    for e in entries or ():
        if not isinstance(e, dict) or e.get("type") != kind:
            continue
        if name_prefix is not None and not str(e.get("name") or "").startswith(name_prefix):
            continue
        n = slurm_number(e.get("count"))
        if n is not None:
            return n
    return None


_TRES_CPU = re.compile(r"(?:^|,)cpu=(\d+)")
_TRES_MEM = re.compile(r"(?:^|,)mem=(\d+(?:\.\d+)?)([KMGTP]?)")
_UNIT = {"": 2**20, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}  # bare = MiB


def _cpu_mem_in_tres(text: Any) -> tuple[int | None, int | None]:
    if not isinstance(text, str):
        return None, None
    cpu = _TRES_CPU.search(text)
    mem = _TRES_MEM.search(text)
    return (int(cpu.group(1)) if cpu else None,
            int(float(mem.group(1)) * _UNIT[mem.group(2)]) if mem else None)


def _job_id(rec: dict[str, Any]) -> tuple[str, str]:
    """(``J_T`` for an array task else the id, Slurm's raw id). squeue puts the array in
    ``array_job_id``/``array_task_id``; sacct in ``array.job_id``/``array.task_id``."""
    jid = slurm_number(rec.get("job_id"))
    raw = str(int(jid)) if jid is not None else str(rec.get("job_id", ""))
    array = _obj(rec.get("array"))
    parent = slurm_number(rec.get("array_job_id", array.get("job_id")))
    task = slurm_number(rec.get("array_task_id", array.get("task_id")))
    if parent and task is not None:
        return f"{int(parent)}_{int(task)}", raw
    pending = rec.get("array_task_string") or array.get("task")
    if parent and isinstance(pending, str) and pending:  # a pending array's tasks not yet split
        return f"{int(parent)}_[{pending}]", raw
    return raw, raw


def _exit_code(v: Any) -> str:
    """squeue 22.05: a wait status number; sacct/23.x: ``{"status", "return_code", "signal"}``."""
    if isinstance(v, dict):
        rc = slurm_number(v.get("return_code"))
        sig = _obj(v.get("signal"))
        signo = slurm_number(sig.get("id", sig.get("signal_id"))) if sig else None
        return f"{int(rc or 0)}:{int(signo or 0)}" if rc is not None or signo else ""
    n = slurm_number(v)
    if n is None:
        return ""
    status = int(n)
    return f"{(status >> 8) & 0xFF}:{status & 0x7F}"


def _steps_usage(steps: Any) -> tuple[float | None, int | None]:
    """sacct's TotalCPU (sum of the steps' CPU time) and MaxRSS (largest of the steps' peaks)."""
    total, rss = None, None
    for st in steps or ():
        if not isinstance(st, dict):
            continue
        t = _obj(st.get("time")).get("total")
        if isinstance(t, dict):
            sec = (slurm_number(t.get("seconds")) or 0.0) + (slurm_number(t.get("microseconds"))
                                                             or 0.0) / 1e6
            total = (total or 0.0) + sec
        tres = _obj(st.get("tres"))
        req = _obj(tres.get("requested"))
        peak = _tres_entry(req.get("max"), "mem")
        if peak is not None:
            rss = max(rss or 0, int(peak))
    return total, rss


# --------------------------------------------------------------------------------------------
# Records


def job_from_record(rec: dict[str, Any]) -> SlurmJob:
    """One ``jobs[]`` record of squeue/scontrol (either generation) or sacct.

    GPUs are what the job was *allocated* (``gres_detail``, ``tres_alloc_str``, sacct's
    ``tres.allocated``, else its exact GRES request ``tres_per_node``/``tres_per_job``): a job
    that asked for none holds none, whatever node it runs on. A pending job reports what it
    *requested*."""
    nodes_text = rec.get("nodes") or (rec.get("job_resources") or {}).get("nodes") or ""
    if isinstance(nodes_text, dict):  # sacct 23.x: {"list": ...}? keep the plain forms only
        nodes_text = nodes_text.get("list", "") or ""
    nodes = expand_hostlist(str(nodes_text)) if nodes_text else ()
    state = _state(rec.get("job_state") if "job_state" in rec else rec.get("state"))
    tres = _obj(rec.get("tres"))
    pending = state == "PENDING" or not nodes
    indices: dict[str, tuple[int, ...]] = {}
    gpus = 0
    for node, gres in zip(nodes, rec.get("gres_detail") or []):
        count, idx = parse_gres_detail(str(gres))
        gpus += count
        if idx:
            indices[node] = idx
    node_count = int(slurm_number(rec.get("node_count")) or len(nodes) or 1)
    per_node = _gpus_in_tres(rec.get("tres_per_node"))
    # a GRES request is exact: a started job was granted its --gres/--gpus, so where the
    # allocated TRES do not list gres/gpu (AccountingStorageTRES without it), the request says
    granted = _gpus_in_tres(rec.get("tres_per_job")) or (per_node * node_count if per_node else 0)
    if not gpus and not pending:
        gpus = (_gpus_in_tres(rec.get("tres_alloc_str"))
                or int(_tres_entry(tres.get("allocated"), "gres", "gpu") or 0) or granted)
    elif pending:
        nodes = ()  # sacct prints "None assigned"
        gpus = (_gpus_in_tres(rec.get("tres_req_str"))
                or int(_tres_entry(tres.get("requested"), "gres", "gpu") or 0) or granted)
    cpus, mem = _cpu_mem_in_tres(rec.get("tres_req_str" if pending else "tres_alloc_str"))
    if cpus is None and tres:
        which = tres.get("requested" if pending else "allocated")
        cpu_n, mem_mib = _tres_entry(which, "cpu"), _tres_entry(which, "mem")
        cpus = int(cpu_n) if cpu_n is not None else None
        mem = int(mem_mib * 2**20) if mem_mib is not None else None
    t = _obj(rec.get("time"))  # sacct keeps times here
    limit_min = slurm_number(rec.get("time_limit")) if "time_limit" in rec else slurm_number(t.get("limit"))
    user = rec.get("user_name") or rec.get("user") or ""
    job, raw = _job_id(rec)
    reason = rec.get("state_reason")
    if reason is None and isinstance(rec.get("state"), dict):
        reason = rec["state"].get("reason")
    total_cpu, max_rss = _steps_usage(rec.get("steps"))
    start = _epoch(rec.get("start_time", t.get("start")))
    return SlurmJob(
        job=job, job_raw=raw, user=str(user), state=state,
        nodes=nodes, gpus=gpus, gpu_indices=indices,
        submit_s=_epoch(rec.get("submit_time", t.get("submission"))),
        start_s=None if pending else start,
        end_s=_epoch(rec.get("end_time", t.get("end"))),
        time_limit_s=limit_min * 60.0 if limit_min else None,
        priority=slurm_number(rec.get("priority")),
        partition=str(rec.get("partition") or ""),
        name=str(rec.get("name") or ""),
        account=str(rec.get("account") or ""),
        reason="" if reason in (None, "None") else str(reason),
        exit_code=_exit_code(rec.get("exit_code")) if state != "PENDING" else "",
        cpus=cpus, mem_bytes=mem, total_cpu_s=total_cpu, max_rss_bytes=max_rss,
    )


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
        return only(parse_jobs_json(self.run(argv), "squeue --json"), user=user)

    def scontrol(self) -> list[SlurmJob]:
        return parse_jobs_json(self.run(["scontrol", "show", "job", "--json"]),
                               "scontrol show job --json")

    def sacct(self, *, since: str | None = None, user: str | None = None,
              account: str | None = None, until: str | None = None) -> list[SlurmJob]:
        """Jobs from accounting (``since``/``until``: sacct's ``--starttime``/``--endtime``).
        ``user``/``account`` are filtered here as well: Slurm 22.05's ``sacct --json --user U``
        returns every user's jobs. Exit codes come from sacct's parsable output, which 22.05's
        JSON prints as 0 for every job."""
        who = ["--user", user] if user else ["--allusers"]
        when = (["--starttime", since] if since else []) + (["--endtime", until] if until else [])
        jobs = parse_jobs_json(self.run(["sacct", "--json", *who, *when]), "sacct --json")
        try:
            text = self.run(["sacct", "--parsable2", "--noheader", "--allocations",
                             "--format=JobIDRaw,ExitCode", *who, *when])
        except SlurmError:
            text = ""
        codes = dict(line.split("|", 1) for line in text.splitlines() if line.count("|") == 1)
        jobs = [replace(j, exit_code=codes.get(j.job_raw, j.exit_code)) if j.job_raw in codes
                else j for j in jobs]
        return only(jobs, user=user, account=account)

    def jobs(self, *, user: str | None = None, account: str | None = None) -> list[SlurmJob]:
        """Current jobs: ``scontrol show job --json`` where Slurm has it, else ``squeue --json``."""
        try:
            found = self.scontrol()
        except SlurmError as exc:
            if "not found on PATH" in str(exc):
                raise
            found = self.squeue()
        return only(found, user=user, account=account)

    def nodes(self) -> list[SlurmNode]:
        """Nodes with their partitions and GPUs (``sinfo --json``)."""
        return parse_nodes_json(self.run(["sinfo", "--json"]), "sinfo --json")


def only(jobs: Iterable[SlurmJob], *, user: str | None = None,
         account: str | None = None) -> list[SlurmJob]:
    """The jobs of ``user`` and ``account`` (None: any), filtered by the tool itself."""
    return [j for j in jobs if (user is None or j.user == user)
            and (account is None or j.account == account)]


@record
class SlurmNode:
    name: str
    partitions: tuple[str, ...]
    gpus: int  # configured GPUs (GRES)
    gpus_used: int  # allocated GPUs
    state: str = ""


def _gres_gpus(text: Any) -> int:
    if not isinstance(text, str):
        return 0
    return sum(parse_gres_detail(part)[0] for part in _split_top(text, "(", ")"))


def parse_nodes_json(text: str, what: str = "sinfo --json") -> list[SlurmNode]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmError(f"{what}: not JSON: line {exc.lineno}: {exc.msg}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise SlurmError(f"{what}: expected an object with a \"nodes\" list")
    out = []
    for n in doc["nodes"]:
        if not isinstance(n, dict):
            continue
        state = n.get("state")
        out.append(SlurmNode(name=str(n.get("name") or ""),
                             partitions=tuple(str(p) for p in n.get("partitions") or ()),
                             gpus=_gres_gpus(n.get("gres")), gpus_used=_gres_gpus(n.get("gres_used")),
                             state=str(state[0] if isinstance(state, list) and state else state or "")))
    return out


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
        if (j.gpus <= 0 or not j.started
                or not any(j.state.startswith(s) for s in FINISHED_STATES)):
            continue  # a job cancelled while pending held nothing
        runtime = j.runtime_s(now) or 0.0
        out.append({"job": j.job, "user": j.user, "account": j.account, "state": j.state,
                    "nodes": list(j.nodes), "exit_code": j.exit_code,
                    "time_limit_s": j.time_limit_s,
                    "devices": j.gpus, "start_s": j.start_s, "end_s": j.end_s,
                    "runtime_s": round(runtime, 1), "gpu_hours": round(j.gpus * runtime / 3600, 6),
                    "partition": j.partition, "name": j.name})
    out.sort(key=lambda d: -(d["end_s"] or 0))
    return out
