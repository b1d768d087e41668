"""Alert rules (TOML) and their evaluation: threshold + duration, de-duplicated with a cooldown.

Rules come from the bundled ``catalogs/monitor/alerts.toml`` and the user's
``~/.config/fleet-tui/alerts.toml`` (same name = replace; ``enabled = false`` = off). A broken rule
is reported as ``file:line: field: message`` and skipped; the others still load.

A rule fires when its condition has held without interruption for ``duration``; while the condition
lasts it fires again only after ``cooldown``. When the condition clears, the timer resets.

A rule with ``min_devices`` targets jobs, not devices: it holds for a job while at least that many
of the job's devices meet its metric or diagnosis (e.g. ``diagnosis = "idle"``, ``min_devices = 8``,
``duration = "30m"``: a job holding 8 GPUs idle for 30 minutes). Job rules are evaluated only when
the caller knows which devices each job holds (``evaluate(..., jobs=...)``; the Jobs pane does).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleet_tui.core import paths
from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.analysis import KINDS, DeviceAnalysis, Diagnosis
from fleet_tui.core.monitor.history import metric_value
from fleet_tui.core.monitor.severity import severity_rank
from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.records import record

SEVERITIES = ("info", "warning", "critical")
OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
       "<=": lambda a, b: a <= b}
MACHINE_METRICS = ("cost_usd_per_day", "cost_usd_per_hour", "cost_usd_so_far")
DEVICE_METRICS = ("gpu_util_pct", "mem_util_pct", "mem_used_pct", "mem_used_bytes", "temp_c",
                  "power_w", "power_pct", "sm_clock_mhz", "mem_clock_mhz", "sm_active_pct",
                  "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct",
                  "fp16_active_pct", "pcie_rx_bytes_s", "pcie_tx_bytes_s", "pcie_bytes_s",
                  "nvlink_rx_bytes_s", "nvlink_tx_bytes_s", "ecc_corrected", "ecc_uncorrected")
_KEYS = ("name", "metric", "diagnosis", "op", "threshold", "duration", "severity", "cooldown",
         "message", "min_confidence", "enabled", "min_devices", "unless", "min_severity")
MACHINE_KEY = "machine"


def bundled_rules_path() -> Path:
    return paths.bundled_catalog_dir() / "monitor" / "alerts.toml"


def user_rules_path() -> Path:
    return paths.user_config_dir() / "alerts.toml"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like "30s", "10m", "2h", "1d"; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("not a duration")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    m = _DURATION.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration (use seconds, or '30s', '10m', '2h', '1d')")
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _UNIT_S[unit]


@record
class AlertRule:
    name: str
    severity: str
    duration_s: float
    cooldown_s: float
    metric: str | None = None
    diagnosis: str | None = None
    op: str = ">"
    threshold: float | None = None
    min_confidence: float = 0.5
    message: str | None = None
    enabled: bool = True
    source: str = ""  # file:line the rule came from
    min_devices: int | None = None  # a job rule: this many of a job's devices meet the condition
    # a diagnosis kind that explains the condition away: while the device has it, the rule does
    # not hold (memory-high unless engine_pool: a serving engine's pool is full by design)
    unless: str | None = None
    # a diagnosis rule: only a finding this severe or worse holds it (memory_growth at "critical":
    # out of memory within a minute, told at once)
    min_severity: str | None = None

    @property
    def machine_wide(self) -> bool:
        return self.metric in MACHINE_METRICS

    @property
    def per_job(self) -> bool:
        return self.min_devices is not None

    def describe(self) -> str:
        what = (f"{self.metric} {self.op} {self.threshold:g}" if self.metric
                else f"diagnosis {self.diagnosis}")
        if self.per_job:
            what = f"{self.min_devices}+ devices of a job with {what}"
        if self.min_severity:
            what += f" at {self.min_severity} or worse"
        if self.unless:
            what += f" unless {self.unless}"
        return f"{what} for {self.duration_s:g} s"


@record
class Alert:
    """One alert event (immutable). ``since`` = when the condition started, ``at`` = when fired."""

    rule: str
    severity: str
    message: str
    device_key: str
    device_index: int | None
    at: float
    since: float
    value: float | str | None = None
    threshold: float | None = None

    @property
    def title(self) -> str:
        where = "" if self.device_index is None else f" (GPU {self.device_index})"
        return f"{self.rule}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "device_key": self.device_key, "device": self.device_index, "at": self.at,
                "since": self.since, "value": self.value, "threshold": self.threshold}


JOB_KEY = "job:"  # the device_key of a job rule's alert: "job:<job id>"


def _problem(path: Path, line: int | None, field: str, msg: str) -> str:
    from fleet_tui.core.tomlio import problem

    return problem(path, line, field, msg)


def parse_rules_file(path: Path) -> tuple[list[AlertRule], list[str]]:
    """Rules of one file and the problems found; bad rules are skipped, good ones kept."""
    from fleet_tui.core.tomlio import read_toml

    doc, probs = read_toml(path)
    if doc is None:
        return [], probs
    problems: list[str] = []
    for key in doc.data:
        if key != "rule":
            problems.append(_problem(path, doc.line_of(None, key=key) or doc.line_of(key), key,
                                     f"unknown table or key '{key}' (allowed: [[rule]])"))
    entries = doc.data.get("rule", [])
    if not isinstance(entries, list):
        problems.append(_problem(path, doc.line_of(None, key="rule"), "rule",
                                 "must be an array of tables: [[rule]]"))
        return [], problems
    rules = []
    for i, entry in enumerate(entries):
        rule, errs = _parse_rule(doc, i, entry)
        problems += errs
        if rule is not None:
            rules.append(rule)
    return rules, problems


def _parse_rule(doc, i: int, entry: Any) -> tuple[AlertRule | None, list[str]]:
    path = doc.path
    errs: list[str] = []
    start = doc.line_of("rule", i)

    def err(key: str | None, msg: str) -> None:
        line = doc.line_of("rule", i, key) if key else start
        errs.append(_problem(path, line or start, f"rule[{i}]" + (f".{key}" if key else ""), msg))

    if not isinstance(entry, dict):
        err(None, "each [[rule]] must be a table")
        return None, errs
    for key in entry:
        if key not in _KEYS:
            near = difflib.get_close_matches(key, _KEYS, n=1)
            err(key, f"unknown key '{key}'" + (f"; did you mean '{near[0]}'?" if near else "")
                + f" (allowed: {', '.join(_KEYS)})")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        err("name" if "name" in entry else None, "every rule needs a name (a non-empty string)")
        name = None
    metric, diagnosis = entry.get("metric"), entry.get("diagnosis")
    if (metric is None) == (diagnosis is None):
        err(None, "give exactly one of 'metric' or 'diagnosis'")
    if metric is not None and metric not in DEVICE_METRICS + MACHINE_METRICS:
        near = difflib.get_close_matches(str(metric), DEVICE_METRICS + MACHINE_METRICS, n=1)
        err("metric", f"unknown metric {metric!r}" + (f"; did you mean {near[0]!r}?" if near else "")
            + f" (allowed: {', '.join(DEVICE_METRICS + MACHINE_METRICS)})")
    if diagnosis is not None and diagnosis not in KINDS:
        near = difflib.get_close_matches(str(diagnosis), KINDS, n=1)
        err("diagnosis", f"unknown diagnosis {diagnosis!r}"
            + (f"; did you mean {near[0]!r}?" if near else "") + f" (allowed: {', '.join(KINDS)})")
    op = entry.get("op", ">")
    if op not in OPS:
        err("op", f"unknown comparison {op!r} (allowed: {', '.join(OPS)})")
    threshold = entry.get("threshold")
    if metric is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            err("threshold" if "threshold" in entry else None,
                "a metric rule needs a numeric 'threshold'")
    severity = entry.get("severity", "warning")
    if severity not in SEVERITIES:
        err("severity", f"unknown severity {severity!r} (allowed: {', '.join(SEVERITIES)})")
    durations = {}
    for key, default in (("duration", 0), ("cooldown", 600)):
        try:
            durations[key] = parse_duration(entry.get(key, default))
        except ValueError as exc:
            err(key, str(exc))
    min_conf = entry.get("min_confidence", 0.5)
    if isinstance(min_conf, bool) or not isinstance(min_conf, (int, float)) or not 0 <= min_conf <= 1:
        err("min_confidence", "must be a number between 0 and 1")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        err("enabled", "must be true or false")
    message = entry.get("message")
    if message is not None and not isinstance(message, str):
        err("message", "must be a string")
    min_devices = entry.get("min_devices")
    if min_devices is not None and (isinstance(min_devices, bool) or not isinstance(min_devices, int)
                                    or min_devices < 1):
        err("min_devices", "must be a whole number of devices, 1 or more")
    elif min_devices is not None and metric in MACHINE_METRICS:
        err("min_devices", f"a job rule needs a device metric or a diagnosis, not {metric!r}")
    unless = entry.get("unless")
    if unless is not None and unless not in KINDS:
        near = difflib.get_close_matches(str(unless), KINDS, n=1)
        err("unless", f"unknown diagnosis {unless!r}"
            + (f"; did you mean {near[0]!r}?" if near else "") + f" (allowed: {', '.join(KINDS)})")
    min_severity = entry.get("min_severity")
    if min_severity is not None and (min_severity not in SEVERITIES or diagnosis is None):
        err("min_severity", f"must be one of {', '.join(SEVERITIES)}, on a diagnosis rule")
    if errs or name is None:  # (a missing name is one of the errors)
        return None, errs
    return AlertRule(name=name.strip(), severity=severity, duration_s=durations["duration"],
                     cooldown_s=durations["cooldown"], metric=metric, diagnosis=diagnosis, op=op,
                     threshold=float(threshold) if threshold is not None else None,
                     min_confidence=float(min_conf), message=message, enabled=enabled,
                     source=f"{path}:{start}", min_devices=min_devices, unless=unless,
                     min_severity=min_severity), []


def load_alert_rules(files: Sequence[Path] | None = None, *,
                     include_user: bool = True) -> tuple[list[AlertRule], list[str]]:
    """Bundled rules, then the user's (same name replaces). Returns (enabled rules, problems)."""
    if files is None:
        files = [bundled_rules_path()]
        if include_user and user_rules_path().is_file():
            files.append(user_rules_path())
    by_name: dict[str, AlertRule] = {}
    problems: list[str] = []
    for f in files:
        rules, probs = parse_rules_file(Path(f))
        problems += probs
        for r in rules:
            by_name[r.name] = r
    return [r for r in by_name.values() if r.enabled], problems


def strict_rules(files: Sequence[Path]) -> list[AlertRule]:
    """Like load_alert_rules but any problem is a UserError (for a file the user named)."""
    rules, problems = load_alert_rules(files, include_user=False)
    if problems:
        raise UserError("bad alert rules:\n" + "\n".join(problems))
    return rules


@dataclass
class _State:
    since: float | None = None
    last_fired: float | None = None


def _severe(diag: Any, rule: AlertRule) -> bool:
    """The finding is as severe as the rule asks (any, without ``min_severity``)."""
    return rule.min_severity is None or severity_rank(diag.severity) <= severity_rank(
        rule.min_severity)


def _has(an: DeviceAnalysis, kind: str) -> bool:
    for d in an.diagnoses:
        if d.kind == kind:
            return True
    return False


def _due_at(held: Sequence[tuple[AlertRule, _State]]) -> float:
    """The earliest time one of these held rules could fire if they go on holding, 10 ms early
    (before it, ``_check`` would return None for each; from it on, they are checked exactly)."""
    due = math.inf
    for rule, st in held:
        at = (st.since or 0.0) + rule.duration_s
        if st.last_fired is not None:
            at = max(at, st.last_fired + rule.cooldown_s)
        due = min(due, at - 0.01)
    return due


def _hit_order(hit: tuple[int, int, Alert]) -> tuple[int, int]:
    return hit[0], hit[1]


class _RuleIndex:
    """The enabled rules by what they watch, with their position in the rule list."""

    __slots__ = ("rules", "machine", "metric", "diagnosis", "by_kind", "unique_names", "job")

    def __init__(self, rules: tuple[AlertRule, ...]):
        self.rules = rules
        self.job = [r for r in rules if r.per_job]
        per_device = [(i, r) for i, r in enumerate(rules) if not r.per_job]
        # (position, rule, the metric it reads): a metric rule names one (parse_rule checks)
        self.machine = [(i, r, r.metric) for i, r in per_device if r.machine_wide and r.metric]
        self.metric = [(i, r, r.metric) for i, r in per_device if not r.machine_wide and r.metric]
        self.diagnosis = [(i, r) for i, r in per_device if not r.machine_wide and not r.metric]
        self.by_kind: dict[str, list[tuple[int, AlertRule]]] = {}
        for i, r in self.diagnosis:
            if r.diagnosis is not None:  # (a rule without a metric names a diagnosis)
                self.by_kind.setdefault(r.diagnosis, []).append((i, r))
        self.unique_names = len({r.name for r in rules}) == len(rules)


class AlertEvaluator:
    """Keeps each rule's timer per device and emits ``Alert`` events."""

    def __init__(self, rules: Iterable[AlertRule]):
        self.rules = [r for r in rules if r.enabled]
        self._state: dict[tuple[str, str], _State] = {}
        self._index: _RuleIndex | None = None
        # device key -> names of diagnosis rules whose timer runs (condition held last time)
        self._running: dict[str, set[str]] = {}
        # device key -> (sample time, state, analysis, due) of its last reading: the same reading
        # and analysis again hold the same rules, so until ``due`` (the earliest time one of their
        # timers could fire, a little early) the device is not looked at (a fleet's unchanged
        # devices, most of them on most refreshes)
        self._quiet: dict[str, tuple[float, str, DeviceAnalysis | None, float]] = {}

    def holding(self, now: float) -> list[tuple[AlertRule, str, float]]:
        """Alerts whose condition holds now and has held for the rule's duration (fired or in
        cooldown): ``(rule, device key, since)``. What an exporter shows as *active*."""
        rules = {r.name: r for r in self.rules}
        out = []
        for (rule_name, key), st in self._state.items():
            rule = rules.get(rule_name)
            if rule is None or st.since is None or now - st.since + 1e-9 < rule.duration_s:
                continue
            out.append((rule, key, st.since))
        return out

    def _check(self, rule: AlertRule, key: str, index: int | None, now: float, held: bool,
               value: float | str | Diagnosis | None, name: str = "") -> Alert | None:
        st = self._state.get((rule.name, key))
        if st is None:
            st = self._state[(rule.name, key)] = _State()
        if not held:
            st.since = None
            return None
        if st.since is None:
            st.since = now
        if now - st.since + 1e-9 < rule.duration_s:
            return None
        if st.last_fired is not None and now - st.last_fired + 1e-9 < rule.cooldown_s:
            return None
        st.last_fired = now
        if isinstance(value, Diagnosis):
            value = value.explanation
        where = "" if index is None else f"GPU {index}{f' ({name})' if name else ''}: "
        if rule.message:
            msg = rule.message
        elif rule.metric:
            msg = (f"{rule.metric} {rule.op} {rule.threshold:g} for {now - st.since:.0f} s "
                   f"(now {value:.4g})" if isinstance(value, (int, float)) else rule.describe())
        else:
            msg = f"diagnosis {rule.diagnosis} for {now - st.since:.0f} s"
        return Alert(rule=rule.name, severity=rule.severity, message=where + msg, device_key=key,
                     device_index=index, at=now, since=st.since, value=value,
                     threshold=rule.threshold)

    def _rule_index(self) -> _RuleIndex:
        idx = self._index
        rules = tuple(self.rules)
        if idx is None or idx.rules != rules:  # (first call, or the rule list was changed)
            idx = self._index = _RuleIndex(rules)
            diag_names = {r.name for _, r in idx.diagnosis}
            self._running = {}
            self._quiet = {}
            for (name, key), st in self._state.items():
                if st.since is not None and name in diag_names:
                    self._running.setdefault(key, set()).add(name)
        return idx

    def _machine_hits(self, now: float, idx: _RuleIndex, machine: Mapping[str, float | None],
                      ) -> list[tuple[int, int, Alert]]:
        """The machine-wide rules that fire now, as (rule position, -1, alert)."""
        hits: list[tuple[int, int, Alert]] = []
        for pos, rule, metric in idx.machine:
            v = machine.get(metric)
            meets = v is not None and OPS[rule.op](v, rule.threshold)
            a = self._check(rule, MACHINE_KEY, None, now, meets, v)
            if a:
                hits.append((pos, -1, a))
        return hits

    def evaluate(self, now: float, devices: Sequence[DeviceSnapshot],
                 analyses: Mapping[str, DeviceAnalysis] | None = None,
                 machine: Mapping[str, float | None] | None = None, *,
                 keys: Sequence[str] | None = None,
                 jobs: Mapping[str, Sequence[str]] | None = None) -> list[Alert]:
        """Alerts that fire now, in rule order, then device order, then job alerts. ``keys``: the
        devices' keys when the caller has them; ``jobs``: job id -> the keys of its devices, for
        the job rules (without it they are not evaluated)."""
        idx = self._rule_index()
        job_alerts = self._evaluate_jobs(now, idx.job, devices, analyses or {}, jobs) \
            if jobs is not None and idx.job else []
        if not idx.unique_names:  # rules sharing a name share timers: evaluate rule by rule
            return self._evaluate_by_rule(now, devices, analyses, machine) + job_alerts
        analyses = analyses or {}
        state = self._state
        hits = self._machine_hits(now, idx, machine or {})  # (rule position, device position, alert)
        by_kind = idx.by_kind
        running_by_key = self._running
        quiet_by_key = self._quiet
        for j, (d, key) in enumerate(zip(devices, keys or [d.key for d in devices])):
            an = analyses.get(key)
            quiet = quiet_by_key.get(key)
            if (quiet is not None and now < quiet[3] and quiet[2] is an
                    and quiet[0] == d.timestamp and quiet[1] == d.state):
                continue  # the same reading and analysis as last time, and no timer due
            held: list[tuple[AlertRule, _State]] = []
            for pos, rule, metric in idx.metric:
                v = metric_value(d, metric)
                if v is None or not OPS[rule.op](v, rule.threshold) or (
                        rule.unless is not None and an is not None and _has(an, rule.unless)):
                    st = state.get((rule.name, key))
                    if st is not None:
                        st.since = None
                    continue
                a = self._check(rule, key, d.index, now, True, v, d.name)
                held.append((rule, state[(rule.name, key)]))
                if a:
                    hits.append((pos, j, a))
            # Diagnosis rules: only those whose diagnosis this device has are looked at; the
            # others can only need their running timer reset.
            held_names: list[str] = []
            if an is not None and by_kind:
                seen: list[str] = []
                for diag in an.diagnoses:
                    kind = diag.kind
                    rules = by_kind.get(kind)
                    if rules is None or kind in seen:  # the first diagnosis of a kind counts
                        continue
                    seen.append(kind)
                    for pos, rule in rules:
                        if diag.confidence < rule.min_confidence or not _severe(diag, rule):
                            continue
                        held_names.append(rule.name)
                        # value: the diagnosis, whose explanation is built only if the rule fires
                        a = self._check(rule, key, d.index, now, True, diag, d.name)
                        held.append((rule, state[(rule.name, key)]))
                        if a:
                            hits.append((pos, j, a))
            running = running_by_key.get(key)
            if running:
                for name in [n for n in running if n not in held_names]:
                    st = state.get((name, key))
                    if st is not None:
                        st.since = None
                    running.discard(name)
            if held_names:
                if running is None:
                    running = running_by_key[key] = set()
                running.update(held_names)
            if d.timestamp:
                quiet_by_key[key] = (d.timestamp, d.state, an, _due_at(held))
            else:
                quiet_by_key.pop(key, None)
        if len(hits) > 1:
            hits.sort(key=_hit_order)
        return [h[2] for h in hits] + job_alerts

    def _evaluate_jobs(self, now: float, rules: Sequence[AlertRule],
                       devices: Sequence[DeviceSnapshot], analyses: Mapping[str, DeviceAnalysis],
                       jobs: Mapping[str, Sequence[str]]) -> list[Alert]:
        """Job rules: a job's timer runs while ``min_devices`` of its devices meet the condition."""
        by_key = {d.key: d for d in devices}
        out = []
        for rule in rules:
            for job, keys in jobs.items():
                meeting = 0
                for key in keys:
                    d = by_key.get(key)
                    if d is None:
                        continue
                    if rule.metric:
                        v = metric_value(d, rule.metric)
                        meeting += v is not None and OPS[rule.op](v, rule.threshold)
                    else:
                        an = analyses.get(key)
                        diag = an.get(rule.diagnosis) if an is not None and rule.diagnosis else None
                        meeting += diag is not None and diag.confidence >= rule.min_confidence
                held = meeting >= (rule.min_devices or 1)
                a = self._check(rule, f"{JOB_KEY}{job}", None, now, held, float(meeting))
                if a:
                    what = rule.diagnosis or rule.describe()
                    text = rule.message or (f"job {job}: {meeting} of its {len(keys)} devices "
                                            f"{what} for {now - a.since:.0f} s")
                    out.append(replace(a, message=text))
        return out

    def _evaluate_by_rule(self, now: float, devices: Sequence[DeviceSnapshot],
                          analyses: Mapping[str, DeviceAnalysis] | None = None,
                          machine: Mapping[str, float | None] | None = None) -> list[Alert]:
        out: list[Alert] = []
        analyses = analyses or {}
        machine = machine or {}
        state = self._state
        per_device: list[tuple[DeviceSnapshot, str, dict[str, Any] | None]] | None = None
        for rule in self.rules:
            if rule.per_job:
                continue
            if rule.machine_wide and rule.metric:  # (machine-wide: a machine metric is named)
                v = machine.get(rule.metric)
                held = v is not None and OPS[rule.op](v, rule.threshold)
                a = self._check(rule, MACHINE_KEY, None, now, held, v)
                if a:
                    out.append(a)
                continue
            if per_device is None:
                # once per call, not once per rule: each device's key and diagnoses by kind
                per_device = []
                for d in devices:
                    key = d.key
                    an = analyses.get(key)
                    kinds = None
                    if an is not None:
                        kinds = {}
                        for diag in an.diagnoses:
                            kinds.setdefault(diag.kind, diag)  # the first of a kind, as an.get
                    per_device.append((d, key, kinds))
            metric, name = rule.metric, rule.name
            op, threshold = OPS[rule.op], rule.threshold
            for d, key, kinds in per_device:
                if metric:
                    v = metric_value(d, metric)
                    held = v is not None and op(v, threshold) and not (
                        rule.unless is not None and kinds is not None and rule.unless in kinds)
                    value: float | str | None = v
                else:
                    diag = kinds.get(rule.diagnosis) if kinds and rule.diagnosis else None
                    held = (diag is not None and diag.confidence >= rule.min_confidence
                            and _severe(diag, rule))
                    value = diag  # its explanation, built only if the rule fires
                if not held:
                    # the common case: nothing holds, so only an existing timer needs resetting
                    st = state.get((name, key))
                    if st is not None:
                        st.since = None
                    continue
                a = self._check(rule, key, d.index, now, True, value, d.name)
                if a:
                    out.append(a)
        return out
