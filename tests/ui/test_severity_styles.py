"""One style, mark and notification level per severity (ui/widgets/severity.py): every severity the
core has gets its own, whether the finding names it as the enum or as its string."""

from __future__ import annotations

from fleet_tui.core.monitor.severity import Severity
from fleet_tui.ui.widgets.severity import severity_mark, severity_style, toast_level


def test_every_severity_has_its_own_style_and_mark():
    styles = {s: severity_style(s) for s in Severity}
    marks = {s: severity_mark(s) for s in Severity}
    assert len(set(styles.values())) == len(Severity)
    assert len(set(marks.values())) == len(Severity)
    assert all(len(m) == 2 for m in marks.values())  # the table's diagnosis column lines up


def test_a_severity_written_as_a_string_looks_like_the_enum():
    for s in Severity:
        assert severity_style(s.value) == severity_style(s)
        assert severity_style(s.value, emphasis=True) == severity_style(s, emphasis=True)
        assert severity_mark(s.value) == severity_mark(s)
        assert toast_level(s.value) == toast_level(s)


def test_emphasis_bolds_only_what_needs_attention():
    bold = {s for s in Severity if severity_style(s, emphasis=True).startswith("b ")}
    assert bold == {Severity.CRITICAL, Severity.WARNING}
    worst_first = sorted(Severity, key=lambda s: s.rank)
    levels = [toast_level(s) for s in worst_first]
    assert levels[0] == "error" and levels[1] == "warning"


def test_a_findings_headline_starts_with_its_mark_in_its_style():
    from fleet_tui.core.monitor.analysis import Diagnosis
    from fleet_tui.ui.widgets.diagnosis_text import diagnosis_lines

    diag = Diagnosis(kind="idle", confidence=0.9, evidence=(), explanation="nothing runs",
                     action="stop it", severity="warning")
    markup, _content = diagnosis_lines(diag)[0]
    assert markup.startswith(f"[{severity_style('warning', emphasis=True)}]{severity_mark('warning')}")
