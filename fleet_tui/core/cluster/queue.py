"""Queue what-if: replay a job list on a GPU cluster under several scheduling policies.

Model. The cluster is ``nodes × gpus_per_node`` GPUs in one pool: a job needs ``gpus`` free GPUs
anywhere (node fragmentation is not modelled, so results are a lower bound on waits for jobs that
must share a node). A job runs for its recorded run time ``run_s``; schedulers only know its
*requested* time ``requested_s`` (the wall-time limit), as real ones do. Time is in seconds since the
earliest submission. The simulation is event driven: at every arrival or completion the policy starts
what it can.

Policies (``POLICIES``):

* ``fifo`` — strict first come, first served: no job starts before an earlier-submitted one, so the
  queue's head blocks everything behind it.
* ``priority`` — the same, ordered by priority (higher first), then submission.
* ``fair-share`` — the head is the next job of the user with the least GPU-seconds started so far
  (ties: submission order); it blocks like ``fifo``.
* ``backfill`` — EASY backfilling (Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995; the form
  in Mu'alem & Feitelson, IEEE TPDS 12(6), 2001): FIFO order, and when the head does not fit it gets
  a reservation at the *shadow time* (the earliest time enough GPUs free up, from the running jobs'
  requested end times); a later job may start now if it fits now and either ends (by its request)
  before the shadow time or only uses GPUs the head will not need then. The scan covers the whole
  queue (the textbook algorithm); ``backfill_depth=N`` stops it after N waiting jobs, as Slurm's
  ``bf_max_job_test`` does (Slurm's default is ``SLURM_BF_MAX_JOB_TEST`` = 500, slurm.conf(5)).
* ``preemption`` — priority order; a waiting job that does not fit may stop running jobs of strictly
  lower priority (lowest first, newest first) if that frees enough GPUs. Stopped jobs go back to the
  queue and restart from the beginning (Slurm's ``PreemptMode=REQUEUE``); their lost GPU-seconds are
  counted.

Metrics: wait = end − submit − run (for a job never stopped, start − submit); p95 by nearest rank;
bounded slowdown ``max(1, (wait + run) / max(run, 10 s))`` (Feitelson, Rudolph, Schwiegelshohn,
Sevcik & Wong, "Theory and practice in parallel job scheduling", JSSPP 1997, with the usual 10 s
bound); utilization = useful GPU-seconds / (GPUs × makespan); makespan = last end − first submit;
per-user share of useful GPU-seconds.

What-ifs (more nodes, work moved to spot) are in ``cluster.whatif``.

Speed: bench/bench_cluster.py (100,000 SWF jobs, five policies, goal <= 10 s on one core); its
figures are in docs/head-node.md. The schedule of FIFO and EASY is checked job for job against a
textbook reference (tests/cluster/test_queue_textbook.py).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import replace

from fleet_tui.core.errors import FieldError
from fleet_tui.core.records import record

POLICIES: tuple[str, ...] = ("fifo", "priority", "fair-share", "backfill", "preemption")
SLURM_BF_MAX_JOB_TEST = 500  # Slurm's default bf_max_job_test (slurm.conf(5), SchedulerParameters)
SLOWDOWN_BOUND_S = 10.0
BLOCK = 128  # backfill: queue positions per block (see _Sim.__init__)


@record
class QueueJob:
    job: str
    user: str
    submit_s: float
    run_s: float
    gpus: int
    requested_s: float  # the scheduler's estimate (wall-time limit); >= 0
    priority: float = 0.0
    where: str = ""  # "file:line" of the record, for errors


@record
class JobRun:
    job: str
    user: str
    gpus: int
    submit_s: float
    start_s: float  # the start of the run that completed
    end_s: float
    preempted: int = 0  # times it was stopped and requeued

    @property
    def wait_s(self) -> float:
        # end − submit − run: for a requeued job the final run's start, so lost runs count as wait
        return self.start_s - self.submit_s

    def to_dict(self) -> dict:
        return {"job": self.job, "user": self.user, "gpus": self.gpus, "submit_s": _r(self.submit_s),
                "start_s": _r(self.start_s), "end_s": _r(self.end_s), "wait_s": _r(self.wait_s),
                "preempted": self.preempted}


@record
class PolicyResult:
    policy: str
    gpus: int
    mean_wait_s: float
    p95_wait_s: float
    max_wait_s: float
    mean_slowdown: float
    utilization_pct: float
    makespan_s: float
    user_share_pct: dict[str, float]
    preemptions: int
    lost_gpu_s: float
    runs: tuple[JobRun, ...]  # in input order (without the skipped jobs)
    skipped: tuple[str, ...] = ()  # jobs larger than the cluster: never startable, not simulated
    backfill_depth: int | None = None  # backfill: waiting jobs scanned per pass; None: all

    def summary(self) -> dict:
        return {"mean_wait_s": _r(self.mean_wait_s), "p95_wait_s": _r(self.p95_wait_s),
                "max_wait_s": _r(self.max_wait_s), "mean_slowdown": _r(self.mean_slowdown, 3),
                "utilization_pct": _r(self.utilization_pct), "makespan_s": _r(self.makespan_s),
                "preemptions": self.preemptions, "lost_gpu_hours": _r(self.lost_gpu_s / 3600.0, 3),
                "user_share_pct": {u: _r(v) for u, v in self.user_share_pct.items()},
                "jobs_simulated": len(self.runs), "jobs_skipped_too_large": len(self.skipped),
                "skipped_jobs": list(self.skipped[:20]),
                **({"backfill_depth": self.backfill_depth} if self.policy == "backfill" else {})}

    def to_dict(self, *, with_jobs: bool = True) -> dict:
        out = self.summary()
        if with_jobs:
            out["jobs"] = [{"job": r.job, "start_s": _r(r.start_s), "end_s": _r(r.end_s)}
                           for r in self.runs]
        return out

    def start_order(self) -> list[str]:
        return [r.job for r in sorted(self.runs, key=lambda r: (r.start_s, r.submit_s))]


def _r(x: float, digits: int = 2) -> float:
    return round(x, digits)


def short_duration(s: float) -> str:
    """Seconds as the queue tables show them: 90s, 12.5m, 3.2h."""
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def check_cluster(nodes: int, gpus_per_node: int) -> int:
    if nodes < 1:
        raise FieldError("nodes", f"{{nodes}} must be at least 1, got {nodes}")
    if gpus_per_node < 1:
        raise FieldError("gpus_per_node", f"{{gpus_per_node}} must be at least 1, got {gpus_per_node}")
    return nodes * gpus_per_node


def check_policies(names: Sequence[str]) -> tuple[str, ...]:
    out = []
    for name in names:
        if name not in POLICIES:
            raise FieldError("policy", f"{{policy}} {name!r} is not a policy; allowed: "
                             + ", ".join(POLICIES))
        if name not in out:
            out.append(name)
    if not out:
        raise FieldError("policy", "{policy} names no policy; allowed: " + ", ".join(POLICIES))
    return tuple(out)


def check_backfill_depth(depth: int | None) -> int | None:
    if depth is not None and depth < 1:
        raise FieldError("backfill_depth", f"{{backfill_depth}} must be at least 1, got {depth}")
    return depth


def simulate(jobs: Sequence[QueueJob], total_gpus: int, policy: str, *,
             backfill_depth: int | None = None) -> PolicyResult:
    """Run ``jobs`` on ``total_gpus`` pooled GPUs under ``policy`` (one of ``POLICIES``). A job
    asking for more GPUs than the cluster has could never start: it is left out and counted
    (``skipped``). ``backfill_depth``: see the module docstring (None: the whole queue)."""
    check_policies([policy])
    depth = check_backfill_depth(backfill_depth)
    skipped = tuple(j.job for j in jobs if j.gpus > total_gpus)
    if skipped:
        jobs = [j for j in jobs if j.gpus <= total_gpus]
    if not jobs:
        return PolicyResult(policy, total_gpus, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, {}, 0, 0.0, (),
                            skipped, depth)
    sim = _Sim(jobs, total_gpus, policy, depth)
    sim.run()
    return replace(sim.result(), skipped=skipped, backfill_depth=depth)


class _Sim:
    """One simulation. Jobs are referred to by their position ``i`` in the input."""

    def __init__(self, jobs: Sequence[QueueJob], total: int, policy: str,
                 depth: int | None = None):
        self.jobs = jobs
        self.depth = depth
        self.total = total
        self.free = total
        self.policy = policy
        self.t0 = min(j.submit_s for j in jobs)
        n = len(jobs)
        self.submit = [j.submit_s - self.t0 for j in jobs]
        self.gpus = [j.gpus for j in jobs]
        self.run_s = [j.run_s for j in jobs]
        self.req = [max(j.requested_s, 0.0) for j in jobs]
        self.prio = [j.priority for j in jobs]
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.stops = [0] * n
        self.gen = [0] * n  # completion events of older runs are stale
        self.lost_gpu_s = 0.0
        self.done: list[tuple[float, int, int]] = []  # heap (end, gen, i)
        self.running: set[int] = set()
        # waiting jobs, by policy: a deque (fifo, backfill), a heap (priority, preemption) or
        # per-user deques (fair-share)
        self.fifo: deque[int] = deque()
        self.heap: list[tuple[float, float, int]] = []
        self.by_user: dict[str, deque[int]] = {}
        self.usage: defaultdict[str, float] = defaultdict(float)  # user -> GPU-seconds started
        self.waiting_sizes: Counter[int] = Counter()  # backfill: skip scans nothing could pass
        # backfill: the waiting queue in blocks of BLOCK positions, each with lower bounds of its
        # waiting jobs' GPUs and requested times, so a scan of the whole queue skips the blocks
        # that hold no candidate (bench/bench_cluster.py --load 1.8, 100,000 jobs: a plain scan
        # did not finish in 5 minutes; docs/head-node.md has the blocks' figures)
        self.waiting = [False] * n
        self.block_of = [0] * n
        self.blocks: list[list[int]] = []
        self.blk_lo: list[int] = []  # entries before it have left the queue
        self.blk_min_g: list[float] = []
        self.blk_min_req: list[float] = []
        self.blk_active: list[int] = []
        self.blk_first = 0  # blocks before it are empty
        # backfill: running jobs as (requested end, i), kept sorted, for the shadow time (measured:
        # re-sorting the running set per event took 19 of 34 s profiled on 100,000 jobs at 120% load)
        self.by_req_end: list[tuple[float, int]] = []

    # -- queue -------------------------------------------------------------------------------
    def enqueue(self, i: int) -> None:
        p = self.policy
        if p == "fifo":
            self.fifo.append(i)
        elif p == "backfill":
            self.waiting_sizes[self.gpus[i]] += 1
            if not self.blocks or len(self.blocks[-1]) >= BLOCK:
                self.blocks.append([])
                self.blk_lo.append(0)
                self.blk_min_g.append(math.inf)
                self.blk_min_req.append(math.inf)
                self.blk_active.append(0)
            b = len(self.blocks) - 1
            self.blocks[b].append(i)
            self.block_of[i] = b
            self.waiting[i] = True
            self.blk_active[b] += 1
            self.blk_min_g[b] = min(self.blk_min_g[b], self.gpus[i])
            self.blk_min_req[b] = min(self.blk_min_req[b], self.req[i])
        elif p == "fair-share":
            self.by_user.setdefault(self.jobs[i].user, deque()).append(i)
        else:
            heapq.heappush(self.heap, (-self.prio[i], self.submit[i], i))

    def launch(self, i: int, now: float) -> None:
        self.free -= self.gpus[i]
        self.start[i] = now
        self.running.add(i)
        self.usage[self.jobs[i].user] += self.gpus[i] * self.run_s[i]
        heapq.heappush(self.done, (now + self.run_s[i], self.gen[i], i))
        if self.policy == "backfill":
            bisect.insort(self.by_req_end, (now + self.req[i], i))

    def stopped(self, i: int) -> None:
        """``i`` left the running set (finished or preempted)."""
        self.free += self.gpus[i]
        self.running.discard(i)
        if self.policy == "backfill":
            entry = (self.start[i] + self.req[i], i)
            k = bisect.bisect_left(self.by_req_end, entry)
            del self.by_req_end[k]

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> None:
        order = sorted(range(len(self.jobs)), key=lambda i: (self.submit[i], i))
        k, n = 0, len(order)
        done, submit = self.done, self.submit
        while k < n or done:
            t_arr = submit[order[k]] if k < n else math.inf
            t_end = done[0][0] if done else math.inf
            now = min(t_arr, t_end)
            while done and done[0][0] <= now:  # completions first: they free GPUs
                _, gen, i = heapq.heappop(done)
                if gen != self.gen[i]:
                    continue
                self.end[i] = now
                self.stopped(i)
            while k < n and submit[order[k]] <= now:
                self.enqueue(order[k])
                k += 1
            self.schedule(now)

    def schedule(self, now: float) -> None:
        p = self.policy
        if p == "fifo":
            q = self.fifo
            while q and self.gpus[q[0]] <= self.free:
                self.launch(q.popleft(), now)
        elif p == "backfill":
            self.backfill(now)
        elif p == "fair-share":
            self.fair_share(now)
        else:
            h = self.heap
            while h:
                i = h[0][2]
                if self.gpus[i] > self.free and not (p == "preemption" and self.preempt_for(i, now)):
                    break
                heapq.heappop(h)
                self.launch(i, now)

    def fair_share(self, now: float) -> None:
        queues, usage = self.by_user, self.usage
        while queues:
            user = min(queues, key=lambda u: (usage[u], self.submit[queues[u][0]], queues[u][0]))
            q = queues[user]
            i = q[0]
            if self.gpus[i] > self.free:
                return
            q.popleft()
            if not q:
                del queues[user]
            self.launch(i, now)

    def _leave_queue(self, i: int) -> None:
        self.waiting[i] = False
        self.blk_active[self.block_of[i]] -= 1
        self.waiting_sizes[self.gpus[i]] -= 1

    def _head(self) -> int | None:
        """The first waiting job (queue order = submission order)."""
        blocks, lo, active, waiting = self.blocks, self.blk_lo, self.blk_active, self.waiting
        b = self.blk_first
        while b < len(blocks) - 1 and not active[b]:  # the last block may still grow
            b += 1
        self.blk_first = b
        if b == len(blocks) or not active[b]:
            return None
        entries, k = blocks[b], lo[b]
        while not waiting[entries[k]]:
            k += 1
        lo[b] = k
        return entries[k]

    def backfill(self, now: float) -> None:
        gpus, sizes = self.gpus, self.waiting_sizes
        head = self._head()
        while head is not None and gpus[head] <= self.free:
            self._leave_queue(head)
            self.launch(head, now)
            head = self._head()
        if head is None or not self.free:
            return
        sizes[gpus[head]] -= 1  # the head is not a backfill candidate
        smallest = min((g for g, c in sizes.items() if c > 0), default=None)
        sizes[gpus[head]] += 1
        if smallest is None or smallest > self.free:
            return
        # shadow time: when, by requested end times, enough GPUs are free for the head
        need, avail, shadow = gpus[head], self.free, now
        ends = self.by_req_end
        k = 0
        while k < len(ends) and avail < need:  # a job past its request is taken to end now
            end, r = ends[k]
            avail += gpus[r]
            shadow = end if end > now else now
            k += 1
        while k < len(ends) and ends[k][0] <= shadow:  # and all that end at the same moment
            avail += gpus[ends[k][1]]
            k += 1
        extra = avail - need  # GPUs the head will not need at the shadow time
        req, waiting = self.req, self.waiting
        budget = math.inf if self.depth is None else self.depth  # waiting jobs after the head
        for b in range(self.blk_first, len(self.blocks)):
            active = self.blk_active[b]
            if not active:
                continue
            in_block = active - (1 if self.block_of[head] == b else 0)
            min_g = self.blk_min_g[b]
            # now + req is monotonic in req, so the bound is tested as the jobs are
            if in_block <= budget and (min_g > self.free or (
                    now + self.blk_min_req[b] > shadow and min_g > extra)):
                budget -= in_block  # no job in this block can start: skipped whole
                continue
            entries = self.blocks[b]
            whole = True  # every entry looked at: the block's bounds can be made exact
            new_g, new_req = math.inf, math.inf
            for pos in range(self.blk_lo[b], len(entries)):
                i = entries[pos]
                if not waiting[i] or i == head:
                    continue
                if budget <= 0:
                    whole = False
                    break
                budget -= 1
                g = gpus[i]
                if g <= self.free and (now + req[i] <= shadow or g <= extra):
                    if now + req[i] > shadow:
                        extra -= g
                    self._leave_queue(i)
                    self.launch(i, now)
                    if not self.free:
                        whole = False
                        break
                    continue
                new_g = min(new_g, g)
                new_req = min(new_req, req[i])
            if whole:
                self.blk_min_g[b], self.blk_min_req[b] = new_g, new_req
            if budget <= 0 or not self.free or self.free < smallest:
                return

    def preempt_for(self, i: int, now: float) -> bool:
        """Stop lower-priority running jobs so ``i`` fits; False (and nothing stopped) if it can't."""
        victims = sorted((r for r in self.running if self.prio[r] < self.prio[i]),
                         key=lambda r: (self.prio[r], -self.start[r], -r))
        freed, chosen = self.free, []
        for r in victims:
            if freed >= self.gpus[i]:
                break
            chosen.append(r)
            freed += self.gpus[r]
        if freed < self.gpus[i]:
            return False
        for r in chosen:
            self.stopped(r)
            self.gen[r] += 1
            self.stops[r] += 1
            self.lost_gpu_s += self.gpus[r] * (now - self.start[r])
            self.usage[self.jobs[r].user] -= self.gpus[r] * (self.run_s[r] - (now - self.start[r]))
            self.start[r] = math.nan
            heapq.heappush(self.heap, (-self.prio[r], self.submit[r], r))
        return True

    # -- results -----------------------------------------------------------------------------
    def result(self) -> PolicyResult:
        runs, waits, slow = [], [], []
        share: defaultdict[str, float] = defaultdict(float)
        useful = 0.0
        for i, j in enumerate(self.jobs):
            run = self.run_s[i]
            wait = self.end[i] - self.submit[i] - run
            runs.append(JobRun(j.job, j.user, j.gpus, self.submit[i], self.start[i], self.end[i],
                               self.stops[i]))
            waits.append(wait)
            slow.append(max(1.0, (wait + run) / max(run, SLOWDOWN_BOUND_S)))
            share[j.user] += j.gpus * run
            useful += j.gpus * run
        makespan = max(self.end)
        ordered = sorted(waits)
        p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
        util = 100.0 * useful / (self.total * makespan) if makespan > 0 else 0.0
        shares = {u: 100.0 * v / useful if useful else 0.0 for u, v in sorted(share.items())}
        return PolicyResult(self.policy, self.total, sum(waits) / len(waits), p95, ordered[-1],
                            sum(slow) / len(slow), util, makespan, shares,
                            sum(self.stops), self.lost_gpu_s, tuple(runs))

