"""A diagnosis as lines of text: its headline, sentence, evidence in units, and action.

The one place the device table's label, the card and the diagnoses panel turn a ``Diagnosis`` of
the tick into words, so the three say the same thing of the same finding."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis import Diagnosis
from fleet_tui.ui.widgets.severity import severity_mark, severity_style
from fleet_tui.ui.widgets.text import styled_line


def headline(diag: Diagnosis) -> str:
    """What a device's row says of its primary diagnosis ("memory bandwidth bound, and
    power-capped")."""
    return diag.headline


def diagnosis_lines(diag: Diagnosis, *, where: str | None = None, evidence: bool = True,
                    action: bool = True, primary: bool = False) -> list:
    """``styled_line``s: the headline (with its confidence, and ``where``), the sentence, the
    evidence lines, the action. ``primary`` marks the device's primary diagnosis."""
    style = severity_style(diag.severity, emphasis=True)
    head = [(severity_mark(diag.severity), style),
            (f"{diag.headline} ({diag.confidence:.0%})", f"b {style}" if "b " not in style
             else style)]
    if primary:
        head += [(" · primary", "$text-muted")]
    if where:
        head += [(" ", None), (f"· {where}", "$text-muted")]
    lines = [styled_line(head)]
    lines.append(styled_line([("  ", None), (diag.explanation, None)]))
    if evidence:
        for item in diag.evidence_text:
            lines.append(styled_line([("  ", None), ("•", "$text-muted"), (f" {item}", None)]))
    if action and diag.action:
        lines.append(styled_line([("  ", None), ("→", "$accent"), (f" {diag.action}", None)]))
    return lines
