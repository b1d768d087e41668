"""Queue simulator: hand-computed cases asserted exactly, and the readers' errors."""

from __future__ import annotations

import json

import pytest

from fleet_tui.core.cluster.joblists import (
    FileError,
    load_workload,
    parse_csv,
    parse_sacct_json,
    parse_swf,
    swf_line,
)
from fleet_tui.core.cluster.queue import QueueJob, simulate
from fleet_tui.core.cluster.whatif import simulate_all
from fleet_tui.core.errors import FieldError


def J(job, submit, run, gpus, req=None, user="u", prio=0.0):
    return QueueJob(job=job, user=user, submit_s=submit, run_s=run, gpus=gpus,
                    requested_s=run if req is None else req, priority=prio)


# One node with 4 GPUs. By hand:
#   A t=0 2 GPUs 10 s; B t=1 4 GPUs 5 s (blocked by A); C t=2 2 GPUs 3 s; D t=3 1 GPU 4 s;
#   E t=4 2 GPUs 2 s but requests 6 s.
# strict FIFO: A 0-10, B 10-15, C 15-18, D 15-19, E 18-20.
# EASY: B's reservation is at t=10 (A's requested end) with no spare GPUs, so C (ends 5) and D
#   (starts 5 when C ends, ends 9) backfill; E would end at 9+6=15 > 10 by its request and would
#   delay B, so it waits: A 0-10, C 2-5, D 5-9, B 10-15, E 15-17.
HAND = [J("A", 0, 10, 2), J("B", 1, 5, 4), J("C", 2, 3, 2), J("D", 3, 4, 1), J("E", 4, 2, 2, req=6)]


def _times(res):
    return {r.job: (r.start_s, r.end_s) for r in res.runs}


def test_strict_fifo_by_hand():
    res = simulate(HAND, 4, "fifo")
    assert _times(res) == {"A": (0, 10), "B": (10, 15), "C": (15, 18), "D": (15, 19), "E": (18, 20)}
    assert res.mean_wait_s == pytest.approx((0 + 9 + 13 + 12 + 14) / 5)
    assert res.p95_wait_s == 14
    assert res.makespan_s == 20
    assert res.utilization_pct == pytest.approx(100 * 54 / (4 * 20))
    assert res.mean_slowdown == pytest.approx((1 + 1.4 + 1.6 + 1.6 + 1.6) / 5)


def test_easy_backfill_by_hand():
    res = simulate(HAND, 4, "backfill")
    assert _times(res) == {"A": (0, 10), "B": (10, 15), "C": (2, 5), "D": (5, 9), "E": (15, 17)}
    assert res.mean_wait_s == pytest.approx((0 + 9 + 0 + 2 + 11) / 5)
    assert res.p95_wait_s == 11
    assert res.makespan_s == 17
    assert res.utilization_pct == pytest.approx(100 * 54 / (4 * 17))
    assert res.mean_slowdown == pytest.approx((1 + 1.4 + 1 + 1 + 1.3) / 5)
    assert res.start_order() == ["A", "C", "D", "B", "E"]


def test_json_contract():
    doc = simulate_all(HAND, 1, 4, ["fifo", "backfill"])
    fifo = doc["policies"]["fifo"]
    assert {"mean_wait_s", "p95_wait_s", "utilization_pct", "makespan_s", "jobs"} <= set(fifo)
    assert fifo["jobs"][0] == {"job": "A", "start_s": 0, "end_s": 10}
    assert doc["policies"]["backfill"]["utilization_pct"] == 79.41
    json.dumps(doc, allow_nan=False)


def test_preemption_requeues_and_counts_lost_work():
    jobs = [J("low", 0, 10, 2, prio=0), J("high", 2, 3, 2, prio=10)]
    plain = simulate(jobs, 2, "priority")
    assert _times(plain) == {"low": (0, 10), "high": (10, 13)}
    pre = simulate(jobs, 2, "preemption")
    assert _times(pre) == {"high": (2, 5), "low": (5, 15)}
    assert pre.preemptions == 1 and pre.lost_gpu_s == 4
    assert pre.runs[0].preempted == 1


def test_fair_share_serves_the_light_user():
    jobs = [J("j1", 0, 10, 1, user="heavy"), J("j2", 0, 10, 1, user="heavy"),
            J("j3", 0, 10, 1, user="heavy"), J("k1", 1, 10, 1, user="light")]
    assert simulate(jobs, 1, "fifo").start_order() == ["j1", "j2", "j3", "k1"]
    fair = simulate(jobs, 1, "fair-share")
    assert fair.start_order() == ["j1", "k1", "j2", "j3"]
    assert fair.user_share_pct == {"heavy": 75.0, "light": 25.0}


def test_what_ifs_add_nodes_and_spot():
    doc = simulate_all(HAND, 1, 4, ["fifo"], add_nodes=1, spot_fraction=0.5)
    more = doc["what_if"]["add_nodes"]["policies"]["fifo"]
    assert more["mean_wait_s"] < doc["policies"]["fifo"]["mean_wait_s"]
    spot = doc["what_if"]["spot"]
    assert spot["jobs_moved"] >= 1 and spot["paid_hours_per_useful_hour"] > 1
    assert spot["expected_interruptions"] > 0


def test_a_job_larger_than_the_cluster_is_skipped_and_counted():
    jobs = [J("big", 0, 1, 9), J("a", 0, 5, 2), J("b", 1, 5, 8)]
    for policy in POLICIES:
        res = simulate(jobs, 8, policy)
        assert res.skipped == ("big",) and [r.job for r in res.runs] == ["a", "b"]
        assert res.summary()["jobs_skipped_too_large"] == 1
    assert simulate([J("big", 0, 1, 9)], 8, "backfill").skipped == ("big",)
    with pytest.raises(FieldError):
        simulate_all(HAND, 1, 4, ["lifo"])


def test_backfill_scans_the_whole_queue_unless_a_depth_is_given():
    """4 GPUs; r holds 2 until t=100. The head h needs 4 (shadow time 100); x1-x3 need 4 too; s
    needs 2 for 10 s and ends before the shadow time, so EASY backfill starts it at once — unless
    the scan stops (Slurm's bf_max_job_test) before reaching it."""
    jobs = [J("r", 0, 100, 2), J("h", 1, 10, 4), J("x1", 2, 10, 4), J("x2", 3, 10, 4),
            J("x3", 4, 10, 4), J("s", 5, 10, 2)]
    start = {r.job: r.start_s for r in simulate(jobs, 4, "backfill").runs}
    assert start["s"] == 5
    shallow = simulate(jobs, 4, "backfill", backfill_depth=3)
    assert {r.job: r.start_s for r in shallow.runs}["s"] > 100 and shallow.backfill_depth == 3
    assert simulate(jobs, 4, "backfill", backfill_depth=4).runs[-1].start_s == 5
    with pytest.raises(FieldError) as exc:
        simulate(jobs, 4, "backfill", backfill_depth=0)
    assert exc.value.field == "backfill_depth"


def test_spot_interruptions_count_every_instance_of_a_job():
    one = simulate_all([J("a", 0, 3600, 8)], 2, 8, ["fifo"], spot_fraction=1.0)
    two = simulate_all([J("a", 0, 3600, 16)], 2, 8, ["fifo"], spot_fraction=1.0)
    s1, s2 = one["what_if"]["spot"], two["what_if"]["spot"]
    assert s2["expected_interruptions"] > 2 * s1["expected_interruptions"] * 0.999
    assert s2["paid_hours_per_useful_hour"] > s1["paid_hours_per_useful_hour"]


def test_swf_reader_reads_processors_as_gpus(tmp_path):
    text = "; Version: 2.2\n" + "\n".join([
        swf_line(1, 0, 10, 2, 10, 7), swf_line(2, 1, 5, 4, 5, 8),
        "3 2 -1 -1 2 -1 -1 2 3 -1 5 7 -1 -1 1 -1 -1 -1",  # cancelled: no run time
    ]) + "\n"
    jobs, skipped = parse_swf(text, "w.swf")
    assert [(j.job, j.gpus, j.run_s, j.user) for j in jobs] == [("1", 2, 10, "7"), ("2", 4, 5, "8")]
    assert skipped == 1
    with pytest.raises(FileError, match=r"w.swf:2: an SWF line has 18 fields"):
        parse_swf(";\n1 2 3\n", "w.swf")


def test_csv_reader_errors_name_file_and_line(tmp_path):
    good = "job,user,submit_s,run_s,gpus,requested_s\na,u,0,10,2,20\n"
    jobs, _ = parse_csv(good, "q.csv")
    assert jobs[0].requested_s == 20
    with pytest.raises(FileError, match=r"^q.csv:3: "):
        parse_csv(good + "b,u,1,ten,1,1\n", "q.csv")
    with pytest.raises(FileError, match=r"^q.csv:1: .*missing gpus"):
        parse_csv("job,user,submit_s,run_s\n", "q.csv")
    missing = tmp_path / "none.csv"
    with pytest.raises(FileError, match="cannot read"):
        load_workload(missing)


def test_sacct_json_both_shapes():
    old = {"jobs": [{"job_id": 5, "user": "ana", "priority": 7,
                     "time": {"submission": 100, "start": 110, "end": 170, "limit": 2},
                     "tres": {"allocated": [{"type": "cpu", "count": 4},
                                            {"type": "gres", "name": "gpu", "count": 2}]}},
                    {"job_id": 6, "user": "ana", "time": {"submission": 100, "start": 0, "end": 0},
                     "tres": {"requested": [{"type": "gres", "name": "gpu", "count": 1}]}}]}
    new = {"jobs": [{"job_id": 5, "user": "ana", "priority": {"set": True, "number": 7},
                     "time": {"submission": 100, "start": 110, "end": 170,
                              "limit": {"set": True, "infinite": False, "number": 2}},
                     "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}}]}
    for doc in (old, new):
        jobs, _ = parse_sacct_json(json.dumps(doc, indent=1), "s.json")
        assert (jobs[0].job, jobs[0].gpus, jobs[0].run_s, jobs[0].requested_s, jobs[0].priority) == \
            ("5", 2, 60, 120, 7)
    with pytest.raises(FileError, match=r"^s.json:1: "):
        parse_sacct_json("{\"x\": 1}", "s.json")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fleet_tui.core.cluster.queue import POLICIES  # noqa: E402

_jobs = st.lists(st.tuples(st.integers(0, 50), st.integers(1, 30), st.integers(1, 4),
                           st.integers(0, 30), st.sampled_from([0.0, 5.0]), st.sampled_from("ab")),
                 min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(_jobs, st.sampled_from(POLICIES))
def test_every_policy_respects_capacity_and_submission(raw, policy):
    jobs = [J(str(k), s, r, g, req=r + extra, user=u, prio=p)
            for k, (s, r, g, extra, p, u) in enumerate(raw)]
    res = simulate(jobs, 4, policy)
    events = []
    for run, job in zip(res.runs, jobs):
        assert run.start_s >= run.submit_s and run.end_s == pytest.approx(run.start_s + job.run_s)
        events += [(run.start_s, job.gpus), (run.end_s, -job.gpus)]
    in_use = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts at a tie
        in_use += delta
        assert in_use <= 4
    if policy == "fifo":
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
        starts = [res.runs[i].start_s for i in order]
        assert starts == sorted(starts)


def reference_easy(jobs, total, depth=None):
    """EASY backfilling written plainly (Mu'alem & Feitelson 2001), the whole waiting queue
    scanned (or the first ``depth`` after the head), for the property test below: start times."""
    import math as m
    t0 = min(j.submit_s for j in jobs)
    pending = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
    queue, running, start = [], [], {}  # running: (end, requested end, gpus, i)
    free, now, k = total, 0.0, 0
    while k < len(pending) or queue or running:
        t_arr = jobs[pending[k]].submit_s - t0 if k < len(pending) else m.inf
        t_end = min((r[0] for r in running), default=m.inf)
        now = min(t_arr, t_end)
        for r in [r for r in running if r[0] <= now]:
            running.remove(r)
            free += r[2]
        while k < len(pending) and jobs[pending[k]].submit_s - t0 <= now:
            queue.append(pending[k])
            k += 1
        while queue and jobs[queue[0]].gpus <= free:
            i = queue.pop(0)
            free -= jobs[i].gpus
            start[i] = now
            running.append((now + jobs[i].run_s, now + max(jobs[i].requested_s, 0.0),
                            jobs[i].gpus, i))
        if len(queue) < 2 or not free:
            continue
        head = queue[0]
        avail, shadow = free, now
        ends = sorted((r[1], r[3]) for r in running)
        p = 0
        while p < len(ends) and avail < jobs[head].gpus:
            avail += jobs[ends[p][1]].gpus
            shadow = max(ends[p][0], now)
            p += 1
        while p < len(ends) and ends[p][0] <= shadow:
            avail += jobs[ends[p][1]].gpus
            p += 1
        extra = avail - jobs[head].gpus
        for i in list(queue[1:] if depth is None else queue[1:depth + 1]):
            g, req = jobs[i].gpus, max(jobs[i].requested_s, 0.0)
            if g > free or not (now + req <= shadow or g <= extra):
                continue
            if now + req > shadow:
                extra -= g
            queue.remove(i)
            free -= g
            start[i] = now
            running.append((now + jobs[i].run_s, now + req, g, i))
            if not free:
                break
    return [start[i] for i in range(len(jobs))]


_bf_jobs = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 30), st.integers(1, 4),
                              st.integers(0, 30)), min_size=1, max_size=300)


@settings(max_examples=80, deadline=None)
@given(_bf_jobs, st.sampled_from([None, 1, 3, 50]))
def test_backfill_gives_the_textbook_start_of_every_job(raw, depth):
    jobs = [J(str(k), s, r, g, req=r + extra) for k, (s, r, g, extra) in enumerate(raw)]
    res = simulate(jobs, 4, "backfill", backfill_depth=depth)
    assert [r.start_s for r in res.runs] == reference_easy(jobs, 4, depth)
