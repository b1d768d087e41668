"""Fleets past 4,096 GPUs: the roll-ups computed by Prometheus, not by the client.

Reading every series of 32,768 GPUs (~25 per GPU) is ~800,000 series a refresh: more JSON than one
answer may hold (``client.MAX_RESPONSE_BYTES``) and seconds of client CPU. Above
``AGGREGATE_ABOVE_DEVICES`` the fleet is read as one instant query whose parts are PromQL
aggregations, each tagged with a ``fleet_tui_agg`` label (``label_replace``) so one answer carries
them all:

- per node (``Hostname``): device count, mean NVML utilization, mean SM activity, idle devices,
  power drawn, framebuffer used and total;
- per job (``hpc_job``, the label jobs are attributed by): device count, mean utilization, idle,
  nodes;
- the ``WORST_DEVICES`` least-used devices (``bottomk`` of utilization) with their identity;
- per node, devices whose exporter is down (``up == 0``) that reported in the last 15 minutes;
- fleet-wide counts of the diagnosis inputs: devices at ≥ 95 % framebuffer, devices drawing power
  while idle, devices with an XID error set, devices power-capped or thermally throttled now
  (their clock-event reasons).

*Idle* is ``core.fleet``'s rule for a device without a diagnosis: NVML utilization under
``rollup.IDLE_UTIL_MAX_PCT`` and SM activity (where exported) under the same share. One node's devices in
full come from ``build_node_query`` (the per-refresh query with a node-name matcher), for a
drill-down. Whether a fleet is that large is one number, ``build_count_query``, asked first.
Cost at 4,096 nodes × 8 GPUs: bench/bench_fleet.py ``--nodes 4096`` (docs/head-node.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from fleet_tui.core.errors import FieldError, escape_braces
from fleet_tui.core.monitor.rollup import (
    IDLE_UTIL_MAX_PCT,
    FleetAggregate,
    JobAggregate,
    NodeAggregate,
    WorstDevice,
)
from fleet_tui.core.monitor.snapshot import (
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_HW_THERMAL,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
)
from fleet_tui.core.monitor.sources.prometheus.client import Deadline, PrometheusClient
from fleet_tui.core.monitor.sources.prometheus.metrics import (
    DCGM_ID_LABELS,
    DYNAMIC_NAMES,
    PROBE_LABEL,
    STATIC_NAMES,
)
from fleet_tui.core.monitor.sources.prometheus.parse import parse_envelope, parse_value

__all__ = ["AGGREGATE_ABOVE_DEVICES", "AGGREGATE_ENV", "FleetAggregate", "JobAggregate",
           "NodeAggregate", "WorstDevice", "aggregate_threshold", "aggregate_from_answer",
           "build_aggregate_query", "build_count_query", "build_node_query",
           "device_count_from_answer", "idle_expr", "per_device", "read_device_count",
           "read_fleet_aggregate", "tag_part"]

# Above this many devices a refresh asks for aggregates: 4,096 GPUs read device by device cost
# ~130-170 ms CPU a refresh at a 15 s scrape (~1 s when every GPU is new each refresh), 32,768
# aggregated ~160-220 ms (bench/bench_fleet.py --nodes 512 / --nodes 4096, docs/head-node.md).
AGGREGATE_ABOVE_DEVICES = 4096
WORST_DEVICES = 50  # least-used devices shown in full; a page of the offenders table
AGG_LABEL = "fleet_tui_agg"
NODE_LABELS = ("Hostname", "hostname", "instance")  # where a node's name is, in ``node_of``'s order
NODE_KEY = "fleet_tui_node"  # the node as the aggregate names it (``_per_device``)
JOB_LABEL = "hpc_job"
MEM_FULL_FRAC = 0.95  # framebuffer share that counts as "memory full" (a capacity-pressure input)
IDLE_POWER_W = 100.0  # power drawn by an idle device that counts as "not parked"
# clock-event reason bits (``snapshot.CLOCK_EVENT_*``) counted as "power capped" / "thermal"
POWER_CAP_BITS = (CLOCK_EVENT_SW_POWER_CAP, CLOCK_EVENT_HW_POWER_BRAKE)
THERMAL_BITS = (CLOCK_EVENT_HW_SLOWDOWN, CLOCK_EVENT_SW_THERMAL, CLOCK_EVENT_HW_THERMAL)
STALE_LOOKBACK = "15m"  # a device whose exporter is down is shown this long (forget_after_s)

_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_SM = "DCGM_FI_PROF_SM_ACTIVE"  # a 0..1 ratio
_ID = ", ".join(DCGM_ID_LABELS)

AGGREGATE_ENV = "FLEET_TUI_AGGREGATE_ABOVE"  # the threshold where no caller gives one (the app)


def aggregate_threshold(value: int | None, env: Mapping[str, str]) -> int:
    """The device count above which a refresh reads server-side aggregates: ``value``, else
    ``FLEET_TUI_AGGREGATE_ABOVE``, else ``AGGREGATE_ABOVE_DEVICES``. FieldError ``aggregate_above``
    for a negative count or an environment value that is no whole number."""
    if value is None:
        text = env.get(AGGREGATE_ENV, "").strip()
        if not text:
            return AGGREGATE_ABOVE_DEVICES
        if not (text.isascii() and text.isdigit()) or len(text) > 9:
            raise FieldError("aggregate_above", f"{AGGREGATE_ENV}={escape_braces(text[:40])}: "
                             "expected a whole number of devices (0 = always aggregate)")
        value = int(text)
    if value < 0:
        raise FieldError("aggregate_above", f"{{aggregate_above}} {value}: must be 0 or more devices")
    return value


def tag_part(expr: str, name: str) -> str:
    return f'label_replace({expr}, "{AGG_LABEL}", "{name}", "", "")'


def per_device(metric: str, *extra: str) -> str:
    """``metric`` once per device, with its node in ``NODE_KEY`` as ``parse.node_of`` reads it:
    Hostname, else hostname, else the scrape instance."""
    expr = f"max by ({', '.join((*DCGM_ID_LABELS, *extra))}) ({metric})"
    for source in reversed(NODE_LABELS):  # later ones win where present
        expr = f'label_replace({expr}, "{NODE_KEY}", "$1", "{source}", "(.+)")'
    return expr


def idle_expr() -> str:
    """Every idle device (utilization < the idle share, and SM activity under it where exported)."""
    return (f"({per_device(_UTIL)} < {IDLE_UTIL_MAX_PCT:g}) unless on ({_ID}) "
            f"({per_device(_SM)} >= {IDLE_UTIL_MAX_PCT / 100:g})")


def mem_total_expr() -> str:
    """Each device's framebuffer size (MiB) as ``devices.device_from_acc`` takes it: FB_TOTAL
    where exported, else used + free + reserved (reserved where exported). ``group_left`` keeps
    the left side's labels (the node among them), so the three alternatives match for ``or``."""
    used, free = per_device("DCGM_FI_DEV_FB_USED"), per_device("DCGM_FI_DEV_FB_FREE")
    reserved, total = per_device("DCGM_FI_DEV_FB_RESERVED"), per_device("DCGM_FI_DEV_FB_TOTAL")
    both = f"({used} + on ({_ID}) group_left () {free})"
    return f"({total} or ({both} + on ({_ID}) group_left () {reserved}) or {both})"


def _any_bit(bits: tuple[int, ...]) -> str:
    """Every device whose clock-event (throttle) reasons have one of ``bits`` set. PromQL has no
    bitwise and: bit b is set where floor(reasons / b) is odd."""
    reasons = (f"({per_device('DCGM_FI_DEV_CLOCKS_EVENT_REASONS')} or "
               f"{per_device('DCGM_FI_DEV_CLOCK_THROTTLE_REASONS')})")
    return " or ".join(f"(floor({reasons} / {b}) % 2 == 1)" for b in bits)


def build_aggregate_query(worst: int = WORST_DEVICES) -> str:
    """One instant query whose answer is the fleet's roll-ups, each part tagged ``fleet_tui_agg``."""
    util, sm, idle = per_device(_UTIL), per_device(_SM), idle_expr()
    util_job = per_device(_UTIL, JOB_LABEL)
    used = per_device("DCGM_FI_DEV_FB_USED")
    recent = per_device(f"last_over_time({_UTIL}[{STALE_LOOKBACK}])")
    parts = [
        tag_part(f"count by ({NODE_KEY}) ({util})", "node_devices"),
        tag_part(f"avg by ({NODE_KEY}) ({util})", "node_util"),
        tag_part(f"avg by ({NODE_KEY}) ({sm})", "node_sm"),
        tag_part(f"count by ({NODE_KEY}) ({idle})", "node_idle"),
        tag_part(f"sum by ({NODE_KEY}) ({per_device('DCGM_FI_DEV_POWER_USAGE')})", "node_power"),
        tag_part(f"sum by ({NODE_KEY}) ({used})", "node_mem_used"),
        tag_part(f"sum by ({NODE_KEY}) ({mem_total_expr()})", "node_mem_total"),
        # devices whose exporter is down now, seen in the last STALE_LOOKBACK (as the per-device
        # view keeps a stale device for ``forget_after_s``)
        tag_part(f"count by ({NODE_KEY}, instance) ({recent} and on (instance) (up == 0))",
             "node_stale"),
        tag_part(f"count by ({JOB_LABEL}) ({util_job})", "job_devices"),
        tag_part(f"count by ({JOB_LABEL}) (count by ({JOB_LABEL}, {NODE_KEY}) ({util_job}))",
             "job_nodes"),
        tag_part(f"avg by ({JOB_LABEL}) ({util_job})", "job_util"),
        tag_part(f"count by ({JOB_LABEL}) (({idle}) * on ({_ID}) group_left ({JOB_LABEL}) "
             f"(0 * {util_job}))", "job_idle"),
        tag_part(f"bottomk({int(worst)}, {util})", "worst"),
        tag_part(f"count({used} / on ({_ID}) ({mem_total_expr()}) >= {MEM_FULL_FRAC:g})",
             "count_mem_full"),
        tag_part(f"count(({idle}) and on ({_ID}) ({per_device('DCGM_FI_DEV_POWER_USAGE')} "
             f"> {IDLE_POWER_W:g}))", "count_idle_powered"),
        tag_part(f"count({per_device('DCGM_FI_DEV_XID_ERRORS')} > 0)", "count_xid"),
        tag_part(f"count({_any_bit(POWER_CAP_BITS)})", "count_power_capped"),
        tag_part(f"count({_any_bit(THERMAL_BITS)})", "count_thermal"),
    ]
    return " or ".join(parts)


def build_count_query() -> str:
    """The fleet's DCGM device count, one number: whether a refresh reads devices or aggregates."""
    return f"count({per_device(_UTIL)})"


def build_node_query(node: str) -> str:
    """One node's DCGM metrics (moving ones and the slow facts: limits, totals, model name) and
    sample times, as the per-device refresh reads them; the node is matched in each label
    ``parse.node_of`` may name it by (Hostname, hostname, instance), so a caller keeps the devices
    whose ``node`` is ``node``."""
    if not node or any(c in node for c in '"\\\n'):
        raise ValueError(f"node name {node!r}: expected a host name without quotes or backslashes")
    names = "|".join(n for n in (*DYNAMIC_NAMES, *STATIC_NAMES) if n.startswith("DCGM_"))
    by = ", ".join((*DCGM_ID_LABELS, "modelName", "GPU_I_PROFILE"))
    parts = []
    for label in NODE_LABELS:
        parts.append(f'max by (__name__, {by}) ({{__name__=~"{names}", {label}="{node}"}})')
        probe = f'max by ({_ID}) (timestamp({_UTIL}{{{label}="{node}"}}))'
        parts.append(f'label_replace({probe}, "{PROBE_LABEL}", "nvidia", "", "")')
    return " or ".join(parts)


def aggregate_from_answer(body: bytes, timestamp: float, threshold: int | None = None,
                          ) -> FleetAggregate:
    """The roll-ups in one answer of ``build_aggregate_query``."""
    per_node: dict[str, dict[str, float | None]] = {}
    per_job: dict[str, dict[str, float | None]] = {}
    worst: list[WorstDevice] = []
    counts: dict[str, int] = {}
    down: list[tuple[str, str]] = []
    for item in parse_envelope(body):
        labels: Mapping[str, str] = item.get("metric") or {}
        value = item.get("value") or (None, None)
        v = parse_value(value[1] if len(value) > 1 else None)
        part = labels.get(AGG_LABEL, "")
        if part == "node_stale":
            node = labels.get(NODE_KEY, "")
            mine = per_node.setdefault(node, {})
            mine["stale"] = (mine.get("stale") or 0.0) + (v or 0.0)
            down.append((node, labels.get("instance", "")))
        elif part.startswith("node_"):
            per_node.setdefault(labels.get(NODE_KEY, ""), {})[part[5:]] = v
        elif part.startswith("job_"):
            per_job.setdefault(labels.get(JOB_LABEL, ""), {})[part[4:]] = v
        elif part == "worst":
            gpu = labels.get("gpu", "")
            worst.append(WorstDevice(node=labels.get(NODE_KEY, ""),
                                     index=int(gpu) if gpu.isascii() and gpu.isdigit()
                                     and len(gpu) <= 6 else None,
                                     uuid=labels.get("UUID") or labels.get("uuid", ""),
                                     util_pct=v))
        elif part.startswith("count_"):
            counts[part[6:]] = int(v or 0)
    nodes = tuple(NodeAggregate(node=name, devices=int(a.get("devices") or 0),
                                util_pct=a.get("util"), sm_active_pct=_pct(a.get("sm")),
                                idle_devices=int(a.get("idle") or 0), power_w=a.get("power"),
                                mem_used_bytes=_mib(a.get("mem_used")),
                                mem_total_bytes=_mib(a.get("mem_total")),
                                stale_devices=int(a.get("stale") or 0))
                  for name, a in sorted(per_node.items()) if a.get("devices") or a.get("stale"))
    jobs = tuple(JobAggregate(job=name, devices=int(a.get("devices") or 0), util_pct=a.get("util"),
                              idle_devices=int(a.get("idle") or 0), nodes=int(a.get("nodes") or 0))
                 for name, a in sorted(per_job.items()) if name)
    worst.sort(key=lambda w: (w.util_pct if w.util_pct is not None else -1.0, w.node, w.index or 0))
    for name in ("mem_full", "idle_powered", "xid", "power_capped", "thermal"):
        counts.setdefault(name, 0)  # ``count()`` of nothing is an empty answer, not 0
    return FleetAggregate(timestamp=timestamp, nodes=nodes, jobs=jobs, worst=tuple(worst),
                          counts=counts, answer_bytes=len(body), threshold=threshold,
                          down=tuple(sorted(down)))


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100.0 * ratio


def _mib(mib: float | None) -> int | None:
    """DCGM's framebuffer figures are MiB."""
    return None if mib is None else int(mib * 1024 * 1024)


def device_count_from_answer(body: bytes) -> int | None:
    """The number in an answer of ``build_count_query``: 0 when the fleet has no DCGM GPU (an
    empty answer); None when the answer is no count (not one label-less sample: a proxy or a
    stand-in that answers every query alike), so the caller keeps reading devices."""
    items = parse_envelope(body)
    if not items:
        return 0
    if len(items) != 1 or items[0].get("metric"):
        return None
    value = items[0].get("value") or (None, None)
    v = parse_value(value[1] if len(value) > 1 else None)
    return None if v is None else int(v)


def read_fleet_aggregate(client: PrometheusClient, *, worst: int = WORST_DEVICES,
                         deadline: Deadline | None = None, at: float | None = None,
                         threshold: int | None = None) -> FleetAggregate:
    """One refresh of a large fleet: one aggregate query, answered by the server (evaluated at
    ``at``, unix seconds, when given: the same instant as another query's); ``threshold``: the
    device count past which the caller reads aggregates (kept in the answer for the front ends)."""
    body = _instant(client, build_aggregate_query(worst), deadline, at)
    return aggregate_from_answer(body, time.time() if at is None else at, threshold)


def read_device_count(client: PrometheusClient, *, deadline: Deadline | None = None,
                      at: float | None = None) -> int | None:
    """How many DCGM GPUs the fleet has (``build_count_query``: one number, cheap to ask; None:
    the answer was no count, ``device_count_from_answer``)."""
    return device_count_from_answer(_instant(client, build_count_query(), deadline, at))


def _instant(client: PrometheusClient, query: str, deadline: Deadline | None,
             at: float | None) -> bytes:
    if at is None:
        return client.query_body(query, deadline)
    params = {"query": query, "timeout": client.promql_timeout, "time": f"{at:.3f}"}
    return client.get("/api/v1/query", params, post=True, deadline=deadline)

