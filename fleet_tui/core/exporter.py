"""fleet-tui's own metrics for Prometheus/Grafana: what it derives and the exporters do not.

dcgm-exporter already publishes raw readings; this publishes the *conclusions*: the diagnosis of
each device (one series per active kind, with its confidence, and its evidence, each value in its
unit), efficiency, cost per hour, idle cost and waste, data age, and active alerts, per device,
per node and fleet-wide. Served by
prometheus-client on loopback by default (``fleet-tui export --prometheus``).

The one ``MonitorEngine`` (fleet windowing policy, the user's alert rules) samples the source (any
``--source``: a Prometheus fleet, or this box's NVML); the exporter subscribes to it, turns each
tick into an immutable ``FleetView`` and the alert rules the engine holds now, and swaps them in;
scrapes read the latest through a custom collector, so a scrape never waits for a refresh and
never sees half of one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from fleet_tui.core.errors import FieldError
from fleet_tui.core.fleet import FleetView, FleetViews, Prices
from fleet_tui.core.monitor.alerts import AlertEvaluator
from fleet_tui.core.monitor.analysis.evidence import evidence_values
from fleet_tui.core.monitor.engine import MonitorEngine, Tick
from fleet_tui.core.monitor.windowing import FleetWindowPolicy

if TYPE_CHECKING:  # prometheus_client loads when the exporter runs, not when the CLI starts
    from prometheus_client.core import GaugeMetricFamily

PREFIX = "fleet_tui"
DEVICE_LABELS = ("node", "gpu", "uuid", "name")


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(bind: str, allow_remote: bool) -> None:
    """Loopback unless the user explicitly allows other interfaces (the metrics name hosts and
    costs; anyone who can reach the port reads them)."""
    if not is_loopback(bind) and not allow_remote:
        shown = bind.replace("{", "{{").replace("}", "}}")  # the value, not a field
        raise FieldError("bind", f"{{bind}} {shown}: not a loopback address. fleet-tui serves its "
                         "metrics on 127.0.0.1 (or ::1) by default; add {allow_remote} to listen "
                         f"on {shown} on purpose.")


class FleetCollector:
    """prometheus-client custom collector over the latest ``FleetView`` (and alerts)."""

    def __init__(self, local_node: str | None = None):
        self.view: FleetView | None = None
        self.alerts: tuple[dict[str, Any], ...] = ()
        self.refresh_seconds: float | None = None
        self.refreshes = 0
        self.idle_usd_total = 0.0
        self.source_error: str | None = None
        self.source_up = False
        self.local_node = local_node or socket.gethostname()

    # -- state updates (called by the refresh loop; each assignment is atomic) ----------------
    def publish(self, view: FleetView, alerts: tuple[dict[str, Any], ...], refresh_s: float,
                dt_s: float | None, source_up: bool | None = None) -> None:
        """``source_up``: whether the source itself was read this refresh (a Prometheus outage
        keeps the last devices on show, so the view alone cannot tell); None: judge by the view."""
        if dt_s and dt_s > 0 and self.view is not None:
            # dollars spent while idle, integrated over time at the previous view's idle rate
            self.idle_usd_total += self.view.idle_usd_per_hour * dt_s / 3600.0
        if source_up is None:
            source_up = not (view.message and not view.device_count)
        self.view, self.alerts, self.refresh_seconds = view, alerts, refresh_s
        self.source_up = source_up
        self.refreshes += 1

    def _node(self, node: str) -> str:
        return node or self.local_node

    def describe(self) -> list:  # no describe-time work: metrics come and go with the fleet
        return []

    def collect(self) -> Iterator[Any]:
        """The scrape: the exporter's own state, then the devices', the nodes' and the fleet's
        metrics of the view published last, then the alerts held."""
        from prometheus_client.core import CounterMetricFamily

        view = self.view
        up = _gauge("source_up", "1 when the last refresh read the source without a source-level error")
        up.add_metric([], 1.0 if view is not None and self.source_up else 0.0)
        yield up
        refreshes = CounterMetricFamily(f"{PREFIX}_refreshes", "Refreshes done since start")
        refreshes.add_metric([], float(self.refreshes))
        yield refreshes
        if self.refresh_seconds is not None:
            dur = _gauge("refresh_duration_seconds", "Wall time of the last refresh (query+parse+analysis)")
            dur.add_metric([], self.refresh_seconds)
            yield dur
        if view is None:
            return
        errors = _gauge("source_errors", "Problems the last refresh reported (nodes down, ...)")
        errors.add_metric([], float(len(view.errors)))
        yield errors
        last = _gauge("last_refresh_timestamp_seconds", "When the shown data was read (unix time)")
        last.add_metric([], view.timestamp)
        yield last
        yield from self._device_families(view)
        yield from self._node_families(view)
        yield from self._fleet_families(view)
        yield self._alert_family()

    def _device_families(self, view: FleetView) -> Iterator[Any]:
        """Per device: its diagnoses (kind, severity, confidence, the evidence of the primary and of
        each risk), efficiency, cost, idleness, staleness and the age of its reading."""
        g = _gauge
        diag = g("diagnosis", "1 for each active diagnosis kind of a device (see fleet-tui docs)",
                 (*DEVICE_LABELS, "kind", "severity"))
        conf = g("diagnosis_confidence", "Confidence 0-1 of each active diagnosis",
                 (*DEVICE_LABELS, "kind"))
        primary = g("device_primary_diagnosis", "1 for the device's most important diagnosis "
                    "(its kind and its own severity)", (*DEVICE_LABELS, "kind", "severity"))
        evidence: dict[str, GaugeMetricFamily] = {}  # unit -> family
        eff = g("device_efficiency_score", "Share of the device doing work, 0-100 (SM active, "
                "else utilization)", DEVICE_LABELS)
        cost = g("device_cost_usd_per_hour", "Device's share of its instance price", DEVICE_LABELS)
        idle_cost = g("device_idle_cost_usd_per_hour", "Price of the device while it is idle",
                      DEVICE_LABELS)
        waste = g("device_waste_usd_per_hour", "Price x (1 - efficiency)", DEVICE_LABELS)
        idle = g("device_idle", "1 when the device is idle", DEVICE_LABELS)
        stale = g("device_stale", "1 when the source has no fresh reading for the device",
                  DEVICE_LABELS)
        age = g("device_data_age_seconds", "Age of the device's reading", DEVICE_LABELS)
        for d in view.offenders:
            labels = [self._node(d.node), str(d.index), d.uuid, d.name]
            top = d.diagnoses[0] if d.diagnoses and d.state == "ok" else None
            primary.add_metric([*labels, d.primary, (top or {}).get("severity") or d.severity],
                               1.0)
            if d.state != "ok":
                diag.add_metric([*labels, d.primary, d.severity], 1.0)
            for n, item in enumerate(d.diagnoses):
                kind = item.get("kind", "unknown")
                diag.add_metric([*labels, kind, item.get("severity") or "info"], 1.0)
                if item.get("confidence") is not None:
                    conf.add_metric([*labels, kind], float(item["confidence"]))
                if n and item.get("role") != "risk":
                    continue  # the other bottlenecks and notes: their kind and confidence above
                # the primary's and the risks' evidence, each value in its unit (the numbers
                # --json keeps): 4,096 devices' every finding was ~36,000 series, 8 MB a scrape
                for key, unit, value in evidence_values(item.get("evidence") or {}):
                    fam = evidence.get(unit)
                    if fam is None:
                        fam = evidence[unit] = g(
                            f"diagnosis_evidence_{unit}" if unit else "diagnosis_evidence",
                            f"Evidence of the primary diagnosis and of each risk"
                            f"{' in ' + unit if unit else ''} "
                            "(key: the evidence's name, as in --json)",
                            (*DEVICE_LABELS, "kind", "key"))
                    fam.add_metric([*labels, kind, key], value)
            if d.efficiency_pct is not None:
                eff.add_metric(labels, d.efficiency_pct)
            if d.usd_per_hour is not None:
                cost.add_metric(labels, d.usd_per_hour)
                idle_cost.add_metric(labels, d.idle_usd_per_hour)
            if d.waste_usd_per_hour is not None:
                waste.add_metric(labels, d.waste_usd_per_hour)
            idle.add_metric(labels, 1.0 if d.idle else 0.0)
            stale.add_metric(labels, 0.0 if d.state == "ok" else 1.0)
            age_s = view.age_of(d)
            if age_s is not None:
                age.add_metric(labels, age_s)
        yield from (diag, conf, primary, *evidence.values(), eff, cost, idle_cost, waste, idle,
                    stale, age)

    def _node_families(self, view: FleetView) -> Iterator[Any]:
        """Per node: efficiency, cost, idle cost, waste, utilization, idle and stale devices."""
        g = _gauge
        n_eff = g("node_efficiency_score", "Price-weighted efficiency of the node, 0-100", ("node",))
        n_cost = g("node_cost_usd_per_hour", "Instance price of the node", ("node",))
        n_idle = g("node_idle_cost_usd_per_hour", "Price of the node's idle devices", ("node",))
        n_waste = g("node_waste_usd_per_hour", "Price x (1 - efficiency) over the node", ("node",))
        n_util = g("node_utilization_percent", "Mean NVML utilization of the node's devices",
                   ("node",))
        n_idle_dev = g("node_idle_devices", "Idle devices on the node", ("node",))
        n_stale = g("node_stale_devices", "Devices without fresh readings on the node", ("node",))
        for n in view.nodes:
            node = [self._node(n.node)]
            if n.efficiency_pct is not None:
                n_eff.add_metric(node, n.efficiency_pct)
            if n.usd_per_hour is not None:
                n_cost.add_metric(node, n.usd_per_hour)
                n_idle.add_metric(node, n.idle_usd_per_hour)
            if n.waste_usd_per_hour is not None:
                n_waste.add_metric(node, n.waste_usd_per_hour)
            if n.mean_gpu_util_pct is not None:
                n_util.add_metric(node, n.mean_gpu_util_pct)
            n_idle_dev.add_metric(node, float(n.idle_devices))
            n_stale.add_metric(node, float(n.stale_devices))
        yield from (n_eff, n_cost, n_idle, n_waste, n_util, n_idle_dev, n_stale)

    def _fleet_families(self, view: FleetView) -> Iterator[Any]:
        """The fleet's totals, and the dollars spent on idle devices since the start."""
        from prometheus_client.core import CounterMetricFamily

        g = _gauge
        fleet = [
            ("fleet_devices", "Devices in the fleet", float(view.device_count)),
            ("fleet_nodes", "Nodes in the fleet", float(view.node_count)),
            ("fleet_idle_devices", "Idle devices", float(view.idle_devices)),
            ("fleet_stale_devices", "Devices without fresh readings", float(view.stale_devices)),
            ("fleet_utilization_percent", "Mean NVML utilization", view.utilization_pct),
            ("fleet_sm_active_percent", "Mean SM activity (DCGM PROF_SM_ACTIVE)", view.sm_active_pct),
            ("fleet_efficiency_score", "Price-weighted efficiency, 0-100", view.efficiency_pct),
            ("fleet_cost_usd_per_hour", "Price of the whole fleet", view.usd_per_hour),
            ("fleet_idle_cost_usd_per_hour", "Price of idle devices", view.idle_usd_per_hour),
            ("fleet_waste_usd_per_hour", "Price x (1 - efficiency), summed", view.waste_usd_per_hour),
        ]
        for name, doc, value in fleet:
            if value is not None:
                m = g(name, doc)
                m.add_metric([], float(value))
                yield m
        total = CounterMetricFamily(f"{PREFIX}_idle_cost_usd",
                                    "Dollars spent on idle devices since the exporter started")
        total.add_metric([], self.idle_usd_total)
        yield total

    def _alert_family(self) -> GaugeMetricFamily:
        """1 for each alert held now."""
        g = _gauge
        alerts = g("alert_active", "1 for each alert whose condition holds now",
                   ("rule", "severity", "node", "gpu", "device_key"))
        for a in self.alerts:
            alerts.add_metric([a["rule"], a["severity"], self._node(a.get("node", "")),
                               "" if a.get("device") is None else str(a["device"]),
                               a["device_key"]], 1.0)
        return alerts


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    """A gauge family named ``fleet_tui_<name>``."""
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))


def held_alerts(evaluator: AlertEvaluator, view: FleetView, now: float
                ) -> tuple[dict[str, Any], ...]:
    """The alert rules whose condition holds now, per device (the engine's evaluator fires events
    with a cooldown; a gauge needs the state in between)."""
    by_key = {d.key: d for d in view.offenders}
    out = []
    for rule, key, _since in evaluator.holding(now):
        d = by_key.get(key)
        out.append({"rule": rule.name, "severity": rule.severity,
                    "node": d.node if d else "", "device": d.index if d else None,
                    "device_key": key})
    return tuple(out)


# The HTTP endpoint's limits: scrapes are small and quick, so a few workers serve them; a client
# that sends nothing for IDLE_TIMEOUT_S is dropped, and connections beyond MAX_PENDING waiting for
# a worker are closed at once (200 slowloris connections once made 203 threads).
WORKERS = 4
MAX_PENDING = 64
IDLE_TIMEOUT_S = 10.0
LISTEN_BACKLOG = 128  # socketserver's default is 5


class _QuietHandler(WSGIRequestHandler):
    timeout = IDLE_TIMEOUT_S  # StreamRequestHandler sets it on the socket: reads time out

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # scrapes are not logged (prometheus-client's own handler is silent too)


class MetricsServer(WSGIServer):
    """``/metrics`` over a bounded pool of worker threads (see the limits above)."""

    request_queue_size = LISTEN_BACKLOG
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily):
        self.address_family = family
        super().__init__(address, _QuietHandler)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="fleet-tui-scrape")
        self._pending = 0
        self._pending_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._pending_lock:
            if self._pending >= MAX_PENDING:
                self.shutdown_request(request)  # shed load: the pool is busy with slow clients
                return
            self._pending += 1
        self._pool.submit(self._work, request, client_address)

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except (OSError, ValueError):  # a client that timed out, reset or sent garbage
            pass
        finally:
            self.shutdown_request(request)
            with self._pending_lock:
                self._pending -= 1

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def serve_metrics(registry: Any, bind: str, port: int) -> MetricsServer:
    """A ``MetricsServer`` of ``registry``'s metrics listening on ``bind:port`` (not yet
    serving: call ``serve_forever`` in a thread)."""
    from prometheus_client import make_wsgi_app

    family = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM)[0][0]
    server = MetricsServer((bind, port), family)
    server.set_app(make_wsgi_app(registry))
    return server


class FleetExporter:
    """The engine's subscriber + HTTP endpoint. ``run_forever`` blocks; ``start``/``stop`` for
    tests."""

    MIN_INTERVAL_S = 0.1  # the CLI asks for 0.5 s; tests refresh faster

    def __init__(self, source, *, instance_prices: Prices = None, interval_s: float = 2.0,
                 alert_rules: list | None = None, policy: FleetWindowPolicy | None = None):
        from prometheus_client import CollectorRegistry

        self.source = source
        self.interval_s = interval_s
        self.engine = MonitorEngine(source, interval_s=interval_s, alert_rules=alert_rules,
                                    price=False, min_interval_s=self.MIN_INTERVAL_S,
                                    policy=policy or FleetWindowPolicy())
        self.views = FleetViews(instance_prices)
        self.engine.subscribe(self.on_tick)
        self.collector = FleetCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._server = None
        self._thread: threading.Thread | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = threading.Event()
        self.port: int | None = None

    def on_tick(self, tick: Tick) -> None:
        """The engine's subscriber: the tick's ``FleetView`` (its findings, as every view reads
        them) and the alerts held, swapped in for the next scrape."""
        started = time.perf_counter()
        view = self.views(tick)
        active = held_alerts(self.engine.alerts, view, tick.snapshot.timestamp)
        refresh_s = tick.sample_s + tick.work_s + time.perf_counter() - started
        previous = self.collector.view
        dt = None if previous is None else view.timestamp - previous.timestamp
        # a source that knows whether it was read (Prometheus: ``reachable``) says so itself
        self.collector.publish(view, active, refresh_s, dt,
                               source_up=getattr(self.source, "reachable", None))

    async def loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._stopped.is_set():
            return
        await self.engine.run()

    def serve(self, bind: str = "127.0.0.1", port: int = 9877) -> int:
        """Start the HTTP endpoint in a daemon thread; returns the port (0 = pick a free one)."""
        try:
            server = serve_metrics(self.registry, bind, port)
        except OSError as exc:
            shown = f"{bind} {{port}} {port}: cannot listen there ({exc.strerror or exc})"
            raise FieldError("port", "{bind} " + shown.replace("{", "{{").replace("}", "}}")
                             .replace("{{port}}", "{port}") + "; pick another {port}") from None
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True,
                                        name="fleet-tui-metrics")
        self._thread.start()
        self.port = server.server_address[1]
        return self.port

    def start(self, bind: str = "127.0.0.1", port: int = 0) -> int:
        """Serve and run the engine in a background thread (tests, embedding)."""
        port = self.serve(bind, port)
        self._loop_thread = threading.Thread(target=lambda: asyncio.run(self.loop()), daemon=True,
                                             name="fleet-tui-exporter")
        self._loop_thread.start()
        return port

    def stop(self) -> None:
        self._stopped.set()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.engine.stop)
            except RuntimeError:  # the loop just finished
                pass
        if self._loop_thread is not None:
            self._loop_thread.join(timeout=10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def run_forever(self, bind: str = "127.0.0.1", port: int = 9877) -> None:
        self.serve(bind, port)
        try:
            asyncio.run(self.loop())
        finally:
            self.stop()
