"""Plan pane (``--source prometheus:URL --instance TYPE``): the cheapest mix of reserved (1 y / 3 y),
on-demand and spot capacity for the fleet's own recent demand — what ``fleet-tui plan --source``
prints, as a view.

The demand is the devices busy each hour over the last ``days`` (one Prometheus range query,
``core.cluster.promdemand``), read in a thread worker when the pane is first shown and on ``r``;
prices are the ``--instance`` type's cheapest catalog row (``core.cluster.portfolio.Prices``), and
the plan is ``core.cluster.portfolio.plan_portfolio``. Nothing is read while the pane is hidden.
"""

from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widgets import Static

from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.widgets.gauges import usd

DAYS = (1, 7, 30, 90)  # history spans the pane steps through


class PlanScreen(PaneScreen):
    MODE = "plan"
    BINDINGS = [
        Binding("r", "refresh", "Re-read history"),
        Binding("d", "days", "History span"),
        Binding("s", "spot", "Spot share"),
    ]
    DEFAULT_CSS = """
    PlanScreen #plan-body { height: 1fr; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.days = 30
        self.spot_share = 0.0
        self.doc = None  # the latest plan document (portfolio.plan_portfolio)

    def compose_body(self) -> ComposeResult:
        yield VerticalScroll(Static("reading the fleet's history…", id="plan-text"), id="plan-body")

    def on_mount(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.query_one("#plan-text", Static).update(
            f"reading {self.days} days of the fleet's history from Prometheus…")
        self._plan(self.days, self.spot_share)

    def action_days(self) -> None:
        self.days = DAYS[(DAYS.index(self.days) + 1) % len(DAYS)] if self.days in DAYS else 30
        self.action_refresh()

    def action_spot(self) -> None:
        self.spot_share = {0.0: 0.25, 0.25: 0.5}.get(self.spot_share, 0.0)
        self.action_refresh()

    @work(thread=True, exclusive=True, group="plan", exit_on_error=False)
    def _plan(self, days: int, spot_share: float) -> None:
        from fleet_tui.core.cluster.portfolio import Prices, plan_portfolio
        from fleet_tui.core.cluster.promdemand import read_demand
        from fleet_tui.core.errors import UserError

        try:
            prices, label = self._prices(Prices)
            demand = read_demand(self.app.source, days=days, now=time.time())
            if not demand:
                raise UserError(f"no GPU utilization series in the last {days} days")
            doc = {"prices_from": label, **plan_portfolio(demand, prices, max_spot_share=spot_share)}
        except (UserError, ValueError) as exc:
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._draw, doc)

    def _prices(self, prices_type):
        from fleet_tui.core.errors import UserError

        instance = self.app.instance_type
        catalog = self.app.catalog
        if not instance:
            raise UserError("The plan needs prices: start with --instance TYPE (the catalog "
                            "instance type of the fleet's nodes).")
        if catalog is None:
            raise UserError("The catalog is still loading; press r in a moment.")
        priced = [(price, o) for o in catalog.find_instance(instance, None)
                  if (price := o.price("on-demand")) is not None]
        if not priced:
            raise UserError(f"--instance {instance}: the catalog lists no on-demand price for it")
        _, best = min(priced, key=lambda po: po[0])
        return prices_type.from_instance(best), f"{best.cloud} {best.instance_type} {best.region}"

    def _show_error(self, text: str) -> None:
        self.query_one("#plan-text", Static).update(f"[$error]{escape(text)}[/]")

    def _draw(self, doc) -> None:
        self.doc = doc
        self.query_one("#plan-text", Static).update(plan_markup(doc, self.days, self.spot_share))


def plan_markup(doc, days: int, spot_share: float) -> str:
    plan = doc["plan"]
    lines = [f"[b]Demand[/]  last {days} d ({doc['hours']} h with data): peak "
             f"{doc['peak_devices']:g}, "
             f"mean {doc['mean_devices']:g} busy devices  ·  {escape(doc['prices_from'])}, "
             f"{doc['devices_per_instance']} devices per instance  ·  spot share {spot_share:.0%}",
             "",
             f"[b]Plan[/]  {plan['reserved_instances']} × "
             f"{plan['reserved_term'] or 'no reservation'}, "
             f"{plan['on_demand_instance_hours']:g} on-demand and "
             f"{plan['spot_instance_hours']:g} spot instance-hours",
             *([f"[$warning]{escape(plan['no_commitment_reason'])}[/]"]
               if plan.get("no_commitment_reason") else []),
             f"[b]Cost[/]  {usd(doc['usd_total'])} ({usd(doc['usd_per_month'])}/month) vs "
             f"{usd(doc['all_on_demand_usd'])} all on-demand: "
             f"[$success]{doc['savings_pct']:.1f}% saved[/]",
             "[$text-muted](assuming this profile repeats over the commitment's term)[/]", ""]
    lines.append("[b]commitment   instances   $/h        break-even util   device util[/]")
    for c in doc["commitments"]:
        util = "-" if c["device_utilization_pct"] is None else f"{c['device_utilization_pct']:.0f}%"
        price = usd(c["usd_per_instance_hour"]) + ("*" if c.get("estimated") else "")
        lines.append(f"{c['term']:<12} {c['instances']:>9}   {price:<10} "
                     f"{c['break_even_utilization_pct']:>14.0f}%   {util:>11}")
    if doc.get("prices_estimated"):
        lines.append("[$text-muted]* estimated from on-demand by the catalog's standard "
                     "commitment discount, not a published price[/]")
    for c in doc.get("sensitivity", ()):
        if c["usd_vs_plan"]:
            lines.append(f"[$text-muted]{c['reserved_instances']} × {c['term']}: "
                         f"{usd(c['usd_total'])} ({c['usd_vs_plan']:+,.2f})[/]")
    if doc["spot"] and plan["spot_instance_hours"]:
        s = doc["spot"]
        lines += ["", f"[b]Spot risk[/]  {s['expected_interruptions_per_month']:g} interruptions "
                      f"a month expected, {100 * s['p_interrupted_per_instance_day']:.2f}% chance per "
                      f"instance-day, {s['overhead_pct']:.2f}% of spot time lost"]
    lines += ["", "[$text-muted]d: history span (1/7/30/90 days)  ·  s: spot share  ·  "
                  "r: re-read[/]"]
    return "\n".join(lines)
