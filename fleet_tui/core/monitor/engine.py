"""The monitor engine: sample, keep history, diagnose, alert, price; publish one immutable Tick.

The one engine for this box, a replay, the simulator and a Prometheus fleet. What differs between
them is the windowing, a policy object (``windowing.WindowPolicy`` / ``FleetWindowPolicy``;
``windowing.policy_for`` picks by source kind). Everything else subscribes to the ticks: the app's
panes (``ui/monitor_link``), ``monitor``/``record``, ``fleet`` and the fleet pane
(``fleet.FleetViews``), and ``export`` (``exporter.FleetExporter``, which also reads the alert
rules the engine holds)::

    engine = MonitorEngine(open_source("sim:8"), interval_s=1.0, instance="p5.48xlarge")
    engine.subscribe(lambda tick: print(tick.snapshot.timestamp, tick.primaries))
    await engine.run(count=10)

The next poll is scheduled after the previous one finished (a one-shot sleep of what is left of the
interval), so slow sources never pile polls up. Blocking work (the recorder's SQLite writes) runs in
a thread; the source's own ``sample`` keeps its blocking calls off the loop.

Where the policy says ``off_loop`` (the fleet policy: 4,096 devices took 81 ms of analysis on the
event loop per refresh, bench/bench_fleet.py), ``step`` adds the reading to ``history`` on the loop
(a few ms; the panes read history from the loop, so it is only ever changed there) and runs the
analysis, alerts and cost in a worker thread. Only one step runs at a time, so the windows and the
alert timers are touched by one thread at a time; what crosses back is the immutable ``Tick`` (its
``analyses`` a read-only mapping of a dict built for that tick alone).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from fleet_tui.core.errors import FieldError
from fleet_tui.core.monitor.alerts import Alert, AlertEvaluator, AlertRule, load_alert_rules
from fleet_tui.core.monitor.analysis import GROWTH_LOOKBACK_S, DeviceAnalysis, Diagnosis
from fleet_tui.core.monitor.cost import CostMeter, CostState, InstanceChoice, choose_instance
from fleet_tui.core.monitor.history import History
from fleet_tui.core.monitor.serialize import snapshot_to_dict
from fleet_tui.core.monitor.severity import severity_rank
from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.windowing import Policy, WindowPolicy
from fleet_tui.core.records import record

MIN_INTERVAL_S = 0.25
DEFAULT_HISTORY_S = 600.0


@record
class Finding:
    """One diagnosis of one device, shaped for display (the app's diagnoses panel).

    The display text (``evidence``, ``actions``) is derived from the diagnosis when read, not on
    every tick: most ticks are never drawn (hidden pane, headless, coalesced redraws)."""

    device_key: str
    device: str  # "GPU 0 (NVIDIA H200)"
    kind: str
    severity: str
    confidence: float
    diagnosis: Diagnosis

    primary: bool = False  # the device's primary diagnosis of this tick (what its row shows)

    @property
    def evidence(self) -> tuple[str, ...]:
        """The explanation sentence, then each value with its unit and scale."""
        diag = self.diagnosis
        return (diag.explanation,) + diag.evidence_text

    @property
    def actions(self) -> tuple[str, ...]:
        return (self.diagnosis.action,)

    @property
    def title(self) -> str:
        return f"{self.diagnosis.headline} ({self.confidence:.0%})"


@record
class Tick:
    """Everything one refresh produced. Immutable; safe to hand to another task or thread."""

    seq: int
    snapshot: Snapshot
    analyses: Mapping[str, DeviceAnalysis]  # by device key (read-only mapping)
    new_alerts: tuple[Alert, ...]
    cost: CostState | None
    work_s: float  # the engine's own time for this tick (analysis, alerts, cost, history)
    interval_s: float
    paused: bool = False
    focus: str | None = None
    sample_s: float = 0.0  # the source's time to read this snapshot

    @property
    def diagnoses(self) -> tuple[Finding, ...]:
        """Non-"ok" findings of all devices, most important first (built when read: many ticks
        are never shown)."""
        return findings(self.snapshot, self.analyses)

    @property
    def alerts(self) -> tuple[Alert, ...]:
        return self.new_alerts

    @property
    def primaries(self) -> dict[str, str]:
        return {k: a.primary for k, a in self.analyses.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "snapshot": snapshot_to_dict(self.snapshot),
                "analysis": [a.to_dict() for a in self.analyses.values()],
                "alerts": [a.to_dict() for a in self.new_alerts],
                "cost": self.cost.to_dict() if self.cost is not None else None}


Subscriber = Callable[[Tick], Any] | asyncio.Queue


def findings(snapshot: Snapshot, analyses: Mapping[str, DeviceAnalysis]) -> tuple[Finding, ...]:
    """Each device's primary diagnosis (whatever its severity: the same line its table row shows),
    then its other non-"ok" diagnoses in the analysis's order; devices whose primary is most
    severe first, then in the snapshot's order. Every view lists a device's findings from here, so
    the first one of a device is its primary of this tick."""
    devices = None
    groups: list[tuple[int, int, list[Finding]]] = []
    for pos, (key, an) in enumerate(analyses.items()):
        if not an.diagnoses:
            continue
        if devices is None:
            devices = {d.key: d for d in snapshot.devices}
        d = devices.get(key)
        name = key if d is None else f"GPU {d.index}" + (f" ({d.name})" if d.name else "")
        out = []
        for i, diag in enumerate(an.diagnoses):
            if i and diag.severity == "ok":
                continue
            out.append(Finding(key, name, diag.kind, diag.severity, diag.confidence, diag,
                               primary=i == 0))
        groups.append((severity_rank(an.diagnoses[0].severity), pos, out))
    if len(groups) > 1:
        groups.sort(key=_group_rank)
    return tuple(f for _, _, group in groups for f in group)


def _group_rank(group: tuple[int, int, list[Finding]]) -> tuple[int, int]:
    return group[0], group[1]


class MonitorEngine:
    """Sample a source, keep history, diagnose through a windowing ``policy``, alert, price.

    ``policy``: ``WindowPolicy(seconds=window_s)`` unless given (``windowing.policy_for`` picks the
    fleet policy for a fleet source). Subscribers get every ``Tick``."""

    def __init__(self, source: Source, interval_s: float = 1.0, window_s: float = 5.0,
                 instance: str | InstanceChoice | None = None,
                 alert_rules: Sequence[AlertRule] | None = None, recorder: Any = None, *,
                 history_s: float = DEFAULT_HISTORY_S,
                 catalog: Any = None, growth_lookback_s: float = GROWTH_LOOKBACK_S * 5,
                 usd_per_hour: float | None = None, min_interval_s: float = MIN_INTERVAL_S,
                 price: bool = True, policy: Policy | None = None):
        interval = float(interval_s)
        self.min_interval_s = float(min_interval_s)
        check_interval(interval, self.min_interval_s)
        if policy is None:
            policy = WindowPolicy(seconds=float(window_s), growth_lookback_s=growth_lookback_s)
        self.policy = policy
        self.source = source
        self.interval_s = interval
        self.window_s = float(policy.seconds)
        self.history = History(seconds=max(history_s, self.window_s, policy.growth_lookback_s),
                               interval_s=interval)
        self.windows = policy.start()
        if alert_rules is None:
            alert_rules, self.rule_problems = load_alert_rules()
        else:
            self.rule_problems = []
        self.alerts = AlertEvaluator(alert_rules)
        self.recorder = recorder
        self._instance = instance
        self._catalog = catalog
        self._usd_per_hour = usd_per_hour
        self._price = price  # False: no cost meter (the recorder; a fleet prices per node)
        self._cost: CostMeter | None = None
        self._subscribers: list[Subscriber] = []
        self._paused = False
        self._resume = asyncio.Event()
        self._resume.set()
        self._wake = asyncio.Event()
        self._stop = False
        self._seq = 0
        self.focus: str | None = None
        self.latest: Tick | None = None
        self._first_ts: float | None = None  # the first live reading's time (see ``filling``)
        self._last_ts = 0.0

    # ----- subscribers -----
    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Callback ``f(tick)`` (may be async) or an ``asyncio.Queue``; returns an unsubscribe."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)
        return unsubscribe

    async def _publish(self, tick: Tick) -> None:
        for sub in list(self._subscribers):
            if isinstance(sub, asyncio.Queue):
                sub.put_nowait(tick)
                continue
            result = sub(tick)
            if inspect.isawaitable(result):
                await result

    # ----- controls -----
    def pause(self) -> None:
        self._paused = True
        self._resume.clear()

    def resume(self) -> None:
        self._paused = False
        self._resume.set()
        self._wake.set()

    @property
    def paused(self) -> bool:
        return self._paused

    def set_interval(self, seconds: float) -> None:
        check_interval(seconds, self.min_interval_s)
        self.interval_s = float(seconds)
        self.history.set_interval(self.interval_s)
        follow = getattr(self.source, "set_interval", None)  # a simulator's clock
        if follow is not None:
            follow(self.interval_s)
        self._wake.set()  # re-plan the current sleep

    def set_focus(self, device_key: str | None) -> None:
        self.focus = device_key

    def stop(self) -> None:
        self._stop = True
        self._resume.set()
        self._wake.set()

    @property
    def fill_s(self) -> float:
        """Seconds of readings after which the history and every window hold their full span
        (the fleet policy: the 600 s growth lookback behind the 120 s window, 720 s)."""
        policy = self.policy
        return max(self.history.seconds,
                   policy.seconds + getattr(policy, "growth_lookback_s", 0.0))

    @property
    def filling(self) -> bool:
        """True until the live readings span ``fill_s``: until then the engine's memory grows by
        design, not by a leak (the fleet pane's collector rule, ``ui.runtime.FrozenSurvivors``)."""
        return self._first_ts is None or self._last_ts - self._first_ts < self.fill_s

    # ----- cost -----
    def _cost_meter(self, snapshot: Snapshot) -> CostMeter | None:
        if self._cost is not None or not self._price:
            return self._cost
        if self._usd_per_hour is not None:
            self._cost = CostMeter(usd_per_hour=self._usd_per_hour,
                                   instance_type=self._instance if isinstance(self._instance, str)
                                   else None)
            return self._cost
        if isinstance(self._instance, InstanceChoice):
            self._cost = CostMeter.from_choice(self._instance)
            return self._cost
        if not snapshot.devices:
            return None
        catalog = self._catalog
        if catalog is None:
            from fleet_tui.core.catalog import load_catalog  # pydantic: only when pricing

            catalog = self._catalog = load_catalog()
        names = {d.name for d in snapshot.devices}
        choice = choose_instance(catalog, self._instance,
                                 device_name=next(iter(names)) if len(names) == 1 else None,
                                 device_count=len(snapshot.devices))
        self._cost = CostMeter.from_choice(choice)
        return self._cost

    # ----- one tick -----
    def backfill(self, snapshot: Snapshot) -> None:
        """A past reading (e.g. from a Prometheus range query): into history and the windows,
        nothing diagnosed or published."""
        self.history.add(snapshot, [d.key for d in snapshot.devices])
        self.windows.add(snapshot, self.history)

    def process(self, snapshot: Snapshot, sample_s: float = 0.0) -> Tick:
        """History, analysis, alerts and cost for one snapshot (synchronous, no I/O)."""
        t0 = time.perf_counter()
        keys = [d.key for d in snapshot.devices]
        self._add_history(snapshot, keys)
        return self._analyse(snapshot, keys, sample_s, time.perf_counter() - t0)

    def _add_history(self, snapshot: Snapshot, keys: list[str]) -> None:
        """The reading into history; where the policy keeps no repeats (a fleet), only devices
        whose reading changed (a scrape repeated with a new age adds nothing: 4,096 GPUs at a 2 s
        refresh kept 1.2 million snapshots over 10 minutes, most of them copies, and the garbage
        collector walked them all)."""
        if snapshot.timestamp:
            if self._first_ts is None:
                self._first_ts = snapshot.timestamp
            self._last_ts = max(self._last_ts, snapshot.timestamp)
        if getattr(self.policy, "history_repeats", True):
            self.history.add(snapshot, keys)
            return
        latest = self.history.latest
        devices, fresh = [], []
        for d, key in zip(snapshot.devices, keys):
            last = latest(key)
            if last is None or last.timestamp != d.timestamp or not d.timestamp:
                devices.append(d)
                fresh.append(key)
        if len(devices) == len(keys):
            self.history.add(snapshot, keys)
        elif devices or snapshot.host is not None:
            self.history.add(replace(snapshot, devices=tuple(devices)), fresh)

    def _analyse(self, snapshot: Snapshot, keys: list[str], sample_s: float,
                 spent_s: float = 0.0) -> Tick:
        """Analysis, alerts and cost of a reading already in history (may run in a thread)."""
        t0 = time.perf_counter() - spent_s
        devices = snapshot.devices
        analyses = self.windows.analyze(snapshot, keys, self.history)
        meter = self._cost_meter(snapshot)
        cost = meter.update(snapshot.timestamp, analyses, len(snapshot.devices)) if meter else None
        machine = {}
        if cost is not None and cost.usd_per_hour is not None:
            machine = {"cost_usd_per_day": cost.usd_per_day, "cost_usd_per_hour": cost.usd_per_hour,
                       "cost_usd_so_far": cost.usd_so_far}
        new_alerts = tuple(self.alerts.evaluate(snapshot.timestamp, devices, analyses, machine,
                                                keys=keys))
        self._seq += 1
        tick = Tick(seq=self._seq, snapshot=snapshot, analyses=MappingProxyType(analyses),
                    new_alerts=new_alerts, cost=cost, work_s=time.perf_counter() - t0,
                    interval_s=self.interval_s, paused=self._paused, focus=self.focus,
                    sample_s=sample_s)
        self.latest = tick
        return tick

    async def step(self) -> Tick:
        """Sample once, process, record, publish."""
        t0 = time.perf_counter()
        snapshot = await self.source.sample()
        sample_s = time.perf_counter() - t0
        if self._cost is None and self._price and snapshot.devices:
            # the first priced tick may load the catalog (file I/O + validation): off the loop
            await asyncio.to_thread(self._cost_meter, snapshot)
        if getattr(self.policy, "off_loop", False):
            t0 = time.perf_counter()
            keys = [d.key for d in snapshot.devices]
            self._add_history(snapshot, keys)  # on the loop, where the panes read it
            tick = await asyncio.to_thread(self._analyse, snapshot, keys, sample_s,
                                           time.perf_counter() - t0)
        else:
            tick = self.process(snapshot, sample_s)
        recorder = self.recorder
        if recorder is not None and recorder.accept(snapshot, tick.primaries):
            await asyncio.to_thread(recorder.flush)  # SQLite: off the loop, only when due
        await self._publish(tick)
        return tick

    async def _backfill_from_source(self) -> None:
        """The policy's window of the past, where the source keeps one (Prometheus)."""
        seconds = self.policy.seconds
        history = getattr(self.source, "history", None)
        if not self.policy.backfill or history is None or seconds <= 0:
            return
        for past in await history(seconds, step_s=max(1.0, seconds / 10.0)):
            self.backfill(past)

    async def run(self, count: int | None = None, *, prime: bool = False) -> None:
        """Sample until ``stop()`` (or ``count`` ticks). Opens and closes the source.

        ``prime``: before the first tick, let the source take the first sample of its interval
        readings and wait one interval, so the first tick has them (``monitor --once``)."""
        await self.source.open()
        done = 0
        try:
            await self._backfill_from_source()
            if prime and await self.source.prime():
                await self._sleep_rest(time.monotonic())
            while not self._stop and (count is None or done < count):
                if self._paused:
                    await self._resume.wait()
                    continue
                started = time.monotonic()
                await self.step()
                done += 1
                if count is not None and done >= count:
                    break
                await self._sleep_rest(started)
        finally:
            await self.source.close()

    async def _sleep_rest(self, started: float) -> None:
        while not self._stop:
            left = self.interval_s - (time.monotonic() - started)
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=left)
            except asyncio.TimeoutError:
                return
            # woken: interval changed, resumed or stopped; loop re-plans with the new interval


def check_interval(seconds: float, minimum: float = MIN_INTERVAL_S) -> None:
    if not isinstance(seconds, (int, float)) or seconds != seconds or seconds < minimum:
        raise FieldError("interval", f"{{interval}} {seconds!r}: must be at least {minimum:g} "
                         "seconds (NVML utilization and PCIe counters sample over ~20 ms-1 s; "
                         "faster polling only repeats readings)")
