"""Job lists for the queue simulator, from the three formats sites have.

* **SWF** — the Standard Workload Format of the Parallel Workloads Archive (Chapin, Cirne,
  Feitelson, Jones, Leutenegger, Schwiegelshohn, Smith & Talby, "Benchmarks and standards for the
  evaluation of parallel job schedulers", JSSPP 1999; definition at
  https://www.cs.huji.ac.il/labs/parallel/workload/swf.html). One job per line, 18 whitespace-
  separated fields, ``-1`` = unknown, lines starting with ``;`` are header comments. Fields used
  (1-based): 1 job number, 2 submit time (s), 4 run time (s), 5 allocated processors, 8 requested
  processors, 9 requested time (s), 11 status, 12 user id, 15 queue number. Processors are read as
  GPUs (requested, else allocated); the requested time falls back to the run time. Jobs with no run
  time or no processors (e.g. cancelled before they started) are skipped and counted.
* **sacct --json** — Slurm's accounting records (``jobs[]``): ``job_id``, ``user``,
  ``time.submission/start/end/limit`` (limit in minutes), GPUs from ``tres.allocated`` (else
  ``requested``) entries ``{"type": "gres", "name": "gpu", "count": N}``, ``priority``. Newer
  Slurm (data_parser v0.0.40+) wraps numbers as ``{"set": true, "number": N}`` and lists states;
  both shapes are read. Jobs that never started are skipped.
* **CSV** — a header row naming ``job,user,submit_s,run_s,gpus`` and optionally
  ``requested_s,priority``.

Every problem names the file and line (``FileError``), so the CLI prints it and exits 2.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleet_tui.core.cluster.queue import QueueJob
from fleet_tui.core.cluster.slurm import slurm_number
from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record

FORMATS = ("swf", "sacct-json", "csv")
CSV_REQUIRED = ("job", "user", "submit_s", "run_s", "gpus")


class FileError(UserError):
    """A bad input file: the message starts with ``file:line:``."""


@record
class Workload:
    path: str
    format: str
    jobs: tuple[QueueJob, ...]
    skipped: int  # records without a run (never started, cancelled, no processors)


def load_workload(path: str | Path, fmt: str | None = None) -> Workload:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise FileError(f"{p}: cannot read the job list: {exc.strerror or exc}") from None
    fmt = fmt or guess_format(p.name, text)
    if fmt == "swf":
        jobs, skipped = parse_swf(text, str(p))
    elif fmt == "sacct-json":
        jobs, skipped = parse_sacct_json(text, str(p))
    elif fmt == "csv":
        jobs, skipped = parse_csv(text, str(p))
    else:
        raise FileError(f"{p}: unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if not jobs:
        raise FileError(f"{p}:1: no job with a run time and a GPU count ({skipped} skipped)")
    return Workload(str(p), fmt, tuple(jobs), skipped)


def guess_format(name: str, text: str) -> str:
    lower = name.lower()
    if lower.endswith(".swf"):
        return "swf"
    if lower.endswith(".json") or text.lstrip().startswith("{"):
        return "sacct-json"
    if lower.endswith(".csv"):
        return "csv"
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.startswith(";") or len(first.split()) == 18:
        return "swf"
    return "csv"


# --------------------------------------------------------------------------------------------
# SWF


def parse_swf(text: str, where: str = "<swf>") -> tuple[list[QueueJob], int]:
    jobs: list[QueueJob] = []
    skipped = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith(";"):
            continue
        f = s.split()
        if len(f) < 18:
            raise FileError(f"{where}:{lineno}: an SWF line has 18 fields, this one has {len(f)}")
        try:
            submit, run = float(f[1]), float(f[3])
            alloc, req_procs, req_time = int(float(f[4])), int(float(f[7])), float(f[8])
        except ValueError:
            raise FileError(f"{where}:{lineno}: SWF fields 2, 4, 5, 8 and 9 must be numbers") from None
        gpus = req_procs if req_procs > 0 else alloc
        if run <= 0 or gpus <= 0 or submit < 0 or not math.isfinite(run + submit):
            skipped += 1
            continue
        jobs.append(QueueJob(job=f[0], user=f[11], submit_s=submit, run_s=run, gpus=gpus,
                             requested_s=req_time if req_time > 0 else run,
                             where=f"{where}:{lineno}"))
    return jobs, skipped


def swf_line(job: int, submit_s: float, run_s: float, gpus: int, requested_s: float,
             user: int) -> str:
    """One SWF record (fields we do not model are -1): used by tests and the bench."""
    f = [job, int(submit_s), -1, int(run_s), gpus, -1, -1, gpus, int(requested_s), -1, 1, user,
         -1, -1, 1, -1, -1, -1]
    return " ".join(str(x) for x in f)


# --------------------------------------------------------------------------------------------
# sacct --json


def _gpus_from_tres(entries: Iterable[Any]) -> int | None:
    for e in entries or ():
        if isinstance(e, dict) and e.get("type") == "gres" and str(e.get("name", "")).startswith("gpu"):
            n = slurm_number(e.get("count"))
            if n is not None:
                return int(n)
    return None


def _line_of(text: str, needle: str, default: int = 1) -> int:
    pos = text.find(needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else default


def parse_sacct_json(text: str, where: str = "<sacct>") -> tuple[list[QueueJob], int]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileError(f"{where}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise FileError(f"{where}:1: expected sacct --json output: an object with a \"jobs\" list")
    jobs: list[QueueJob] = []
    skipped = 0
    for n, rec in enumerate(doc["jobs"]):
        if not isinstance(rec, dict):
            line = _line_of(text, '"jobs"')
            raise FileError(f"{where}:{line}: jobs[{n}] is not an object")
        jid = str(rec.get("job_id", n))
        line = _line_of(text, f'"job_id": {jid}', _line_of(text, f'"job_id":{jid}'))
        t = rec.get("time") or {}
        submit, start, end = slurm_number(t.get("submission")), slurm_number(t.get("start")), slurm_number(t.get("end"))
        tres = rec.get("tres") or {}
        gpus = _gpus_from_tres(tres.get("allocated")) or _gpus_from_tres(tres.get("requested"))
        if not start or not end or end <= start or not gpus:
            skipped += 1
            continue
        if submit is None:
            raise FileError(f"{where}:{line}: job {jid} has no time.submission")
        limit_min = slurm_number(t.get("limit"))
        user = rec.get("user") or rec.get("user_name") or ""
        jobs.append(QueueJob(job=jid, user=str(user), submit_s=submit, run_s=end - start,
                             gpus=gpus, requested_s=limit_min * 60.0 if limit_min else end - start,
                             priority=slurm_number(rec.get("priority")) or 0.0, where=f"{where}:{line}"))
    return jobs, skipped


# --------------------------------------------------------------------------------------------
# CSV


def parse_csv(text: str, where: str = "<csv>") -> tuple[list[QueueJob], int]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or ()]
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise FileError(f"{where}:1: the CSV header must name {', '.join(CSV_REQUIRED)} "
                        f"(optional: requested_s, priority); missing {', '.join(missing)}")
    jobs: list[QueueJob] = []
    skipped = 0
    for row in reader:
        lineno = reader.line_num
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        try:
            submit, run = float(row["submit_s"]), float(row["run_s"])
            gpus_f = float(row["gpus"])
            req = float(row["requested_s"]) if row.get("requested_s") else run
            prio = float(row["priority"]) if row.get("priority") else 0.0
        except ValueError as exc:
            raise FileError(f"{where}:{lineno}: {exc}; submit_s, run_s, gpus, requested_s and "
                            "priority are numbers") from None
        if not all(math.isfinite(x) for x in (submit, run, gpus_f, req, prio)):
            raise FileError(f"{where}:{lineno}: numbers must be finite")
        if gpus_f != int(gpus_f) or gpus_f < 0:
            raise FileError(f"{where}:{lineno}: gpus must be a whole number, got {row['gpus']!r}")
        if run < 0 or submit < 0 or req < 0:
            raise FileError(f"{where}:{lineno}: submit_s, run_s and requested_s must be >= 0")
        if run == 0 or gpus_f == 0:
            skipped += 1
            continue
        jobs.append(QueueJob(job=row["job"] or str(lineno), user=row["user"], submit_s=submit,
                             run_s=run, gpus=int(gpus_f), requested_s=req, priority=prio,
                             where=f"{where}:{lineno}"))
    return jobs, skipped
