"""How the UI shows a severity: its colour, its mark and its notification level, one map each.

The core's ``Severity`` (``core/monitor/severity.py``) is the closed set and its one order; every
pane, card, table and toast looks a severity up here, so a finding looks the same wherever it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_tui.core.monitor.severity import Severity

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

_STYLE = {Severity.CRITICAL: "$error", Severity.WARNING: "$warning", Severity.INFO: "$primary",
          Severity.OK: "$success"}
# Marks readable without colour (NO_COLOR, 16-colour terminals): severity is not colour alone.
_MARK = {Severity.CRITICAL: "!!", Severity.WARNING: "! ", Severity.INFO: "· ", Severity.OK: "✓ "}
# Textual's notification levels: a critical alert is an error toast
_TOAST: dict[Severity, SeverityLevel] = {
    Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "information",
    Severity.OK: "information"}
_BY_VALUE = {s.value: s for s in Severity}


def _known(severity: str | Severity) -> Severity | None:
    return severity if isinstance(severity, Severity) else _BY_VALUE.get(severity)


def severity_style(severity: str | Severity, *, emphasis: bool = False) -> str:
    """The style of ``severity``; ``emphasis``: critical and warning in bold as well (a finding's
    headline, a device's row). An unknown word is plain text."""
    s = _known(severity)
    if s is None:
        return "$text"
    style = _STYLE[s]
    return f"b {style}" if emphasis and s in (Severity.CRITICAL, Severity.WARNING) else style


def severity_mark(severity: str | Severity) -> str:
    """Two cells that say the severity without colour ("!!", "! ", "· ", "✓ "; blank if unknown)."""
    s = _known(severity)
    return "  " if s is None else _MARK[s]


def toast_level(severity: str | Severity) -> SeverityLevel:
    """The notification level an alert of ``severity`` is shown at (unknown: a warning)."""
    s = _known(severity)
    return "warning" if s is None else _TOAST[s]


__all__ = ["severity_mark", "severity_style", "toast_level"]
