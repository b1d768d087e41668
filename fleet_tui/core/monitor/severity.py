"""How serious a finding or an alert is: one closed set, one order.

A ``str`` Enum, so values compare equal to the strings that JSON, TOML alert rules and older
callers use (``Severity.CRITICAL == "critical"``). ``rank`` is the one order every list of
findings, alerts and notices sorts by: critical first. The UI's style map lives in the UI (the core
imports no styling).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"
    OK = "ok"

    @property
    def rank(self) -> int:
        """0 for critical, 1 warning, 2 info, 3 ok: sort ascending for worst first."""
        return _RANK[self]

    def __str__(self) -> str:  # "critical", as the plain string would print
        return self.value


_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2, Severity.OK: 3}
_BY_VALUE = {s.value: s for s in Severity}


def severity_rank(severity: str | Severity) -> int:
    """Where a finding of this severity sorts, worst first; an unknown string after "ok"."""
    s = _BY_VALUE.get(str(severity.value if isinstance(severity, Severity) else severity))
    return len(_RANK) if s is None else _RANK[s]


def worst(severities: Iterable[str | Severity]) -> str:
    """The most serious of ``severities`` ("ok" for none)."""
    best: str = Severity.OK.value
    for s in severities:
        if severity_rank(s) < severity_rank(best):
            best = str(s)
    return best


__all__ = ["Severity", "severity_rank", "worst"]
