"""Recommendations pane: the ranked offers for the builder's workload, an explain view, right-sizing
from the monitor's history, and export of the report to Markdown or JSON.

Ranking runs in the core (``recommend``) in an exclusive thread worker whenever the builder
publishes a new workload; this pane formats the result and writes files atomically.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Select, Static

from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.monitor.rightsize import NoRecordedSamples, rightsize
from fleet_tui.core.pricing import HOURS_PER_MONTH, PRICING_CHOICES
from fleet_tui.core.ranking import export as report
from fleet_tui.core.ranking import recommend
from fleet_tui.core.ranking.explanation import explain
from fleet_tui.core.ranking.offers import RankedOffer, Recommendation
from fleet_tui.core.records import record
from fleet_tui.ui import report_export
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.widgets.gauges import usd
from fleet_tui.ui.widgets.table import Table

if TYPE_CHECKING:  # for the checker only: the app module imports this one
    from textual.events import Resize

    from fleet_tui.core.catalog.models import Catalog
    from fleet_tui.core.monitor.recorder import Recorder
    from fleet_tui.core.monitor.rightsize import RightsizeReport
    from fleet_tui.core.workload import Workload
    from fleet_tui.ui.app import FleetApp
    from fleet_tui.ui.state import BuilderChoice

TOP_OFFERS = 50
# Most telling first, so an 80-column terminal still shows cost and savings.
# "where" before savings: the same instance type in several regions must be told apart at 120 columns.
COLUMNS = (("rank", "#"), ("offer", "instance"), ("unit", "cost/unit"), ("month", "$/month"),
           ("where", "where"), ("save", "savings"), ("gpus", "devices"), ("pricing", "pricing"),
           ("speed", "speedup"), ("head", "headroom"), ("risk", "risk"))
# With a serving demand (the Workload pane's rate): ranked by the capacity plan's monthly bill, with
# $ per 1M output tokens, replicas × devices per replica and whether the latency targets are met.
PLAN_COLUMNS = COLUMNS[:4] + (("per_million", "$/1M tok"), ("replicas", "replicas"), ("slo", "SLO")) + COLUMNS[4:]


@record
class RankingResult:
    recommendation: Recommendation | None
    rows: tuple[tuple[str, ...], ...] = ()
    columns: tuple[tuple[str, str], ...] = COLUMNS
    explain: tuple[str, ...] = ()
    error: str | None = None
    notice: str | None = None  # ranked anyway, but an input was ignored (a mistyped current instance)


SIDE_MIN_WIDTH = 100
# How a core FieldError names an input here: the Workload pane's labels and this pane's menu.
FIELD_LABELS = {
    "pricing": "the pricing menu",
    "no_spot": "“spot allowed” unchecked",
    "hours_per_month": "hours/month",
    "current": "current instance",
    "current_count": "the number of current instances",
    "current_region": "the current instance's region",
    "top": "the number of offers shown",
}
# The pane of each running app, so exports and right-sizing reach it from any pane.
_PANES: weakref.WeakKeyDictionary[FleetApp, RecommendScreen] = weakref.WeakKeyDictionary()


def error_text(exc: UserError) -> str:
    """A core error as this app words it: fields shown by their form labels."""
    if isinstance(exc, FieldError):
        return exc.render(lambda field: FIELD_LABELS.get(field, field.replace("_", " ")))
    return str(exc)


class RecommendScreen(PaneScreen):
    MODE = "recommend"
    AUTO_FOCUS = "#rec-table"  # arrow keys move through the offers, not into the pricing menu
    BINDINGS = [
        Binding("e", "toggle_explain", "Explain"),
        Binding("m", "export('markdown')", "Export .md"),
        Binding("j", "export('json')", "Export .json"),
        Binding("s", "rightsize", "Right-size"),
        # offers re-rank on every change by themselves; r is for a catalog edited meanwhile
        Binding("r", "rerank", "Re-rank", show=False),
        Binding("g", "toggle_regions", "All regions", show=False),  # in ? help; the footer keeps ? and q at 80 columns
        Binding("escape", "close_side", "Close panel", show=False),
    ]
    DEFAULT_CSS = """
    RecommendScreen #rec-bar { height: 2; padding: 0 1; }
    RecommendScreen #rec-bar > Static { width: 1fr; height: 2; }
    RecommendScreen #rec-bar > Select { width: 20; }
    RecommendScreen #rec-main { height: 1fr; }
    RecommendScreen #rec-table { width: 1fr; }
    RecommendScreen #rec-side { width: 50; border: round $pane-border; padding: 0 1; }
    RecommendScreen #rec-side.-hidden { display: none; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._generation = 0
        self.result: RankingResult | None = None
        self._side_wanted: bool | None = None  # None: shown when there is room; e/s decide after
        self.expand_regions = False  # g: one row per region instead of per instance type

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="rec-bar"):
            yield Static("Describe a workload in the Workload pane (2).", id="rec-summary")
            yield Select([(p, p) for p in PRICING_CHOICES], value="on-demand", allow_blank=False,
                         id="rec-pricing", compact=True)
        with Horizontal(id="rec-main"):
            yield Table(id="rec-table", cursor_type="row", zebra_stripes=True)
            yield VerticalScroll(Static("", id="rec-side-text"), id="rec-side")

    def on_mount(self) -> None:
        _PANES[self.app] = self
        self._set_columns(COLUMNS)
        self.query_one("#rec-side").border_title = "Explain"
        self._place_side(self.size.width)
        self.watch(self.app, "workload", self._inputs_changed)
        self.watch(self.app, "catalog", self._inputs_changed)
        self.watch(self.app, "builder_context", self._inputs_changed)

    def _set_columns(self, columns: tuple[tuple[str, str], ...]) -> None:
        table = self.query_one("#rec-table", DataTable)
        if tuple(str(c.key.value) for c in table.columns.values()) == tuple(k for k, _ in columns):
            return
        table.clear(columns=True)
        for key, label in columns:
            table.add_column(label, key=key)

    def on_resize(self, event: Resize) -> None:
        self._place_side(event.size.width)

    def _place_side(self, width: int) -> None:
        # Under 100 columns the side panel would cover every number but the instance name, so it
        # only shows there when asked for (e, s).
        wanted = self._side_wanted if self._side_wanted is not None else width >= SIDE_MIN_WIDTH
        self.query_one("#rec-side").set_class(not wanted, "-hidden")

    def show_side(self, title: str) -> None:
        side = self.query_one("#rec-side")
        side.border_title = title
        self._side_wanted = True
        side.remove_class("-hidden")

    def _inputs_changed(self, _value: object = None) -> None:
        self.rerank()

    @on(Select.Changed, "#rec-pricing")
    def _pricing_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.rerank()

    def rerank(self) -> None:
        workload, catalog = self.app.workload, self.app.catalog
        if workload is None or catalog is None:
            return
        self._generation += 1
        self.query_one("#rec-summary", Static).update("[$text-muted]ranking…[/]")
        chosen = self.query_one("#rec-pricing", Select).value
        pricing = chosen if isinstance(chosen, str) else None  # the menu has no blank
        self._rank(workload, catalog, self.app.builder_context, pricing, self._generation)

    @work(thread=True, exclusive=True, group="recommend", exit_on_error=False)
    def _rank(self, workload: Workload, catalog: Catalog, choice: BuilderChoice | None,
              pricing: str | None, generation: int) -> None:
        result = rank(workload, catalog, choice, pricing, expand_regions=self.expand_regions)
        self.app.call_from_thread(self._show, result, generation)

    def _show(self, result: RankingResult, generation: int) -> None:
        if generation != self._generation:
            return
        self.result = result
        report_export.shown(self.app, result.recommendation)
        table = self.query_one("#rec-table", DataTable)
        table.clear()
        summary = self.query_one("#rec-summary", Static)
        rec = result.recommendation
        if result.error or rec is None:
            summary.update(f"[$error]{escape(result.error or '')}[/]")
            self.query_one("#rec-side-text", Static).update("")
            return
        self._set_columns(result.columns)
        table.add_rows(result.rows)
        text = (f"[b]{len(rec.offers)}[/] best of {rec.fitting_offers:,} fitting offers "
                f"({rec.considered_rows:,} catalog rows) · ranked by [b]{escape(rec.unit)}[/]"
                + (f" ({escape(rec.demand.label())})" if rec.demand is not None else ""))
        if result.notice:
            text += f"\n[$warning]{escape(result.notice)}[/]"
        summary.update(text)
        self._show_side(0)

    @on(DataTable.RowHighlighted, "#rec-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_side(event.cursor_row)

    def _show_side(self, row: int) -> None:
        result = self.result
        if result is None or result.recommendation is None:
            return
        if self.query_one("#rec-side").border_title != "Explain":
            return  # right-sizing is shown: moving through the offers keeps it
        lines = [escape(line) for line in result.explain]
        offers = _table_offers(result.recommendation)
        if 0 <= row < len(offers):
            offer = offers[row]
            lines += ["", f"[b $primary]{escape(offer.label)}[/]"]
            if offer.reason:
                lines.append(escape(offer.reason))
            for risk in offer.risks:
                lines.append(f"[$warning]⚠ {escape(risk)}[/]")
        self.query_one("#rec-side-text", Static).update("\n".join(lines))

    # ----- actions -----
    def action_toggle_explain(self) -> None:
        side = self.query_one("#rec-side")
        if side.has_class("-hidden") or side.border_title != "Explain":
            self.show_side("Explain")
            self._show_side(self.query_one("#rec-table", DataTable).cursor_row)
        else:
            self._side_wanted = False
            side.add_class("-hidden")

    def action_close_side(self) -> None:
        side = self.query_one("#rec-side")
        if not side.has_class("-hidden"):
            self._side_wanted = False
            side.add_class("-hidden")
        side.border_title = "Explain"  # the next e shows the explanation

    def action_rerank(self) -> None:
        self.rerank()

    def action_toggle_regions(self) -> None:
        self.expand_regions = not self.expand_regions
        self.rerank()

    def action_export(self, fmt: str) -> None:
        report_export.export_report(self.app, fmt, self.app.export_dir)

    def action_rightsize(self) -> None:
        show_rightsizing(self.app)


def _clip(text: str, width: int) -> str:
    """Cut to ``width`` cells with an ellipsis (the detail panel shows the whole name)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def _table_offers(rec: Recommendation) -> list[RankedOffer]:
    offers = list(rec.offers)
    if rec.current is not None:
        offers.insert(0, rec.current)
    return offers


def rank(workload: Workload, catalog: Catalog, choice: BuilderChoice | None, pricing: str | None,
         expand_regions: bool = False) -> RankingResult:
    """Run the core ranking and format the table rows (worker thread; never raises)."""
    notice = None
    demand = None
    current = None
    if choice is not None and choice.rate_rps and workload.is_generation:
        demand = choice.demand(workload)  # the builder's rate and targets, checked there already
    if choice is not None and choice.current_instance:
        try:  # a typo there marks that field (the Workload pane); the offers still rank
            catalog.find_instance(choice.current_instance)
            current = (choice.current_instance, 1)
        except UserError as exc:
            notice = f"current instance: {exc} (no savings shown)"
    try:
        rec = recommend(
            workload, catalog, pricing=pricing or "on-demand", top=TOP_OFFERS,
            expand_regions=expand_regions, demand=demand, current=current,
            hours_per_month=choice.hours_per_month if choice is not None else HOURS_PER_MONTH,
            spot_allowed=choice.spot_allowed or pricing in ("spot", "any") if choice is not None else True)
        explanation = tuple(explain(rec))
    except UserError as exc:
        return RankingResult(None, error=error_text(exc))
    except Exception as exc:  # an engine bug must not leave the pane saying "ranking…" forever
        return RankingResult(None, error=f"internal error while ranking: {type(exc).__name__}: {exc}")
    planned = rec.demand is not None
    rows = []
    for offer in _table_offers(rec):
        row = ((
            "now" if offer.is_current else str(offer.rank),
            _clip((f"{offer.instances}× " if offer.instances > 1 else "") + offer.instance_type, 26),
            usd(offer.cost_per_unit, 4 if (offer.cost_per_unit or 0) < 1 else 2),
            usd(offer.usd_per_month, 0),
            _clip(f"{offer.cloud} {offer.region}", 24),
            "" if offer.savings_pct is None else f"{offer.savings_pct:+.0f}%",
            f"{offer.gpus}× {offer.accelerator}",
            offer.pricing,
            "" if offer.speedup is None else f"{offer.speedup:.2f}×",
            "" if offer.headroom_gib is None else f"{offer.headroom_gib:,.1f} GiB",
            (offer.risks[0] if offer.risks else "") + (f" +{len(offer.risks) - 1}"
                                                       if len(offer.risks) > 1 else ""),
        ))
        if planned:
            row = row[:4] + tuple(report.plan_cells(offer)) + row[4:]
        rows.append(row)
    return RankingResult(rec, tuple(rows), PLAN_COLUMNS if planned else COLUMNS, explanation, notice=notice)



def _recommend_screen(app: FleetApp) -> RecommendScreen | None:
    """The app's Recommendations pane, once it has been shown (None before)."""
    return _PANES.get(app)


# ----- right-sizing -----------------------------------------------------------------------------
def show_rightsizing(app: FleetApp) -> None:
    """Right-size from this session's observed usage (the core's ``rightsize``; we show its lines)."""
    link = app.monitor
    db = link.session_db if link is not None else None
    catalog = app.catalog
    if link is None or link.latest is None or db is None or catalog is None:
        app.notify("Right-sizing needs what the Monitor pane (3) has seen, and it has seen no "
                   "device yet. Without a GPU here, start the app on a recording "
                   "(fleet-tui --source replay:demo) or the simulator (--source sim:8).",
                   severity="warning")
        return
    screen = _recommend_screen(app)
    if screen is not None:
        screen.show_side("Right-sizing")
        screen.query_one("#rec-side-text", Static).update("[$text-muted]right-sizing…[/]")
    recorder = link.recorder
    app.run_worker(lambda: _rightsize_in_thread(app, db, catalog, recorder), thread=True,
                   group="rightsize", exclusive=True, exit_on_error=False, name="right-size")


def rightsize_lines(report: RightsizeReport) -> list[str]:
    """The report as markup lines (formatting only)."""
    lines = []
    for d in report.devices:
        busy = d.busy_p99_pct
        busy_name = "SM active" if d.busy_signal == "sm_active_pct" else "utilization"
        mem = d.mem_used_gib.p99
        lines.append(f"#{d.index} {escape(d.name)}: p99 {busy_name} "
                     f"{'N/A' if busy is None else f'{busy:.0f}%'}, memory "
                     f"{'N/A' if mem is None else f'{mem:,.1f}'} GiB"
                     + (f" of {d.mem_total_gib:,.0f}" if d.mem_total_gib else "")
                     + f" [$text-muted]({d.samples} samples, {d.span_s:,.0f} s)[/]")
    need = []
    if report.need_mem_per_device_gib is not None:
        need.append(f"{report.need_mem_per_device_gib:,.1f} GiB per device")
    if report.need_bf16_tflops is not None:
        need.append(f"{report.need_bf16_tflops:,.0f} bf16 TFLOP/s")
    if need:
        lines.append("Needs (p99 + headroom): " + ", ".join(need))
    if report.current is not None:
        c = report.current
        lines.append(f"Now: {escape(c.instance_type)} {usd(c.usd_per_month, 0)}/month")
    if report.candidates:
        lines.append("[b]Cheapest instances that hold it:[/]")
        for c in report.candidates:
            save = (f"  [$success]saves {usd(c.savings_usd_per_month, 0)}/month[/]"
                    if c.savings_usd_per_month else "")
            lines.append(f"  {escape(c.instance_type)} ({escape(c.cloud)} {escape(c.region)}, "
                         f"{c.accelerator_count}× {escape(c.accelerator)}) "
                         f"{usd(c.usd_per_month, 0)}/month{save}")
    lines += [f"[$text-muted]{escape(n)}[/]" for n in report.notes]
    return lines


def _rightsize_in_thread(app: FleetApp, db: Path, catalog: Catalog,
                         recorder: Recorder | None = None) -> None:
    lines = rightsize_text(db, catalog, app.instance_type, recorder)

    def show() -> None:
        screen = _recommend_screen(app)
        if screen is not None:
            screen.show_side("Right-sizing")
            screen.query_one("#rec-side-text", Static).update(
                "[b $primary]Right-sizing from observed usage[/]\n" + "\n".join(lines))

    app.call_from_thread(show)


def rightsize_text(db: Path, catalog: Catalog, instance_type: str | None,
                   recorder: Recorder | None = None) -> list[str]:
    """The right-sizing panel's lines for the session history ``db``, errors in this app's words."""
    try:
        if recorder is not None:  # the session history writes in batches: the newest first
            recorder.flush()
        lines = rightsize_lines(rightsize(db, catalog, since_s=None, instance=instance_type))
    except NoRecordedSamples:
        lines = ["[$warning]No samples in this session's history yet: let the Monitor pane (3) "
                 "run a little, then press s again.[/]"]
    except UserError as exc:
        lines = [f"[$warning]{escape(error_text(exc))}[/]"]
    except Exception as exc:  # shown, not raised: the pane stays usable
        lines = [f"[$error]Right-sizing failed: {escape(type(exc).__name__)}: {escape(str(exc))}[/]"]
    return lines
