"""Fleet scale: CPU per refresh for 128 nodes x 8 GPUs = 1,024 devices, or --nodes 512 = 4,096
(target <= 200 ms CPU per refresh, and the UI's event loop never blocked more than 50 ms).

    .venv/bin/python bench/bench_fleet.py [--nodes 128] [--gpus 8] [--refreshes 20] [--real]
    .venv/bin/python bench/bench_fleet.py --nodes 4096 --refreshes 5

0. Past 4,096 GPUs (``--nodes 4096``: 32,768) a refresh is the device count (once a minute) and one
   server-side aggregate query (``prometheus.aggregate``); a separate process answers both as
   Prometheus would for the canned fleet, and this process's CPU per refresh through the product
   path (the source, the engine, the FleetView, the Fleet pane's texts) and the answer's size are
   measured. ``--aggregate`` forces it at a smaller size.

1. Canned: a separate process serves a Prometheus /api/v1/query answer for the whole fleet (every
   metric PrometheusSource asks for, with dcgm-exporter's labels, values from the real H200 trace,
   fresh sample timestamps each time; compact JSON with sorted labels and string values, as
   Prometheus writes it), so only fleet-tui's own CPU is measured in this process:
   HTTP + JSON parse + mapping to DeviceSnapshots ("query+parse"), then the MonitorEngine with the
   fleet windowing policy (history, the single-box analysis on every device's window, the alert
   rules) + FleetView roll-ups ("analysis"). First with every device fresh on every refresh (the
   worst case), then with each node scraped every --scrape seconds (15), where the UI side is also
   measured: the real app (headless Textual, ``fleet_app_loop.py``) on the fleet pane, its longest
   event-loop block per refresh with the engine's analysis off the loop (now) and on it (before).
2. --real: the same fleet as DCGM-format exporters (another process) scraped every --scrape
   seconds by a real Prometheus on 127.0.0.1, queried like a user's Prometheus, then the app on it.

CPU is ``time.process_time()`` of this process (all its threads); wall is elapsed time.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleet_tui.core.fleet import FleetViews  # noqa: E402
from fleet_tui.core.monitor.engine import MonitorEngine  # noqa: E402
from fleet_tui.core.monitor.sources.prometheus import (  # noqa: E402
    DYNAMIC_NAMES,
    PROBE_LABEL,
    STATIC_NAMES,
    PrometheusSource,
)
from fleet_tui.core.monitor.windowing import FleetWindowPolicy  # noqa: E402

TS_MARK = "__TS__"


def _fleet_templates(n_nodes: int, gpus: int, variants: int = 4):
    """Canned answers for the fleet, as Prometheus answers PrometheusSource's queries: per variant
    and node, the text of its moving-metric series (with the identity labels ``max by`` keeps) and
    of its sample-time probes and ``up``; plus the static answer (limits, maxima, model names).
    Series texts are compact JSON with sorted labels and string values, as Prometheus writes them;
    ``__TS__`` is the evaluation time and ``@Nn@`` node n's last scrape time, filled per answer."""
    from tests.fleet.dcgm_replay import dcgm_values, load_frames, phase_runs

    runs = [r for p, r in phase_runs(load_frames()).items() if not p.startswith("sizing")]
    dynamic, static = set(DYNAMIC_NAMES), set(STATIC_NAMES) | {"DCGM_FI_DEV_FB_USED"}

    def text(item: dict) -> str:
        item["metric"] = dict(sorted(item["metric"].items()))
        return json.dumps(item, separators=(",", ":")).replace(f'"{TS_MARK}"', TS_MARK)

    metric_chunks: list[list[str]] = []  # [variant][node]
    probe_chunks: list[str] = []  # [node]: probes + up
    static_items: list[str] = []
    for v in range(variants):
        per_node = []
        for n in range(n_nodes):
            run = runs[n % len(runs)]
            host, inst = f"gpu-node-{n:03d}", f"10.0.{n // 250}.{n % 250}:9400"
            series, probes = [], []
            for g in range(gpus):
                frame = run[(3 * n + 5 * g + 7 * v) % len(run)]
                ids = {"gpu": str(g), "UUID": f"GPU-{n:08x}-0000-4000-8000-{g:012x}",
                       "Hostname": host, "instance": inst}
                for name, value in dcgm_values(frame).items():
                    if name in dynamic:
                        series.append(text({"metric": {"__name__": name, **ids},
                                            "value": [TS_MARK, value]}))
                    if v == 0 and name in static:
                        static_items.append(text({"metric": {"__name__": name, **ids,
                                                             "modelName": frame.name},
                                                  "value": [TS_MARK, value]}))
                probes.append(text({"metric": {**ids, PROBE_LABEL: "nvidia"},
                                    "value": [TS_MARK, f"@N{n}@"]}))
            per_node.append(",".join(series))
            if v == 0:
                probes.append(text({"metric": {"__name__": "up", "instance": inst,
                                               "job": "dcgm-exporter"}, "value": [TS_MARK, "1"]}))
                probe_chunks.append(",".join(probes))
        metric_chunks.append(per_node)
    return metric_chunks, probe_chunks, _answer(static_items)


def _answer(chunks) -> str:
    return ('{"status":"success","data":{"resultType":"vector","result":['
            + ",".join(c for c in chunks if c) + "]}}")


def _serve_canned(port_q, n_nodes: int, gpus: int, scrape_s: float, interval_s: float) -> None:
    """Answer like a Prometheus whose targets are scraped every ``scrape_s`` seconds, each node at
    its own offset (0 = every answer is a fresh reading of every device: the worst case). Its clock
    advances ``interval_s`` per refresh, not with the wall clock, so the share of nodes scraped
    between two refreshes is the same on a loaded machine as on an idle one. The three
    query shapes PrometheusSource sends are told apart and answered as Prometheus would: the full
    refresh, the sample-time probes, and the metrics of GPUs scraped after a given time."""
    import re
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    node_mark = re.compile(r'"@N(\d+)@"')
    since_re = re.compile(r"> ([0-9.]+)\)$")
    metric_chunks, probe_chunks, static_template = _fleet_templates(n_nodes, gpus)
    count = [0]
    start = time.time()
    sizes = {"full": len(_answer([*metric_chunks[0], *probe_chunks])),
             "probes": len(_answer(probe_chunks))}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            form = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.startswith("/api/v1/query"):
                self.send_error(404)
                return
            query = urllib.parse.parse_qs(form.decode()).get("query", [""])[0]
            if "modelName" not in query and " and on (" not in query:
                count[0] += 1  # a refresh begins (the full query, or the probes)
            now = start + count[0] * interval_s
            ts = f"{now - 0.5:.3f}"
            if scrape_s > 0:  # each node's last scrape, staggered across the interval
                stamps = [now - ((now + n * scrape_s / n_nodes) % scrape_s) for n in range(n_nodes)]
            else:
                stamps = [now - 0.5] * n_nodes
            metrics = metric_chunks[count[0] % len(metric_chunks)]
            if "modelName" in query:  # the static query
                text = static_template
            elif " and on (" in query:  # the GPUs scraped since
                since = float(since_re.search(query).group(1))
                text = _answer(metrics[n] for n in range(n_nodes) if stamps[n] > since)
            elif "max by (__name__" in query:  # the full refresh
                text = _answer([*metrics, *probe_chunks])
            else:  # the probes
                text = _answer(probe_chunks)
            text = text.replace(TS_MARK, ts)
            body = node_mark.sub(lambda m: f'"{stamps[int(m.group(1))]:.3f}"', text).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_q.put((srv.server_address[1], sizes["full"], sizes["probes"], len(static_template), start))
    srv.serve_forever()


class VirtualClock:
    """The canned server's clock, shared with the source: one interval per refresh."""

    def __init__(self, start: float, interval_s: float):
        self.start, self.interval_s, self.refreshes = start, interval_s, 0

    def tick(self) -> None:
        self.refreshes += 1

    def __call__(self) -> float:
        return self.start + self.refreshes * self.interval_s


def _measure(src: PrometheusSource, refreshes: int, interval_s: float, warmup: int = 3,
             gc_pause: bool = False, clock: VirtualClock | None = None):
    # the exporter's engine: fleet windowing, the bundled alert rules, priced per node
    engine = MonitorEngine(src, interval_s=interval_s, price=False, policy=FleetWindowPolicy())
    views = FleetViews({"*": 98.32})
    rows = []
    for i in range(warmup + refreshes):
        c0, w0 = time.process_time(), time.perf_counter()
        if gc_pause:  # the old trick, for comparison: no collection during the refresh
            gc.disable()
        try:
            if clock is not None:
                clock.tick()
            snap = src.sample_blocking()
        finally:
            gc.enable()
        c1, w1 = time.process_time(), time.perf_counter()
        view = views(engine.process(snap))
        c2, w2 = time.process_time(), time.perf_counter()
        if snap.errors and i >= warmup:
            print("  source errors:", snap.errors[:2])
        if i >= warmup:
            rows.append(((c1 - c0) * 1e3, (c2 - c1) * 1e3, (w1 - w0) * 1e3, (w2 - w1) * 1e3))
        rest = interval_s - (time.perf_counter() - w0)
        if rest > 0:
            time.sleep(rest)
    return rows, view


def _app_report(url: str, refreshes: int, interval_s: float,
                clock: VirtualClock | None = None, before: bool = True) -> None:
    """The UI side, side by side in this run: the real app on the fleet pane with the engine's
    analysis on the loop (before; ``before=False`` skips it) and off it (now), each in a fresh
    process (a second app in the same process would carry the first one's objects into every
    garbage collection)."""
    for on_loop in (True, False) if before else (False,):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        start = clock() if clock is not None else None
        proc = ctx.Process(target=_app_child, args=(q, url, start, refreshes, interval_s, on_loop))
        proc.start()
        try:
            run = q.get(timeout=300 + 3 * (refreshes + 2) * interval_s)  # a long --app-refreshes run
        finally:
            proc.join(60)
        if clock is not None:
            clock.refreshes += refreshes + 2  # the child's refreshes moved the server's clock
        blocks, own = sorted(run.blocks_ms), sorted(run.loop_cpu_ms)
        how = "analysis on the loop (before)" if on_loop else "analysis off the loop (now)"
        print(f"  app, {how}, {run.devices} devices, load avg {os.getloadavg()[0]:.1f}:\n"
              f"    UI loop's longest block per refresh (target <= 50 ms): wall median "
              f"{statistics.median(blocks):6.1f}  max {blocks[-1]:6.1f} ms; its own CPU median "
              f"{statistics.median(own):6.1f}  max {own[-1]:6.1f} ms\n"
              f"    blocks over 50 ms: {sum(b > 50 for b in run.blocks_ms)} of {len(blocks)} "
              f"refreshes{_where_over(run.blocks_ms)}; full garbage collections after the "
              f"first view: {run.full_collections}\n"
              f"    app CPU per refresh (all threads, Textual included) "
              f"{run.cpu_ms_per_refresh:6.1f} ms", flush=True)


def _where_over(blocks: list[float], limit: float = 50.0) -> str:
    over = [f"#{i + 1} {b:.0f} ms" for i, b in enumerate(blocks) if b > limit]
    return f" ({', '.join(over[:8])}{', …' if len(over) > 8 else ''})" if over else ""


def _app_child(q, url: str, clock_start: float | None, refreshes: int, interval_s: float,
               on_loop: bool) -> None:
    from fleet_app_loop import app_loop_blocks

    def make_source() -> PrometheusSource:
        if clock_start is None:
            return PrometheusSource(url, env={}, timeout_s=30)
        clock = VirtualClock(clock_start, interval_s)
        return _with_clock(PrometheusSource(url, env={}, timeout_s=30, clock=clock), clock)

    q.put(app_loop_blocks(make_source, refreshes, interval_s, analysis_on_loop=on_loop))


def _with_clock(src: PrometheusSource, clock: VirtualClock) -> PrometheusSource:
    """The source with the canned server's clock moved one interval per refresh."""
    read = src.sample_blocking

    def sample_blocking():
        clock.tick()
        return read()

    src.sample_blocking = sample_blocking
    return src


def _report(title: str, rows, view) -> None:
    def stats(col):
        vals = [r[col] for r in rows]
        vals.sort()
        p95 = vals[min(len(vals) - 1, int(round(0.95 * (len(vals) - 1))))]
        return f"median {statistics.median(vals):6.1f}  p95 {p95:6.1f}  max {vals[-1]:6.1f}"

    total = sorted(r[0] + r[1] for r in rows)
    print(f"\n{title}: {view.device_count} devices on {view.node_count} nodes, "
          f"{len(rows)} refreshes")
    print(f"  CPU ms  query+parse  {stats(0)}")
    print(f"  CPU ms  analysis     {stats(1)}")
    print(f"  CPU ms  total        median {statistics.median(total):6.1f}  max {total[-1]:6.1f}"
          f"   (target <= 200)")
    print(f"  wall ms query+parse  {stats(2)}")
    print(f"  wall ms analysis     {stats(3)}")
    counts: dict[str, int] = {}
    for d in view.offenders:
        counts[d.primary] = counts.get(d.primary, 0) + 1
    print(f"  fleet: utilization {view.utilization_pct:.0f}%, idle {view.idle_devices} devices "
          f"(${view.idle_usd_per_hour:,.0f}/h), primaries {dict(sorted(counts.items()))}")


def bench_canned(n_nodes: int, gpus: int, refreshes: int, interval_s: float,
                 scrape_s: float = 0.0, baseline: bool = False, app: bool = True,
                 app_refreshes: int | None = None, app_before: bool = True) -> None:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve_canned, args=(q, n_nodes, gpus, scrape_s, interval_s),
                       daemon=True)
    proc.start()
    try:
        port, size, probe_size, static_size, start = q.get(timeout=300)
        clock = VirtualClock(start, interval_s)
        print(f"canned answers: {size / 1e6:.1f} MB JSON for a full refresh, "
              f"{probe_size / 1e6:.1f} MB for the sample-time probes, {static_size / 1e6:.1f} MB "
              "for the static facts (read once a minute)")
        what = (f"each node scraped every {scrape_s:g} s" if scrape_s
                else "every device a fresh reading on every refresh (worst case)")
        if baseline:  # the previous way, in the same run: one full query, gc paused
            old = PrometheusSource(f"http://127.0.0.1:{port}", env={}, timeout_s=30,
                                   delta_refresh=False, clock=clock)
            rows, view = _measure(old, refreshes, interval_s, gc_pause=True, clock=clock)
            _report(f"BEFORE (full query each refresh, gc paused), {what}", rows, view)
        src = PrometheusSource(f"http://127.0.0.1:{port}", env={}, timeout_s=30, clock=clock)
        rows, view = _measure(src, refreshes, interval_s, clock=clock)
        _report(f"canned Prometheus answer, {what}", rows, view)
        if app:
            _app_report(f"http://127.0.0.1:{port}", app_refreshes or max(3, refreshes // 2),
                        interval_s, clock, before=app_before)
    finally:
        proc.terminate()
        proc.join(10)


def _aggregate_answers(n_nodes: int, gpus: int, worst: int, variants: int = 4) -> list[str]:
    """What Prometheus answers ``build_aggregate_query`` for the canned fleet (the same readings
    as ``_fleet_templates``; 8 nodes per ``hpc_job``), per variant: compact JSON, sorted labels,
    string values, as Prometheus writes it; ``__TS__`` is the evaluation time."""
    from fleet_tui.core.fleet import IDLE_UTIL_MAX_PCT
    from fleet_tui.core.monitor.sources.prometheus.aggregate import (
        AGG_LABEL,
        IDLE_POWER_W,
        JOB_LABEL,
        MEM_FULL_FRAC,
        NODE_KEY,
        POWER_CAP_BITS,
        THERMAL_BITS,
    )
    from tests.fleet.dcgm_replay import load_frames, phase_runs

    runs = [r for p, r in phase_runs(load_frames()).items() if not p.startswith("sizing")]

    def item(part: str, value: float, **labels: str) -> str:
        metric = dict(sorted({AGG_LABEL: part, **labels}.items()))
        return json.dumps({"metric": metric, "value": [TS_MARK, f"{value:g}"]},
                          separators=(",", ":")).replace(f'"{TS_MARK}"', TS_MARK)

    answers = []
    for v in range(variants):
        chunks: list[str] = []
        devices, jobs = [], {}
        counts = {"mem_full": 0, "idle_powered": 0, "power_capped": 0, "thermal": 0}
        for n in range(n_nodes):
            run, host = runs[n % len(runs)], f"gpu-node-{n:03d}"
            utils, sms, idle = [], [], 0
            power = used = total_mib = 0.0
            for g in range(gpus):
                d = run[(3 * n + 5 * g + 7 * v) % len(run)]
                power += d.power_w or 0.0
                used += (d.mem_used_bytes or 0) / 2**20
                total_mib += (d.mem_total_bytes or 0) / 2**20
                util = float(int(d.gpu_util_pct or 0))
                sm = None if d.sm_active_pct is None else d.sm_active_pct / 100.0
                is_idle = util < IDLE_UTIL_MAX_PCT and (sm is None or sm < IDLE_UTIL_MAX_PCT / 100)
                utils.append(util)
                sms += [sm] if sm is not None else []
                idle += is_idle
                devices.append((util, host, g))
                job = jobs.setdefault(f"job-{n // 8}", [0, 0.0, 0])
                job[0], job[1], job[2] = job[0] + 1, job[1] + util, job[2] + is_idle
                if d.mem_total_bytes and (d.mem_used_bytes or 0) / d.mem_total_bytes >= MEM_FULL_FRAC:
                    counts["mem_full"] += 1
                counts["idle_powered"] += is_idle and (d.power_w or 0) > IDLE_POWER_W
                reasons = d.clock_event_reasons or 0
                counts["power_capped"] += bool(reasons & sum(POWER_CAP_BITS))
                counts["thermal"] += bool(reasons & sum(THERMAL_BITS))
            node = {NODE_KEY: host}
            chunks += [item("node_devices", gpus, **node), item("node_util", sum(utils) / gpus, **node),
                       item("node_power", power, **node), item("node_mem_used", used, **node),
                       item("node_mem_total", total_mib, **node)]
            if idle:
                chunks.append(item("node_idle", idle, **node))
            if sms:
                chunks.append(item("node_sm", sum(sms) / len(sms), **node))
        for name, (count, total, idle) in jobs.items():
            chunks += [item("job_devices", count, **{JOB_LABEL: name}),
                       item("job_util", total / count, **{JOB_LABEL: name}),
                       item("job_nodes", (count + gpus - 1) // gpus, **{JOB_LABEL: name})]
            if idle:
                chunks.append(item("job_idle", idle, **{JOB_LABEL: name}))
        for util, host, g in sorted(devices)[:worst]:
            chunks.append(item("worst", util, Hostname=host, UUID=f"GPU-{g:08x}", gpu=str(g),
                               instance="10.0.0.1:9400", **{NODE_KEY: host}))
        chunks += [item(f"count_{k}", c) for k, c in counts.items() if c]
        answers.append(_answer(chunks))
    return answers


def serve_queries(port_q, answer) -> None:
    """A stand-in Prometheus on 127.0.0.1: each POSTed query is answered with ``answer(query)``,
    its timestamps made fresh; the port goes to ``port_q``."""
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            form = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            query = urllib.parse.parse_qs(form.decode()).get("query", [""])[0]
            body = answer(query).replace(TS_MARK, f"{time.time():.3f}").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_q.put(srv.server_address[1])
    srv.serve_forever()


def _serve_aggregate(port_q, n_nodes: int, gpus: int, worst: int) -> None:
    """Answer ``build_aggregate_query`` as Prometheus would for the canned fleet (a new variant,
    fresh timestamps, each refresh)."""
    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGG_LABEL

    answers = _aggregate_answers(n_nodes, gpus, worst)
    devices = _answer([f'{{"metric":{{}},"value":[{TS_MARK},"{n_nodes * gpus}"]}}'])
    count = [0]

    def answer(query: str) -> str:
        if AGG_LABEL in query:  # the roll-ups
            count[0] += 1
            return answers[count[0] % len(answers)]
        return devices  # the device count (once a minute)

    serve_queries(port_q, answer)


def bench_aggregate(n_nodes: int, gpus: int, refreshes: int, worst: int = 50,
                    interval_s: float = 2.0) -> None:
    """Fleet scale past the threshold, the product path: ``PrometheusSource`` (it counts the
    devices, finds the fleet past ``--aggregate-above`` and reads the server's roll-ups), the
    ``MonitorEngine`` with the fleet policy, the ``FleetViews`` view every front end renders, then
    what the Fleet pane's worker makes of it (every node's row, the summary, grid and worst-device
    texts). This process's CPU per refresh (target <= 300 ms) and the answer's size (<= 5 MB)."""
    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGGREGATE_ABOVE_DEVICES
    from fleet_tui.ui.fleet import grid_markup, node_row, offenders_markup, summary_markup

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve_aggregate, args=(q, n_nodes, gpus, worst), daemon=True)
    proc.start()
    try:
        url = f"http://127.0.0.1:{q.get(timeout=300)}"
        threshold = min(AGGREGATE_ABOVE_DEVICES, n_nodes * gpus - 1)
        src = PrometheusSource(url, env={}, timeout_s=30, aggregate_above=threshold,
                               worst_devices=worst)
        engine = MonitorEngine(src, interval_s=interval_s, price=False, policy=FleetWindowPolicy())
        views = FleetViews({"*": 98.32})
        rows, sizes, view = [], [], None
        for i in range(refreshes + 1):  # the first one warms the connection and imports
            c0 = time.process_time()
            snap = src.sample_blocking()
            c1 = time.process_time()
            view = views(engine.process(snap))
            c2 = time.process_time()
            texts = ([node_row(n) for n in view.nodes], summary_markup(view), grid_markup(view),
                     offenders_markup(view.offenders, view.ages))
            c3 = time.process_time()
            if snap.errors or snap.aggregate is None:
                raise SystemExit(f"not aggregated: {snap.errors or snap.message}")
            if i:
                rows.append(((c1 - c0) * 1e3, (c2 - c1) * 1e3, (c3 - c2) * 1e3))
                sizes.append(snap.aggregate.answer_bytes)
            del texts
        assert view is not None and view.aggregate is not None

        def stats(col: int) -> str:
            vals = sorted(r[col] for r in rows)
            return f"median {statistics.median(vals):6.1f}  max {vals[-1]:6.1f}"

        total = sorted(sum(r) for r in rows)
        print(f"\naggregated on the server (past --aggregate-above {threshold}): "
              f"{view.device_count} devices on {view.node_count} nodes, {len(view.jobs)} jobs, "
              f"{len(view.offenders)} least-used devices, {refreshes} refreshes")
        print(f"  CPU ms  source (HTTP, parse, roll-ups)    {stats(0)}")
        print(f"  CPU ms  engine + FleetView                 {stats(1)}")
        print(f"  CPU ms  Fleet pane texts ({view.node_count} rows)      {stats(2)}")
        print(f"  CPU ms  total per refresh                  median "
              f"{statistics.median(total):6.1f}  max {total[-1]:6.1f}   (target <= 300)")
        print(f"  answer size                             {max(sizes) / 1e6:6.2f} MB   "
              "(target <= 5)")
        print(f"  fleet: utilization {view.utilization_pct or 0:.0f}%, idle {view.idle_devices} "
              f"devices (${view.idle_usd_per_hour:,.0f}/h), counts {dict(view.aggregate.counts)}")
    finally:
        proc.terminate()
        proc.join(10)


def _serve_exporters(port_q, n_nodes: int, gpus: int) -> None:
    from tests.fleet.dcgm_replay import ReplayFleet, make_nodes

    fleet = ReplayFleet(make_nodes(n_nodes, gpus))
    port_q.put(fleet.targets)
    while True:
        time.sleep(3600)


def bench_real(n_nodes: int, gpus: int, refreshes: int, interval_s: float,
               scrape_s: float = 15.0) -> None:
    from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

    if PROMETHEUS is None:
        print("\n--real: the prometheus binary is not installed; skipped")
        return
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve_exporters, args=(q, n_nodes, gpus), daemon=True)
    proc.start()
    prom = None
    try:
        targets = q.get(timeout=120)
        prom = PrometheusServer(targets, scrape_interval=f"{scrape_s:g}s")
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == n_nodes * gpus, 60,
                   0.5, "every exporter scraped")
        src = PrometheusSource(prom.url, env={}, timeout_s=30)
        rows, view = _measure(src, refreshes, interval_s)
        _report(f"real Prometheus scraping DCGM-format exporters every {scrape_s:g} s", rows, view)
        _app_report(prom.url, max(3, refreshes // 2), interval_s)
    finally:
        if prom is not None:
            prom.close()
        proc.terminate()
        proc.join(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    ap.add_argument("--scrape", type=float, default=15.0,
                    help="scrape interval of the second canned run (default 15 s)")
    ap.add_argument("--real", action="store_true", help="also through a real Prometheus")
    ap.add_argument("--baseline", action="store_true",
                    help="also measure the previous way (one full query per refresh, gc paused)")
    ap.add_argument("--app-refreshes", type=int, default=None,
                    help="refreshes of the real app on the fleet pane (default: half of "
                         "--refreshes; 320 at 2 s covers the 10-minute history filling up)")
    ap.add_argument("--app-now-only", action="store_true",
                    help="run the app only as it is now (not also with the analysis on the loop)")
    ap.add_argument("--aggregate", action="store_true",
                    help="only the server-side aggregate refresh, at any size (a fleet past "
                         "4,096 GPUs is read that way anyway)")
    ap.add_argument("--per-device", action="store_true",
                    help="past 4,096 GPUs, measure the per-device read all the same")
    ap.add_argument("--skip-worst", action="store_true",
                    help="skip the every-device-fresh run (only --scrape)")
    args = ap.parse_args()
    print(f"fleet bench: {args.nodes} nodes x {args.gpus} GPUs = {args.nodes * args.gpus} devices, "
          f"refresh every {args.interval:g} s; python {sys.version.split()[0]}")
    from fleet_tui.core.monitor.sources.prometheus.aggregate import AGGREGATE_ABOVE_DEVICES

    if args.aggregate or (args.nodes * args.gpus > AGGREGATE_ABOVE_DEVICES and not args.per_device):
        bench_aggregate(args.nodes, args.gpus, args.refreshes, interval_s=args.interval)
        return
    if not args.skip_worst:
        bench_canned(args.nodes, args.gpus, args.refreshes, args.interval, baseline=args.baseline,
                     app=False)
    if args.scrape > 0:
        bench_canned(args.nodes, args.gpus, args.refreshes, args.interval, args.scrape,
                     baseline=args.baseline, app_refreshes=args.app_refreshes,
                     app_before=not args.app_now_only)
    if args.real:
        bench_real(args.nodes, args.gpus, args.refreshes, args.interval, args.scrape)


if __name__ == "__main__":
    main()
