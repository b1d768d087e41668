"""``PrometheusSource``: a whole fleet as a monitor source (see the package docstring)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from operator import attrgetter

from fleet_tui.core.errors import FieldError
from fleet_tui.core.monitor.rollup import FleetAggregate
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, Snapshot
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.monitor.sources.prometheus.aggregate import (
    WORST_DEVICES,
    aggregate_threshold,
    build_node_query,
    read_device_count,
    read_fleet_aggregate,
)
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient, parse_duration_s
from fleet_tui.core.monitor.sources.prometheus.delta import ChangedOnly
from fleet_tui.core.monitor.sources.prometheus.devices import device_from_acc, devices_from_groups
from fleet_tui.core.monitor.sources.prometheus.fastparse import LabelCache, split_grouped
from fleet_tui.core.monitor.sources.prometheus.parse import (
    Acc,
    PrometheusResponseError,
    decoded_rows,
    group_classified,
    group_series,
    parse_envelope,
)
from fleet_tui.core.monitor.sources.prometheus.queries import (
    build_changed_query,
    build_probe_query,
    build_query,
    build_static_query,
)
from fleet_tui.core.records import record
from fleet_tui.core.redact import redact_url, split_url


def _literal(text: str) -> str:
    """Text placed in a FieldError template as itself (not a field)."""
    return text.replace("{", "{{").replace("}", "}}")


# Most devices on most refreshes are the same reading as before, only older (bench/bench_fleet.py:
# ~3,500 of 4,096 GPUs scraped every 15 s): handed on as they are, their ages in the snapshot's
# ``device_ages``. A copy with a new age only where that cannot be (the last data while Prometheus
# is unreachable, two devices sharing a key). ``age_s`` is the last field, so the copy passes the
# other values positionally, read through one attrgetter: 8.6 us against 13.6 us with keywords and
# more with ``dataclasses.replace``, which looks the fields up per call.
_KEPT_FIELDS = tuple(f.name for f in fields(DeviceSnapshot) if f.name != "age_s")
_kept_values = attrgetter(*_KEPT_FIELDS)
assert fields(DeviceSnapshot)[-1].name == "age_s" and all(f.init for f in fields(DeviceSnapshot))


def with_age(device: DeviceSnapshot, age_s: float) -> DeviceSnapshot:
    """``device`` with only its age changed."""
    return DeviceSnapshot(*_kept_values(device), age_s=age_s)


class BadPrometheusUrl(SourceUnavailable, FieldError):
    """The ``source`` field names no usable Prometheus URL."""


@record
class _Cached:
    device: DeviceSnapshot
    seen_at: float  # wall clock when this device's reading was taken (sample time)
    instance: str
    # what the device was built from: the same sample time, identity and raw values next refresh
    # (a scrape not yet repeated) reuse it with only its age updated
    raw: dict | None = None
    ident: tuple = ()


class PrometheusSource(Source):
    """A fleet read through the Prometheus HTTP API. See the package docstring.

    ``url`` is the server's base URL (``http://prom:9090``, also behind a path prefix); credentials
    (``token``, ``basic_auth``, the environment) and TLS (``verify_tls``, ``ca_file``): see
    ``client.PrometheusClient``. A fleet of more than ``aggregate_above`` DCGM GPUs (counted every
    ``count_every_s``; ``aggregate_threshold``) is read as the server's roll-ups
    (``aggregate``): its snapshots carry no devices but a ``FleetAggregate`` with the
    ``worst_devices`` least-used devices, and ``read_node`` reads one node's devices in full.
    """

    name = "prometheus"
    kind = "fleet"

    def __init__(self, url: str, *, token: str | None = None,
                 basic_auth: tuple[str, str] | None = None, verify_tls: bool | None = None,
                 ca_file: str | None = None, timeout_s: float = 5.0,
                 stale_after_s: float | None = None, forget_after_s: float = 900.0,
                 min_backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 query: str | None = None, static_every_s: float = 60.0,
                 prune_labels: bool = True, delta_refresh: bool = True,
                 aggregate_above: int | None = None, count_every_s: float = 60.0,
                 worst_devices: int = WORST_DEVICES,
                 env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time, interval_s: float | None = None,
                 **_other_source_opts: object):
        # interval_s and options meant for local sources (open_source passes them to every
        # backend) do not apply: Prometheus' own scrape interval decides how fresh data is.
        del interval_s, _other_source_opts
        url = url.strip()
        try:  # the user information ends at the last "@" (core.redact): a "/" in it is no host
            parts = urllib.parse.urlsplit(split_url(url).url)
            port_ok = parts.port is None or parts.port >= 0  # .port raises for "9x"
        except ValueError:  # a port that is no number, an unbalanced "[": no traceback quoting it
            parts, port_ok = urllib.parse.urlsplit(""), False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
            raise BadPrometheusUrl(
                "source", f"{{source}} prometheus:{_literal(redact_url(url))}: the Prometheus URL must start "
                "with http:// or https:// and name a host, e.g. prometheus:http://localhost:9090")
        self.client = PrometheusClient(url, token=token, basic_auth=basic_auth,
                                       verify_tls=verify_tls, ca_file=ca_file, timeout_s=timeout_s,
                                       env=env)
        self.url = self.client.url
        self.verify_tls = self.client.verify_tls
        self.timeout_s = self.client.timeout_s
        self.stale_after_s = stale_after_s
        self.forget_after_s = forget_after_s
        self.min_backoff_s, self.max_backoff_s = min_backoff_s, max_backoff_s
        self.query = query or build_query(prune_labels=prune_labels)
        self.static_query = build_static_query()
        self.static_every_s = static_every_s
        self._static_values: dict[tuple, dict[str, object]] = {}
        self._static_names: dict[tuple, tuple[str, str]] = {}  # key -> (model name, MIG profile)
        self._neuron_per_device: dict[str, int] = {}
        # label text -> classify_series(), one cache per kind of query so that a small answer
        # (the probes) does not flush the big one's labels
        self._classified: dict[str, LabelCache] = {}
        self._static_at = -math.inf
        self._static_tried: set[tuple] = set()
        self._static_error: str | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, _Cached] = {}
        self._cache_keys: dict[tuple, str] = {}  # a device's group key -> its key in the cache
        self._counters: dict[str, dict[str, tuple[float, float]]] = {}
        self._failures = 0
        self._next_try = 0.0
        self._last_error: str | None = None
        self._last_ok: float | None = None
        self._scrape_interval_s: float | None = None
        self._interval_checked = -math.inf
        self._operation: Deadline | None = None
        self.delta_refresh = delta_refresh and query is None and prune_labels
        self._changed = ChangedOnly(enabled=self.delta_refresh)
        self.probe_query = build_probe_query()
        self.aggregate_above = aggregate_threshold(
            aggregate_above, os.environ if env is None else env)
        self.count_every_s = count_every_s
        self.worst_devices = worst_devices
        self.device_total: int | None = None  # the last device count (build_count_query)
        self._counted_at = -math.inf
        self._aggregate: FleetAggregate | None = None  # the last roll-ups, while aggregating

    @property
    def spec(self) -> str:
        return f"prometheus:{self.url}"

    # -- HTTP ----------------------------------------------------------------------------------
    def begin_operation(self, seconds: float | None = None) -> None:
        """Until ``end_operation``, every request (backfill and refreshes) ends before one shared
        deadline, ``seconds`` (default ``timeout_s``) from now: a one-shot command's ``--timeout``
        bounds the whole command, not each of its requests."""
        self._operation = Deadline.after(self.timeout_s if seconds is None else seconds)

    def end_operation(self) -> None:
        self._operation = None

    def _deadline(self) -> Deadline:
        """One refresh's (or backfill's) deadline, within the operation's if one is open."""
        return self.client.deadline().sooner(self._operation)

    @property
    def reachable(self) -> bool | None:
        """Whether the last attempt to read Prometheus succeeded (None: not tried yet); a
        refresh inside the back-off counts as failed. The exporter's ``fleet_tui_source_up``."""
        if self._failures:
            return False
        return None if self._last_ok is None else True

    def _get(self, path: str, params: Mapping[str, str] | None = None, *, post: bool = False,
             deadline: Deadline | None = None) -> bytes:
        return self.client.get(path, params, post=post, deadline=deadline)

    def query_instant(self, query: str) -> list[dict]:
        return parse_envelope(self.client.query_body(query))

    def query_grouped(self, query: str, deadline: Deadline | None = None, *,
                      labels: str = "metrics", skip: Callable[[tuple, object], bool] | None = None,
                      ) -> tuple[dict[tuple, Acc], dict[str, float]]:
        """An instant query's series grouped by device (``group_classified``, ``skip`` as there),
        and ``up`` by instance. Compact answers are split without a JSON decode and each distinct
        label text is classified once for the source's lifetime (the per-refresh hot path)."""
        body = self.client.query_body(query, deadline)
        per_device = self._neuron_per_device
        grouped = split_grouped(body, self._classified.setdefault(labels, LabelCache()),
                                neuron_per_device=per_device, skip=skip)
        if grouped is None:
            grouped = group_classified(decoded_rows(parse_envelope(body)),
                                       neuron_per_device=per_device, skip=skip)
        return grouped

    def query_range(self, query: str, start: float, end: float, step_s: float,
                    deadline: Deadline | None = None) -> list[dict]:
        body = self.client.query_range_body(query, start, end, step_s, deadline)
        return parse_envelope(body, expect=("matrix",))

    def _refresh_scrape_interval(self, now: float, deadline: Deadline | None = None) -> None:
        """Median scrape interval of the active targets (for the stale threshold), every 5 min."""
        if now - self._interval_checked < 300:
            return
        self._interval_checked = now
        try:
            doc = json.loads(self._get("/api/v1/targets", {"state": "active"},
                                        deadline=deadline))
            targets = doc["data"]["activeTargets"]
            intervals = sorted(
                s for s in (parse_duration_s(t.get("scrapeInterval", "")) for t in targets) if s)
        except Exception:  # noqa: BLE001 - optional endpoint (absent behind some proxies)
            return
        if intervals:
            self._scrape_interval_s = intervals[len(intervals) // 2]

    @property
    def stale_threshold_s(self) -> float:
        if self.stale_after_s is not None:
            return self.stale_after_s
        interval = self._scrape_interval_s or 30.0  # dcgm-exporter's default collect interval
        return max(3.0 * interval, 10.0)

    # -- Source API ----------------------------------------------------------------------------
    async def open(self) -> None:
        """Nothing to acquire: an unreachable server is reported by ``sample`` and retried."""

    async def sample(self) -> Snapshot:
        return await asyncio.to_thread(self.sample_blocking)

    async def history(self, seconds: float, step_s: float = 15.0) -> list[Snapshot]:
        """Backfill: one Snapshot per step over the last ``seconds`` (empty list on failure)."""
        return await asyncio.to_thread(self.history_blocking, seconds, step_s)

    def sample_blocking(self) -> Snapshot:
        """One refresh; never raises (errors become ``Snapshot.errors``)."""
        with self._lock:
            try:
                return self._sample_locked()
            except Exception as exc:  # noqa: BLE001 - the UI loop must never see an exception
                return self._degraded(self._clock(), f"internal error reading Prometheus: {exc!r}")

    def _sample_locked(self) -> Snapshot:
        now = self._clock()
        if now < self._next_try:
            wait = self._next_try - now
            return self._degraded(now, f"{self._last_error}; retrying in {wait:.2g} s")
        deadline = self._deadline()  # the queries, the targets and the static facts together
        try:
            if self._is_large(now, deadline):
                return self._sample_aggregate(now, deadline)
        except (OSError, PrometheusResponseError, ValueError) as exc:
            self._changed.forget()
            return self._fail(now, exc)
        # most GPUs scraped since the last refresh (a fast scrape, a slow refresh): the probes
        # would only add a request, so read everything in one
        full = not self._changed.ready
        self._changed.begin()
        try:
            groups, up = self._read_full(deadline) if full else self._read_changed(deadline)
        except (OSError, PrometheusResponseError, ValueError) as exc:
            self._changed.forget()  # after a failure, read everything again
            return self._fail(now, exc)
        self._aggregate = None  # (a fleet shrunk below the threshold)
        same = self._changed.same  # GPUs whose reading is the one in the cache
        self._changed.remember(groups)
        self._failures, self._next_try, self._last_error = 0, 0.0, None
        self._last_ok = now
        self._refresh_scrape_interval(now, deadline)
        if now - self._static_at >= self.static_every_s:
            if self._refresh_static(now, deadline) and same:
                # facts moved (a limit, an ECC count): the GPUs kept as they were take them at
                # the next refresh, a full read (before, every static refresh was one: at 4,096
                # GPUs ~400 ms CPU every 60 s, though facts rarely move)
                self._changed.forget()
        new = [k for k in groups if k not in self._static_values and k not in self._static_tried]
        if new and now - self._static_at >= 5.0:
            self._refresh_static(now, deadline)  # new devices: learn their names and limits now
            self._static_tried.update(new)  # (some exporters export no static facts at all)
            if same:  # the GPUs kept as they were take the new facts at the next refresh
                self._changed.forget()
        self._apply_static(groups)
        return self._merge(now, groups, up, same)

    # -- fleets past the threshold: the server's roll-ups --------------------------------------
    def _is_large(self, now: float, deadline: Deadline) -> bool:
        """Whether the fleet has more DCGM GPUs than ``aggregate_above`` (re-counted every
        ``count_every_s``: one number from the server)."""
        if now - self._counted_at >= self.count_every_s:
            self.device_total = read_device_count(self.client, deadline=deadline)
            self._counted_at = now
        return self.device_total is not None and self.device_total > self.aggregate_above

    @property
    def aggregated(self) -> bool:
        """Whether the last refresh read the server's roll-ups rather than every device."""
        return self._aggregate is not None

    def _sample_aggregate(self, now: float, deadline: Deadline) -> Snapshot:
        agg = read_fleet_aggregate(self.client, worst=self.worst_devices, deadline=deadline,
                                   threshold=self.aggregate_above)
        self._failures, self._next_try, self._last_error = 0, 0.0, None
        self._last_ok = now
        if self._cache:  # the per-device readings are not refreshed any more: let them go
            self._cache, self._cache_keys, self._counters = {}, {}, {}
            self._changed.forget()
        self._aggregate = agg
        errors = tuple(f"{node}: exporter {inst} is down (up == 0)" for node, inst in agg.down)
        message = None
        if not agg.nodes:
            message = f"Prometheus {self.url} answered but its roll-ups hold no DCGM GPU"
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet", message=message,
                        errors=errors, aggregate=agg)

    def read_node(self, node: str) -> Snapshot:
        """One node's devices in full (a drill-down into an aggregated fleet): its DCGM metrics,
        limits and model names in one query. Raises OSError, PrometheusResponseError or
        ValueError (a node name that cannot be matched) when it cannot be read."""
        query = build_node_query(node)
        with self._lock:
            now = self._clock()
            groups, _ = self.query_grouped(query, self._deadline(), labels="node")
        devices = [d for d in devices_from_groups(groups, timestamp=now) if d.node == node]
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet", node=node,
                        devices=tuple(devices),
                        message=None if devices else f"no devices of node {node!r} read")

    def _read_full(self, deadline: Deadline) -> tuple[dict[tuple, Acc], dict[str, float]]:
        """Every series the refresh reads, in one query."""
        return self.query_grouped(self.query, deadline)

    def _read_changed(self, deadline: Deadline) -> tuple[dict[tuple, Acc], dict[str, float]]:
        """Sample times first, then the metrics of only the GPUs scraped since the last refresh
        (``delta.ChangedOnly``)."""
        groups, up = self.query_grouped(self.probe_query, deadline, labels="probes",
                                        skip=self._changed.unchanged)
        if not self._in_cache(self._changed.same):  # cannot happen; if it did, read it all
            self._changed.forget()
            return self._read_full(deadline)
        since = self._changed.moved_since(groups)
        if since is False:  # a GPU without its sample time: cannot tell, read everything
            self._changed.begin()  # (none is kept as it was)
            return self._read_full(deadline)
        if since is not None:
            fresh, _ = self.query_grouped(build_changed_query(since), deadline)
            self._changed.take(groups, fresh)
        return groups, up

    def _refresh_static(self, now: float, deadline: Deadline | None = None) -> bool:
        """Re-read slow-changing facts; a failure keeps the old ones and is reported. True when
        a device's facts changed."""
        self._static_at = now
        try:
            groups, _ = self.query_grouped(self.static_query, deadline, labels="static")
        except (OSError, PrometheusResponseError, ValueError) as exc:
            self._static_error = f"Prometheus {self.url}: device facts not read ({exc})"
            return False
        self._static_error = None
        before = self._static_values, self._static_names
        # replaced wholesale, so devices gone from the fleet do not accumulate
        self._static_values, self._static_names, self._static_tried = {}, {}, set()
        for key, acc in groups.items():
            values = dict(acc.values or {})
            values.pop("DCGM_FI_DEV_FB_USED", None)  # carried the name; its value is dynamic
            self._static_values[key] = values
            self._static_names[key] = (acc.name, acc.mig_profile)
        return (self._static_values, self._static_names) != before

    def _apply_static(self, groups: dict[tuple, Acc]) -> None:
        for key, acc in groups.items():
            static = self._static_values.get(key)
            # a reading kept from the last refresh (delta.ChangedOnly) already holds them
            if static and (acc.values is None or not static.keys() <= acc.values.keys()):
                values = acc.values if acc.values is not None else {}
                for name, raw in static.items():
                    values.setdefault(name, raw)
                acc.values = values
            named = self._static_names.get(key)
            if named is not None:
                if acc.name in ("NVIDIA GPU", "Intel Gaudi", "AWS NeuronCore", "AMD GPU"):
                    acc.name = named[0]
                if key[3] and named[1]:
                    acc.mig_profile = named[1]

    def _fail(self, now: float, exc: BaseException) -> Snapshot:
        self._failures += 1
        delay = min(self.max_backoff_s, self.min_backoff_s * 2 ** (self._failures - 1))
        # count the back-off from when the attempt ended (a timeout may have taken a while)
        now = max(now, self._clock())
        self._next_try = now + delay
        reason = str(exc)
        if isinstance(exc, urllib.error.URLError):
            reason = str(exc.reason)
        if isinstance(exc, PrometheusResponseError):
            self._last_error = f"Prometheus {self.url} answered badly: {reason}"
        else:
            if isinstance(exc, TimeoutError) and "timed out" not in reason:
                reason = f"timed out ({reason})" if reason else "timed out"
            self._last_error = f"Prometheus {self.url} unreachable: {reason}"
        return self._degraded(now, f"{self._last_error}; retrying in {delay:.3g} s")

    def _degraded(self, now: float, error: str) -> Snapshot:
        """The last good devices with their current age, and the error."""
        self._forget(now)
        devices = tuple(self._aged(c, now, force_stale=False) for c in self._cache.values())
        errors = [error]
        if self._last_ok is not None and devices:
            errors.append(f"showing the last data read {now - self._last_ok:.0f} s ago")
        agg = self._aggregate
        if agg is not None:  # an aggregated fleet: its last roll-ups
            errors.append(f"showing the roll-ups read {now - agg.timestamp:.0f} s ago")
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet", devices=devices,
                        message=None if devices or agg is not None else error,
                        errors=tuple(errors), aggregate=agg)

    def _aged(self, cached: _Cached, now: float, *, force_stale: bool) -> DeviceSnapshot:
        age = max(0.0, now - cached.seen_at)
        stale = force_stale or age > self.stale_threshold_s
        device = cached.device
        if stale:
            return replace(device, age_s=age, state="unavailable",
                           error=f"no data for {age:.0f} s (exporter down or not scraped)")
        return with_age(device, age)

    def _forget(self, now: float) -> None:
        for key in [k for k, c in self._cache.items() if now - c.seen_at > self.forget_after_s]:
            del self._cache[key]
            self._counters.pop(key, None)

    def _in_cache(self, same: Mapping[tuple, float]) -> bool:
        """Whether every GPU in ``same`` has its reading of that sample time in the cache."""
        cache, keys = self._cache, self._cache_keys
        for group_key, sample_ts in same.items():
            cached = cache.get(keys.get(group_key, ""))
            if cached is None or cached.seen_at != sample_ts or cached.raw is None:
                return False
        return True

    def _merge(self, now: float, groups: dict[tuple, Acc], up: dict[str, float],
               same: Mapping[tuple, float] | None = None) -> Snapshot:  # long: one pass, cache and snapshot together
        """``groups``: the devices read this refresh; ``same``: GPUs (key -> sample time) whose
        reading is the cached one, only older (``delta.ChangedOnly.unchanged``)."""
        read: dict[str, DeviceSnapshot] = {}  # this refresh's reading of each device it saw
        # the readings handed on as they are (cache key -> their age now): no copy per refresh
        # only to update the age (the snapshot's device_ages)
        older: dict[str, float] = {}
        collided = False
        cache, cache_keys = self._cache, self._cache_keys
        for group_key, sample_ts in (same or {}).items():
            key = cache_keys[group_key]
            read[key] = cache[key].device
            older[key] = max(0.0, now - sample_ts)
        for group_key, acc in groups.items():
            key = f"{acc.node}/{acc.uuid or acc.index}"  # == DeviceSnapshot.key
            if key in read:  # two series sets collide (e.g. instance fallback); keep both apart
                key = f"{key}#{acc.ident}"
                collided = True
            cache_keys[group_key] = key
            ident = (acc.index, acc.name, acc.mig_profile, acc.vendor, acc.uuid)
            sample_ts = acc.sample_ts
            before = cache.get(key)
            if (before is not None and sample_ts is not None and before.seen_at == sample_ts
                    and before.ident == ident
                    and (before.raw is acc.values or before.raw == acc.values)):
                # the same scrape as last refresh (dcgm-exporter collects every 30 s by default,
                # so most devices on most refreshes): only the reading's age moved; the cache
                # entry stays (fewer objects kept per refresh, less for the garbage collector)
                read[key] = before.device
                older[key] = max(0.0, now - sample_ts)
                if before.instance != acc.instance:
                    cache[key] = replace(before, instance=acc.instance)
                continue
            device, counters = device_from_acc(acc, timestamp=now,
                                               previous_counters=self._counters.get(key))
            if counters:
                self._counters[key] = counters
            cache[key] = _Cached(device=device, seen_at=sample_ts or now, instance=acc.instance,
                                 raw=acc.values, ident=ident)
            read[key] = device
        self._forget(now)
        if len(cache_keys) > 2 * len(cache) + 64:  # devices gone from the fleet
            self._cache_keys = {g: k for g, k in cache_keys.items() if k in cache}
        down_instances = {inst for inst, value in up.items() if value == 0}
        errors: list[str] = []
        devices: list[DeviceSnapshot] = []
        stale_nodes: dict[str, float] = {}
        threshold = self.stale_threshold_s
        device_ages: dict[str, float] = {}
        # device_ages is by DeviceSnapshot.key: where two devices share one (kept apart in the
        # cache as key#ident, then or earlier), every reading is a copy with its age instead
        collided = collided or any("#" in key for key in cache)
        for key, cached in self._cache.items():
            fresh = read.get(key)
            gone = fresh is None
            age = older.get(key) if not gone else None
            if fresh is not None and age is not None and age <= threshold:
                if collided:
                    fresh = with_age(fresh, age)
                else:
                    device_ages[key] = age  # the reading as first read, only older
                devices.append(fresh)
                continue
            if fresh is not None and age is None and (fresh.age_s or 0.0) <= threshold:
                devices.append(fresh)  # read this refresh, with its age
                continue
            exporter_down = cached.instance in down_instances
            device = self._aged(cached, now, force_stale=gone and exporter_down)
            if device.state != "ok":
                stale_nodes[device.node] = max(stale_nodes.get(device.node, 0.0), device.age_s or 0)
            devices.append(device)
        devices.sort(key=lambda d: (d.node, d.vendor, d.index, d.uuid))
        nodes_by_instance = {c.instance: c.device.node for c in self._cache.values()}
        for inst in sorted(down_instances):
            node = nodes_by_instance.get(inst)
            if node is not None:
                errors.append(f"{node}: exporter {inst} is down (up == 0)"
                              + (f"; last data {stale_nodes[node]:.0f} s old"
                                 if node in stale_nodes else ""))
        named = {e.partition(":")[0] for e in errors}
        for node, age in sorted(stale_nodes.items()):
            if node not in named:
                errors.append(f"{node}: no data for {age:.0f} s")
        if self._static_error:
            errors.append(self._static_error)
        message = None
        if not devices:
            message = (f"Prometheus {self.url} answered but has no DCGM, Gaudi or Neuron metrics "
                       "(is dcgm-exporter scraped?)")
        return Snapshot(timestamp=now, source=self.spec, source_kind="fleet",
                        devices=tuple(devices), message=message, errors=tuple(errors),
                        device_ages=device_ages)

    def history_blocking(self, seconds: float, step_s: float = 15.0) -> list[Snapshot]:
        """Range query of the per-refresh query -> one Snapshot per step (oldest first); device
        timestamps are their samples' own, so a reading repeated across steps is recognisable.
        Returns [] when Prometheus cannot answer (the live refresh reports why)."""
        try:
            return self._history_locked(seconds, step_s)
        except Exception:  # noqa: BLE001 - a backfill is optional; never raise into the UI loop
            return []

    def _history_locked(self, seconds: float, step_s: float) -> list[Snapshot]:
        with self._lock:
            end = self._clock()
            deadline = self._deadline()
            try:
                if self._is_large(end, deadline):
                    return []  # an aggregated fleet has no per-device history to backfill
                if end - self._static_at >= self.static_every_s:
                    self._refresh_static(end, deadline)
                matrix = self.query_range(self.query, end - seconds, end, step_s, deadline)
            except (OSError, PrometheusResponseError, ValueError):
                return []
            by_time: dict[float, list[dict]] = {}
            for series in matrix:
                labels = series.get("metric") if isinstance(series, dict) else None
                values = series.get("values") if isinstance(series, dict) else None
                if not isinstance(labels, dict) or not isinstance(values, list):
                    continue
                for pair in values:
                    try:
                        ts, raw = float(pair[0]), pair[1]
                    except (TypeError, ValueError, IndexError):
                        continue
                    by_time.setdefault(ts, []).append({"metric": labels, "value": [ts, raw]})
            snapshots = []
            for ts in sorted(by_time):
                groups, _ = group_series(by_time[ts], neuron_per_device=self._neuron_per_device)
                self._apply_static(groups)
                devices = devices_from_groups(groups, timestamp=ts)
                snapshots.append(Snapshot(timestamp=ts, source=self.spec, source_kind="fleet",
                                          devices=tuple(devices)))
            return snapshots
