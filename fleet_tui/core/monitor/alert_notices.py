"""What a person is told of one tick's new alerts: the app's notifications, grouped by rule."""

from __future__ import annotations

from collections.abc import Sequence

from fleet_tui.core.monitor.alerts import JOB_KEY, Alert
from fleet_tui.core.monitor.severity import severity_rank
from fleet_tui.core.records import record

# A fleet fires a rule on hundreds of devices in the same tick (memory-high on 512 GPUs five
# minutes into a run, 2,048 alerts ten minutes in, bench/bench_fleet.py): one notification each
# buried the screen and stalled the UI for half a second (Textual reaps its notifications on every
# add). A rule that fired on more than NOTICE_EACH_UP_TO devices is told once, with the count and
# the first nodes; at most NOTICE_LIMIT notices a tick, the rest folded into one. Alertmanager
# groups by rule the same way.
NOTICE_EACH_UP_TO = 3
NOTICE_LIMIT = 4


@record
class AlertNotice:
    """One notification: a single alert, a rule fired on many devices, or the rest folded."""

    title: str
    message: str
    severity: str  # the worst of the alerts it tells of
    alerts: int  # how many alerts it tells of


def _first_few(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _node(alert: Alert) -> str:
    key = alert.device_key
    return key.split("/", 1)[0] if "/" in key and not key.startswith(JOB_KEY) else ""


def _worst(severities) -> str:
    return min(severities, key=severity_rank)


def alert_notices(alerts: Sequence[Alert], each_up_to: int = NOTICE_EACH_UP_TO,
                  limit: int = NOTICE_LIMIT) -> list[AlertNotice]:
    """The notices for one tick's new alerts, worst first (see NOTICE_EACH_UP_TO)."""
    by_rule: dict[str, list[Alert]] = {}
    for a in alerts:
        by_rule.setdefault(a.rule, []).append(a)
    groups = sorted(by_rule.values(),
                    key=lambda g: severity_rank(_worst(a.severity for a in g)))
    notices: list[AlertNotice] = []
    for group in groups:
        if len(group) <= each_up_to:
            for a in group:
                node = _node(a)
                notices.append(AlertNotice(title=f"{a.title} on {node}" if node else a.title,
                                           message=a.message, severity=a.severity, alerts=1))
            continue
        first = group[0]
        detail = first.message
        prefix = f"GPU {first.device_index}"
        if first.device_index is not None and detail.startswith(prefix) and ": " in detail:
            detail = detail.split(": ", 1)[1]  # the rule's words without the first device
        if all(a.device_key.startswith(JOB_KEY) for a in group):  # a job rule (min_devices)
            jobs = [a.device_key[len(JOB_KEY):] for a in group]
            what, where = "jobs", f" ({_first_few(jobs)})"
        else:
            nodes = list(dict.fromkeys(n for n in map(_node, group) if n))
            what = "devices"
            where = (f" on {len(nodes)} node{'s' * (len(nodes) != 1)} ({_first_few(nodes)})"
                     if nodes else "")
        notices.append(AlertNotice(title=f"{first.rule} on {len(group)} {what}",
                                   message=f"{len(group)} {what}{where}: {detail}",
                                   severity=_worst(a.severity for a in group),
                                   alerts=len(group)))
    if len(notices) <= limit:
        return notices
    kept, rest = notices[:limit - 1], notices[limit - 1:]
    count = sum(n.alerts for n in rest)
    rules = list(dict.fromkeys(n.title.split(" ", 1)[0] for n in rest))
    folded = AlertNotice(title=f"{count} more alert{'s' * (count != 1)}",
                         message="Rules: " + ", ".join(rules) + ".",
                         severity=_worst(n.severity for n in rest), alerts=count)
    return kept + [folded]
