"""Export of the recommendations report, from the app's commands or the Recommendations pane's
keys: the ranking the pane shows last, written as ``fleet-tui recommend --json/--markdown`` writes
it. Below both the app and the pane, so neither imports the other for it."""

from __future__ import annotations

import weakref
from pathlib import Path

from textual.app import App

from fleet_tui.core.fsutil import write_atomic
from fleet_tui.core.ranking import export as report
from fleet_tui.core.ranking.offers import Recommendation
from fleet_tui.core.textsafe import clean

REPORT_STEM = "fleet-tui-recommendations"

# The ranking each running app shows last (the Recommendations pane sets it), for any pane's command.
_SHOWN: weakref.WeakKeyDictionary[App, Recommendation] = weakref.WeakKeyDictionary()


def shown(app: App, rec: Recommendation | None) -> None:
    """Record the ranking ``app``'s Recommendations pane now shows (None: an error, nothing)."""
    if rec is None:
        _SHOWN.pop(app, None)
    else:
        _SHOWN[app] = rec


def report_text(rec: Recommendation, fmt: str) -> str:
    """The report in ``fmt``: the same JSON and Markdown as ``fleet-tui recommend --json/--markdown``."""
    return report.json_report(rec) if fmt == "json" else report.markdown_report(rec)


def export_report(app: App, fmt: str, directory: Path, path: str | Path | None = None, *,
                  overwrite: bool = False) -> Path | None:
    """Write the shown recommendation report (to ``path``, else into ``directory``); notify where it
    went (or why not). An existing file is replaced only after the user says yes (the CLI's
    ``--force``)."""
    rec = _SHOWN.get(app)
    if rec is None:
        app.notify("Nothing to export yet: describe a workload in the Workload pane (2) and open "
                   "Recommendations (4).", severity="warning")
        return None
    suffix = ".json" if fmt == "json" else ".md"
    target = Path(path) if path else directory / f"{REPORT_STEM}{suffix}"
    try:
        write_atomic(target, report_text(rec, fmt), replace=overwrite)
    except FileExistsError:
        from fleet_tui.ui.widgets.confirm import Confirm

        def answered(yes: bool | None) -> None:
            if yes:
                export_report(app, fmt, directory, target, overwrite=True)
            else:
                app.notify(clean(f"{target} kept as it was"), title="Export cancelled",
                           markup=False)

        app.push_screen(Confirm(clean(f"{target} exists. Replace it?")), answered)
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte typed into the path
        why = "a path cannot hold a NUL byte" if isinstance(exc, ValueError) else (exc.strerror or exc)
        app.notify(clean(f"Cannot write {target}: {why}"), title="Export failed",
                   severity="error", markup=False)
        return None
    app.notify(clean(str(target)), title=f"Report written ({'JSON' if fmt == 'json' else 'Markdown'})",
               markup=False)
    return target
