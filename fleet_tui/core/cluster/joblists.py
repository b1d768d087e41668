"""Job lists for the queue simulator, from the three formats sites have.

* **SWF** — the Standard Workload Format of the Parallel Workloads Archive (Chapin, Cirne,
  Feitelson, Jones, Leutenegger, Schwiegelshohn, Smith & Talby, "Benchmarks and standards for the
  evaluation of parallel job schedulers", JSSPP 1999; definition at
  https://www.cs.huji.ac.il/labs/parallel/workload/swf.html). One job per line, 18 whitespace-
  separated fields, ``-1`` = unknown, lines starting with ``;`` are header comments. Fields used
  (1-based): 1 job number, 2 submit time (s), 4 run time (s), 5 allocated processors, 8 requested
  processors, 9 requested time (s), 11 status, 12 user id, 15 queue number. Processors are read as
  GPUs (requested, else allocated); the requested time falls back to the run time. Jobs with no run
  time (-1), a cancelled job that never ran (status 5, run time 0), the parts of a checkpointed
  job (status 2-4; its summary line is simulated) and jobs with no processors are skipped and
  counted; a run time of 0 otherwise is a job shorter than half a second and is simulated. Jobs
  submitted at the same second queue by job number. The header's ``MaxProcs``/``MaxNodes`` (the
  recorded machine) are read and reported.
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
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleet_tui.core.cluster.queue import QueueJob
from fleet_tui.core.cluster.slurm import slurm_number
from fleet_tui.core.errors import UserError
from fleet_tui.core.fsutil import InputFileError, read_text_capped
from fleet_tui.core.jsonio import parse_json
from fleet_tui.core.limits import BOUNDS, int_limit, limit
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
    max_procs: int | None = None  # SWF header: the processors of the machine it was recorded on
    max_nodes: int | None = None


def load_workload(path: str | Path, fmt: str | None = None) -> Workload:
    p = Path(path).expanduser()
    try:
        text = read_text_capped(p, "job list", errors="replace")
    except InputFileError as exc:
        raise FileError(str(exc)) from None
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
    header = swf_header(text) if fmt == "swf" else {}
    return Workload(str(p), fmt, tuple(jobs), skipped, header.get("MaxProcs"),
                    header.get("MaxNodes"))


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


def checked(job: QueueJob, jobs: list[QueueJob]) -> QueueJob:
    """``job`` with every time finite and within the ``time_s`` bound and its GPUs within
    ``job_gpus``, checked as it is read, in every format, so the simulator's loop always steps
    (a NaN time in sacct JSON once looped forever); ``jobs`` (the list so far) within ``jobs``."""
    where = job.where or "<jobs>"
    bound = limit("time_s")
    for name in ("submit_s", "run_s", "requested_s", "priority"):
        value = getattr(job, name)
        if not math.isfinite(value) or abs(value) > bound:
            raise FileError(f"{where}: {name} {value!r} must be finite and within ±{bound:g} "
                            f"({BOUNDS['time_s'].why})")
    if job.gpus > int_limit("job_gpus"):
        raise FileError(f"{where}: {job.gpus} GPUs is over the bound of "
                        f"{int_limit('job_gpus')} GPUs for one job")
    if len(jobs) >= int_limit("jobs"):
        raise FileError(f"{where}: more than {int_limit('jobs')} jobs (the bound on one job list)")
    return job


def _float(text: str) -> float:
    """A number of an SWF or CSV field: ``float`` without its NaN/inf spellings."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


# --------------------------------------------------------------------------------------------
# SWF


SWF_PARTIAL_STATUS = (2, 3, 4)  # a part of a job whose summary line is there too (SWF 2.2)
_HEADER_INT = re.compile(r";\s*(MaxProcs|MaxNodes)\s*:\s*(\d{1,9})\b", re.IGNORECASE)


def parse_swf(text: str, where: str = "<swf>") -> tuple[list[QueueJob], int]:
    """The jobs of an SWF trace in queue order (submit time, then job number) and how many
    records were not simulated. Per the SWF 2.2 definition: a run time of 0 is a job that ran
    under half a second, and is simulated; -1 (unknown) is not; a cancelled job (status 5) that
    never ran (run time 0 or -1) is not; status 2-4 lines are the parts of a checkpointed or
    swapped job whose summary line (status 0, 1 or 5) is in the file too, so only the summary
    is simulated; the job's size is its requested processors (what a scheduler sees), else the
    allocated ones."""
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
            submit, run = _float(f[1]), _float(f[3])
            alloc, req_procs, req_time = int(_float(f[4])), int(_float(f[7])), _float(f[8])
            status = int(_float(f[10]))
        except ValueError:
            raise FileError(f"{where}:{lineno}: SWF fields 2, 4, 5, 8, 9 and 11 must be finite "
                            "numbers") from None
        gpus = req_procs if req_procs > 0 else alloc
        never_ran = run < 0 or (status == 5 and run <= 0)
        if (never_ran or status in SWF_PARTIAL_STATUS or gpus <= 0 or submit < 0
                or not math.isfinite(run + submit)):
            skipped += 1
            continue
        jobs.append(checked(QueueJob(job=f[0], user=f[11], submit_s=submit, run_s=run, gpus=gpus,
                                     requested_s=req_time if req_time > 0 else run,
                                     where=f"{where}:{lineno}"), jobs))
    # the file is sorted by submit time (SWF 2.2); jobs submitted together queue by job number
    jobs.sort(key=lambda j: (j.submit_s, _job_number(j.job)))
    return jobs, skipped


def _job_number(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (0, text)


def swf_header(text: str) -> dict[str, int]:
    """``MaxProcs``/``MaxNodes`` of an SWF trace's header comments (the machine it was recorded
    on), where they are given as whole numbers."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(";"):
            break  # the header comes first
        m = _HEADER_INT.match(s)
        if m:
            out.setdefault("MaxProcs" if m.group(1).lower() == "maxprocs" else "MaxNodes",
                           int(m.group(2)))
    return out


def swf_line(job: int, submit_s: float, run_s: float, gpus: int, requested_s: float,
             user: int) -> str:
    """One SWF record (fields we do not model are -1): used by tests and the bench."""
    f = [job, int(submit_s), -1, int(run_s), gpus, -1, -1, gpus, int(requested_s), -1, 1, user,
         -1, -1, 1, -1, -1, -1]
    return " ".join(str(x) for x in f)


# --------------------------------------------------------------------------------------------
# sacct --json


def _gpus_from_tres(entries: Iterable[Any] | None) -> int | None:
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
    doc = parse_json(text, where, FileError)
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
        tres = rec.get("tres") or {}
        if not isinstance(t, dict) or not isinstance(tres, dict):
            raise FileError(f"{where}:{line}: job {jid}: 'time' and 'tres' must be objects")
        for key in ("allocated", "requested"):
            if not isinstance(tres.get(key) or [], list):
                raise FileError(f"{where}:{line}: job {jid}: tres.{key} must be a list")
        submit, start, end = (_finite(slurm_number(t.get(k)), where, line, jid, f"time.{k}")
                              for k in ("submission", "start", "end"))
        gpus = _gpus_from_tres(tres.get("allocated")) or _gpus_from_tres(tres.get("requested"))
        if not start or not end or end <= start or not gpus:
            skipped += 1
            continue
        if submit is None:
            raise FileError(f"{where}:{line}: job {jid} has no time.submission")
        limit_min = _finite(slurm_number(t.get("limit")), where, line, jid, "time.limit")
        priority = _finite(slurm_number(rec.get("priority")), where, line, jid, "priority")
        user = rec.get("user") or rec.get("user_name") or ""
        jobs.append(checked(QueueJob(
            job=jid, user=str(user), submit_s=submit, run_s=end - start, gpus=gpus,
            requested_s=limit_min * 60.0 if limit_min else end - start,
            priority=priority or 0.0, where=f"{where}:{line}"), jobs))
    return jobs, skipped


def _finite(value: float | None, where: str, line: int, jid: str, name: str) -> float | None:
    if value is not None and not math.isfinite(value):
        raise FileError(f"{where}:{line}: job {jid}: {name} must be a finite number, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# CSV


def _csv_rows(reader: csv.DictReader, where: str) -> Iterable[dict[Any, Any]]:
    """The rows of ``reader``; a line the csv module cannot split is a ``FileError`` at it."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise FileError(f"{where}:{reader.line_num}: not CSV: {exc}") from None
        yield row


def parse_csv(text: str, where: str = "<csv>") -> tuple[list[QueueJob], int]:
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = [h.strip() for h in reader.fieldnames or ()]
    except csv.Error as exc:
        raise FileError(f"{where}:1: not CSV: {exc}") from None
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise FileError(f"{where}:1: the CSV header must name {', '.join(CSV_REQUIRED)} "
                        f"(optional: requested_s, priority); missing {', '.join(missing)}")
    jobs: list[QueueJob] = []
    skipped = 0
    for raw in _csv_rows(reader, where):
        lineno = reader.line_num
        if None in raw:  # csv.DictReader puts the fields past the header under None
            raise FileError(f"{where}:{lineno}: {len(header) + len(raw[None])} fields, the "
                            f"header names {len(header)}")
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
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
        jobs.append(checked(QueueJob(job=row["job"] or str(lineno), user=row["user"],
                                     submit_s=submit, run_s=run, gpus=int(gpus_f),
                                     requested_s=req, priority=prio, where=f"{where}:{lineno}"),
                            jobs))
    return jobs, skipped
