"""FIFO and EASY backfill against a textbook reference, on SWF traces as the Parallel Workloads
Archive writes them.

The references below are written to be obviously right, not fast, and share no code with
``core/cluster/queue.py`` or its reader:

* the trace is read from the SWF 2.2 definition (Feitelson et al., "The Standard Workload
  Format", https://www.cs.huji.ac.il/labs/parallel/workload/swf.html; Chapin et al., JSSPP 1999):
  18 fields, ``-1`` unknown, ``;`` comments with ``MaxProcs``; lines sorted by submit time; a
  run time of 0 is a job shorter than half a second; status 1 completed, 0 failed, 5 cancelled,
  2-4 the parts of a checkpointed/swapped job whose summary line is also in the file;
* FIFO: at every arrival or completion, start the queue's first job while it fits;
* EASY (Lifka 1995; the steps as Mu'alem & Feitelson, IEEE TPDS 12(6) 2001, list them): the first
  job gets a reservation at the *shadow time* — the earliest moment, by the running jobs'
  *requested* end times, with enough free processors for it; the processors free then beyond its
  need are the *extra* ones. The first later job that fits now and either ends (by its request)
  by the shadow time or needs no more than the extra processors starts now; then everything is
  computed again from the start, until no job can start. Jobs end after their *actual* run time.

The property test draws whole SWF files (ties in submit time with job numbers out of order,
``-1`` fields, requests shorter and longer than the run, cancelled jobs with and without a run,
checkpointed jobs' part lines, jobs larger than ``MaxProcs``) and compares every job's start.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_tui.core.cluster.joblists import parse_swf, swf_header
from fleet_tui.core.cluster.queue import simulate
from tests.cli_run import run

# ------------------------------------------------------------------------------ reference reader


def reference_read(text: str) -> tuple[list[dict], int | None]:
    """(jobs in queue order, MaxProcs) from an SWF text, straight from the definition."""
    max_procs = None
    jobs = []
    for line in text.splitlines():
        if line.strip().startswith(";"):
            key, _, value = line.strip()[1:].partition(":")
            if key.strip() == "MaxProcs":
                max_procs = int(value.split()[0])
            continue
        if not line.strip():
            continue
        f = [float(x) for x in line.split()]
        number, submit, run, alloc, req_procs, req_time, status = (
            int(f[0]), f[1], f[3], int(f[4]), int(f[7]), f[8], int(f[10]))
        if status in (2, 3, 4):
            continue  # a part of a job; its summary line stands for it
        if run == -1 or (status == 5 and run == 0):
            continue  # never ran
        size = req_procs if req_procs != -1 else alloc
        if size == -1:
            continue
        jobs.append({"id": str(number), "number": number, "submit": submit, "run": run,
                     "size": size, "req": req_time if req_time > 0 else run})
    jobs.sort(key=lambda j: (j["submit"], j["number"]))
    return jobs, max_procs


# ------------------------------------------------------------------------------ reference policies


def reference_schedule(jobs: list[dict], total: int, easy: bool) -> dict[str, float]:
    """Start time of every job that fits the machine, by textbook FIFO or EASY."""
    jobs = [j for j in jobs if j["size"] <= total]  # larger than the machine: never starts
    t0 = min((j["submit"] for j in jobs), default=0.0)
    arrivals = list(jobs)
    queue: list[dict] = []
    running: list[dict] = []  # with "start"
    start: dict[str, float] = {}
    while arrivals or queue or running:
        next_arrival = arrivals[0]["submit"] - t0 if arrivals else math.inf
        now = min(next_arrival, min((r["start"] + r["run"] for r in running), default=math.inf))
        running = [r for r in running if r["start"] + r["run"] > now]  # ended ones leave
        while arrivals and arrivals[0]["submit"] - t0 <= now:
            queue.append(arrivals.pop(0))
        while queue:
            free = total - sum(r["size"] for r in running)
            pick = None
            if queue[0]["size"] <= free:
                pick = queue[0]
            elif easy:
                pick = _backfill_candidate(queue, running, free, total, now)
            if pick is None:
                break
            queue.remove(pick)
            start[pick["id"]] = now
            running.append({**pick, "start": now})
    return start


def _backfill_candidate(queue: list[dict], running: list[dict], free: int, total: int,
                        now: float) -> dict | None:
    head = queue[0]
    # a running job past its request is expected to end at once
    expected = sorted({max(now, r["start"] + r["req"]) for r in running})
    shadow, extra = None, 0
    for t in expected:
        avail = free + sum(r["size"] for r in running if max(now, r["start"] + r["req"]) <= t)
        if avail >= head["size"]:
            shadow, extra = t, avail - head["size"]
            break
    assert shadow is not None  # every job fits the machine once all end
    for j in queue[1:]:
        if j["size"] <= free and (now + j["req"] <= shadow or j["size"] <= min(free, extra)):
            return j
    return None


# ------------------------------------------------------------------------------ drawn traces

MACHINE = 8
_record = st.fixed_dictionaries({
    "gap": st.sampled_from([0, 0, 0, 1, 2, 5, 17]),  # many submitted at the same second
    "run": st.integers(-1, 60),  # -1 unknown, 0 under half a second
    "alloc": st.integers(-1, MACHINE + 3).map(lambda v: v or 1),
    "req_procs": st.integers(-1, MACHINE + 1).map(lambda v: v or -1),
    "req_time": st.integers(-1, 90),  # often shorter than the run: it overran its request
    "status": st.sampled_from([1, 1, 1, 0, 5, -1]),
    "parts": st.sampled_from([0, 0, 0, 1, 2]),  # a checkpointed job: its part lines
})


def _swf(records: list[dict], swaps: list[int]) -> str:
    lines = ["; Version: 2.2", "; Computer: drawn by hypothesis", f"; MaxNodes: {MACHINE // 4}",
             f"; MaxProcs: {MACHINE}", ";"]
    submit = 0
    rows = []
    for n, r in enumerate(records, 1):
        submit += r["gap"]
        fields = [n, submit, -1, r["run"], r["alloc"], -1, -1, r["req_procs"], r["req_time"], -1,
                  r["status"], 1 + n % 3, 1, -1, 1, -1, -1, -1]
        rows.append(fields)
        run = max(r["run"], 1)
        for k in range(r["parts"]):  # parts of it (same number and submit, part run times)
            part = list(fields)
            part[3], part[10] = run, 3 if k == r["parts"] - 1 else 2
            rows.append(part)
    for i in swaps:  # job numbers out of order among jobs submitted together
        if i + 1 < len(rows) and rows[i][1] == rows[i + 1][1]:
            rows[i], rows[i + 1] = rows[i + 1], rows[i]
    return "\n".join(lines + [" ".join(str(x) for x in f) for f in rows]) + "\n"


@settings(max_examples=120, deadline=None)
@given(st.lists(_record, min_size=30, max_size=150), st.lists(st.integers(0, 200), max_size=20))
def test_fifo_and_easy_give_the_textbook_start_of_every_job(records, swaps):
    text = _swf(records, swaps)
    ref_jobs, max_procs = reference_read(text)
    jobs, _ = parse_swf(text, "drawn.swf")
    assert swf_header(text)["MaxProcs"] == max_procs == MACHINE
    # the same jobs, in the same queue order, with the same sizes, runs and requests
    assert [(j.job, j.gpus, j.run_s, j.requested_s) for j in jobs] == \
        [(r["id"], r["size"], r["run"], r["req"]) for r in ref_jobs]
    if not jobs:
        return
    for policy, easy in (("fifo", False), ("backfill", True)):
        res = simulate(jobs, MACHINE, policy)
        want = reference_schedule(ref_jobs, MACHINE, easy)
        got = {r.job: r.start_s for r in res.runs}
        assert got == want, policy
        assert set(res.skipped) == {r["id"] for r in ref_jobs if r["size"] > MACHINE}


def _random_records(rng: random.Random, n: int) -> list[dict]:
    pick = rng.choice
    return [{"gap": pick([0, 0, 0, 1, 2, 5, 17]), "run": pick([-1, 0, *range(1, 61)]),
             "alloc": pick([-1, *range(1, MACHINE + 4)]),
             "req_procs": pick([-1, *range(1, MACHINE + 2)]), "req_time": pick(range(-1, 91)),
             "status": pick([1, 1, 1, 0, 5, -1]), "parts": pick([0, 0, 0, 1, 2])}
            for _ in range(n)]


def test_seeded_traces_give_the_textbook_start_of_every_job():
    """The same comparison over 150 seeded traces of 200 records each, for breadth (Hypothesis
    above looks for the small cases that break it)."""
    rng = random.Random(20010601)
    for _ in range(150):
        text = _swf(_random_records(rng, 200), [rng.randrange(200) for _ in range(10)])
        ref_jobs, _ = reference_read(text)
        jobs, _ = parse_swf(text, "seeded.swf")
        for policy, easy in (("fifo", False), ("backfill", True)):
            got = {r.job: r.start_s for r in simulate(jobs, MACHINE, policy).runs}
            assert got == reference_schedule(ref_jobs, MACHINE, easy), policy


# ------------------------------------------------------------------------------ by hand


def _line(n, submit, run, procs, req, status=1, alloc=None):
    a = procs if alloc is None else alloc
    return f"{n} {submit} -1 {run} {a} -1 -1 {procs} {req} -1 {status} 1 1 -1 1 -1 -1 -1"


def test_requests_reserve_and_runs_complete():
    """8 processors. Job 1 (8) runs 0-10; 2 (8) waits, reserved at 10. Job 3 asks 100 s but
    runs 2 s: by its request it would delay 2, so it may not backfill; 4 asks 5 s, runs 5 s and
    does. When 1 ends at 10, 2 starts; 3 starts when 2 ends (10 + 4 = 14)."""
    text = "; MaxProcs: 8\n" + "\n".join([
        _line(1, 0, 10, 8, 10), _line(2, 1, 4, 8, 4), _line(3, 2, 2, 1, 100),
        _line(4, 3, 5, 1, 5)]) + "\n"
    jobs, _ = parse_swf(text)
    start = {r.job: r.start_s for r in simulate(jobs, 8, "backfill").runs}
    # job 1 holds all 8 processors: nothing backfills until it ends
    assert start == {"1": 0, "2": 10, "3": 14, "4": 14}
    text = "; MaxProcs: 8\n" + "\n".join([
        _line(1, 0, 10, 6, 10), _line(2, 1, 4, 8, 4), _line(3, 2, 2, 1, 100),
        _line(4, 3, 5, 1, 5)]) + "\n"
    jobs, _ = parse_swf(text)
    start = {r.job: r.start_s for r in simulate(jobs, 8, "backfill").runs}
    assert start == {"1": 0, "2": 10, "3": 14, "4": 3}
    assert start == reference_schedule(reference_read(text)[0], 8, True)


def test_swf_status_codes_and_unknown_fields():
    text = "\n".join([
        "; MaxProcs: 4", "; MaxNodes: 2",
        _line(1, 0, 10, 2, 20),
        _line(2, 0, 0, 2, -1, status=5),  # cancelled, never ran
        _line(3, 0, 7, 2, -1, status=5),  # cancelled after 7 s of running: it held processors
        _line(4, 1, 0, 1, 5, status=0),  # failed at once: ran under half a second
        _line(5, 1, -1, 1, 5),  # no run time
        _line(6, 2, 30, -1, 40, alloc=3),  # requested processors unknown: the allocated ones
        _line(7, 2, 30, -1, 40, alloc=-1),  # no processors at all
        _line(8, 3, 12, 2, 12), _line(8, 3, 5, 2, 12, status=2),  # checkpointed: summary + parts
        _line(8, 3, 7, 2, 12, status=3),
    ]) + "\n"
    jobs, skipped = parse_swf(text)
    assert [(j.job, j.gpus, j.run_s, j.requested_s) for j in jobs] == [
        ("1", 2, 10, 20), ("3", 2, 7, 7), ("4", 1, 0, 5), ("6", 3, 30, 40), ("8", 2, 12, 12)]
    assert skipped == 5  # 2, 5, 7 and 8's two part lines
    assert swf_header(text) == {"MaxProcs": 4, "MaxNodes": 2}
    assert jobs == parse_swf(text)[0]
    for policy, easy in (("fifo", False), ("backfill", True)):
        got = {r.job: r.start_s for r in simulate(jobs, 4, policy).runs}
        assert got == reference_schedule(reference_read(text)[0], 4, easy)


def test_jobs_submitted_together_queue_by_job_number():
    text = "; MaxProcs: 2\n" + "\n".join([_line(2, 0, 5, 2, 5), _line(1, 0, 5, 2, 5),
                                          _line(3, 0, 5, 2, 5)]) + "\n"
    jobs, _ = parse_swf(text)
    assert [j.job for j in jobs] == ["1", "2", "3"]
    assert simulate(jobs, 2, "fifo").start_order() == ["1", "2", "3"]


def test_a_job_larger_than_maxprocs_is_skipped_and_counted():
    text = "; MaxProcs: 4\n" + "\n".join([_line(1, 0, 5, 2, 5), _line(2, 0, 5, 6, 5),
                                          _line(3, 1, 5, 2, 5)]) + "\n"
    jobs, _ = parse_swf(text)
    for policy in ("fifo", "backfill"):
        res = simulate(jobs, swf_header(text)["MaxProcs"], policy)
        assert res.skipped == ("2",) and {r.job: r.start_s for r in res.runs} == {"1": 0, "3": 1}


@pytest.mark.parametrize("header", ["; MaxProcs: 128 (64 nodes)", ";MaxProcs:128", "; maxprocs: 128"])
def test_maxprocs_header_forms(header):
    assert swf_header(header + "\n1 0 -1 5 1 -1 -1 1 5 -1 1 1 1 -1 1 -1 -1 -1\n") == {
        "MaxProcs": 128}


def test_queue_simulate_reports_the_recorded_machine(capsys, tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 2\n; MaxProcs: 8\n" + "\n".join([
        _line(1, 0, 10, 4, 10), _line(2, 0, 0, 2, -1, status=5), _line(3, 1, 5, 12, 5)]) + "\n")
    code, out, _ = run(capsys, "queue", "simulate", str(trace), "--nodes", "2",
                       "--gpus-per-node", "4", "--policy", "fifo,backfill")
    assert code == 0
    assert "recorded on a machine of 8 processors and 2 nodes" in out
    assert "2 jobs (1 skipped)" in out and "1 jobs ask for more than 8 GPUs" in out
    code, out, _ = run(capsys, "queue", "simulate", str(trace), "--nodes", "2",
                       "--gpus-per-node", "4", "--json")
    doc = json.loads(out)
    assert (doc["trace_max_procs"], doc["trace_max_nodes"], doc["skipped"]) == (8, 2, 1)
