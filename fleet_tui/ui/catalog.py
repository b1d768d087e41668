"""Catalog pane: every instance × region with filters, sorting, $/GPU-hour and a detail panel.

Filtering and sorting run in the core (``query_instances``) in a thread worker; the table shows one
bounded page (``PAGE_ROWS``) because Textual's DataTable measures every cell it is given.
"""

from __future__ import annotations

import asyncio

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Select, Static

from fleet_tui.core.records import record
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.state import CatalogStatus
from fleet_tui.ui.widgets.form import Field
from fleet_tui.ui.widgets.gauges import usd
from fleet_tui.ui.widgets.table import Table

PAGE_ROWS = 500  # rows handed to the DataTable at once (≈ 60 ms to lay out on this machine class)
PRICING = ("on-demand", "spot", "reserved-1y", "reserved-3y")
#: The filter form's initial values, and the query shown before its fields are mounted.
DEFAULT_FILTERS = dict(cloud=None, region=None, accelerator=None, vendor=None, min_memory_gib=None,
                       count=None, max_usd_per_hour=None, pricing="on-demand", sort="usd_per_gpu_hour",
                       descending=False)
SORT_KEYS = (("$/GPU-hour", "usd_per_gpu_hour"), ("$/hour", "price"), ("memory/device", "memory"),
             ("devices", "count"), ("cloud", "cloud"), ("instance", "instance_type"),
             ("accelerator", "accelerator"), ("region", "region"))
# Most telling first, so an 80-column terminal still shows the prices.
COLUMNS = (("cloud", "cloud"), ("instance", "instance"), ("acc", "accelerator"), ("n", "n"),
           ("gpuh", "$/GPU-h"), ("price", "$/hour"), ("mem", "GiB/dev"), ("region", "region"),
           ("vcpu", "vCPU"), ("ram", "RAM GiB"), ("flags", "flags"))
# Under NARROW_AT columns (80x24): what tells two offers apart first, the instance name last (it
# is the longest); Enter shows the whole offer.
NARROW_AT = 110
NARROW_COLUMNS = (("cloud", "cloud"), ("region", "region"), ("devices", "devices"),
                  ("gpuh", "$/GPU-h"), ("price", "$/hour"), ("instance", "instance"))
NARROW_REGION = 16  # characters; longer names keep their start and their end


@record
class CatalogPage:
    """One query's result, already formatted in the worker thread (the loop only adds rows)."""

    rows: tuple[tuple[str, ...], ...]
    instances: tuple  # the Instance objects, same order as rows
    total: int
    error: str | None = None


class CatalogScreen(PaneScreen):
    MODE = "catalog"
    BINDINGS = [
        Binding("slash", "focus_filters", "Filter", key_display="/"),
        Binding("t", "focus_table", "Table"),
        Binding("r", "reset_filters", "Reset filters"),
        Binding("o", "toggle_order", "Sort order"),
        Binding("escape", "focus_table", "Leave field", show=False),
    ]
    DEFAULT_CSS = """
    CatalogScreen #cat-filters { grid-size: 5; grid-rows: 2; height: 4; padding: 0 1; }
    CatalogScreen #cat-count { height: 1; padding: 0 1; color: $text-muted; }
    CatalogScreen #cat-main { height: 1fr; }
    CatalogScreen #cat-table { width: 1fr; }
    CatalogScreen #cat-detail { width: 44; border: round $pane-border; padding: 0 1; }
    CatalogScreen #cat-detail.-narrow { display: none; }
    CatalogScreen #cat-main.-below { layout: vertical; }
    CatalogScreen #cat-main.-below > #cat-table { height: 1fr; }
    CatalogScreen #cat-main.-below > #cat-detail { width: 1fr; height: 9; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._page: CatalogPage | None = None
        self._generation = 0
        self._filters_ready = False  # the filter fields are mounted after the first page
        self._filters_mounting = False
        self._narrow = False  # the 80-column table (NARROW_COLUMNS)

    def compose_body(self) -> ComposeResult:
        # The filter row's ten fields (five Selects, each with its option overlay) cost the first
        # frame ~110-175 ms of CPU (bench/bench_app.py --first-frame): the row keeps its place (a
        # fixed height, so nothing moves) and its fields are mounted once the first page of offers
        # (queried with DEFAULT_FILTERS) is on screen, or the catalog failed.
        yield Grid(id="cat-filters")
        yield Static("catalog loading…", id="cat-count")
        with Horizontal(id="cat-main"):
            yield Table(id="cat-table", cursor_type="row", zebra_stripes=True)
            yield VerticalScroll(Static("", id="cat-detail-text"), id="cat-detail")

    @staticmethod
    def _filter_fields(catalog) -> list[Field]:
        clouds, vendors = filter_options(catalog)
        return [
            Field("cloud", Select(clouds, prompt="any", id="f-cloud", compact=True)),
            Field("region", Input(placeholder="any", id="f-region", compact=True)),
            Field("accelerator", Input(placeholder="e.g. H100", id="f-accelerator", compact=True)),
            Field("vendor", Select(vendors, prompt="any", id="f-vendor", compact=True)),
            Field("pricing", Select([(p, p) for p in PRICING], value=DEFAULT_FILTERS["pricing"],
                                    allow_blank=False, id="f-pricing", compact=True)),
            Field("min GiB/device", Input(placeholder="any", id="f-min-mem", type="number",
                                          valid_empty=True, compact=True)),
            Field("devices", Input(placeholder="any", id="f-count", type="integer",
                                   valid_empty=True, compact=True)),
            Field("max $/hour", Input(placeholder="any", id="f-max-price", type="number",
                                      valid_empty=True, compact=True)),
            Field("sort by", Select(SORT_KEYS, value=DEFAULT_FILTERS["sort"], allow_blank=False,
                                    id="f-sort", compact=True)),
            Field("order", Select((("ascending", "asc"), ("descending", "desc")), value="asc",
                                  allow_blank=False, id="f-order", compact=True)),
        ]

    def on_mount(self) -> None:
        self._set_narrow(self.size.width)
        self._reset_columns(self.query_one("#cat-table", DataTable))
        self.query_one("#cat-detail").border_title = "Details"
        self.watch(self.app, "catalog", self._catalog_changed)
        self.watch(self.app, "catalog_status", self._catalog_status_changed)

    def _catalog_status_changed(self, status: CatalogStatus) -> None:
        if status.state == "error":
            self._schedule_filters()

    def _schedule_filters(self) -> None:
        if not (self._filters_ready or self._filters_mounting):
            self._filters_mounting = True
            # a worker, so whoever waits for the pane's work (tests, scripts) waits for this too,
            # and so does quitting (a Select mounted during shutdown raised NoMatches)
            self.mount_later(self._mount_filters())

    async def _mount_filters(self) -> None:
        painted = asyncio.Event()
        self.call_after_refresh(painted.set)
        await painted.wait()  # the page just shown is on screen first
        # the options come with the Selects: set_options on a Select still composing would fail
        await self.query_one("#cat-filters", Grid).mount_all(self._filter_fields(self.app.catalog))
        self._filters_ready = True
        self.refresh_query()  # the form's values: the same page again, kept without a redraw

    def on_resize(self, event) -> None:
        self._set_narrow(event.size.width)

    def _reset_columns(self, table: DataTable) -> None:
        # columns too, on every page: DataTable only ever widens a column, so after a page of long
        # instance names a narrower page would keep pushing price and region off screen
        table.clear(columns=True)
        for key, label in NARROW_COLUMNS if self._narrow else COLUMNS:
            table.add_column(label, key=key)

    def _set_narrow(self, width: int) -> None:
        # Beside the table from 150 columns; below it down to 110 (beside, it would push the price
        # and region columns off screen); under that (80x24) Enter shows it.
        self.query_one("#cat-detail").set_class(width < NARROW_AT, "-narrow")
        self.query_one("#cat-main").set_class(NARROW_AT <= width < 150, "-below")
        narrow = width < NARROW_AT
        if narrow != self._narrow:
            self._narrow = narrow
            if self._page is not None and not self._page.error:
                self._fill(self.query_one("#cat-table", DataTable), self._page)

    def _fill(self, table: DataTable, page: CatalogPage) -> None:
        row = table.cursor_row
        self._reset_columns(table)
        table.add_rows(page.rows if not self._narrow else [narrow_row(r) for r in page.rows])
        if 0 < row < len(page.rows):
            table.move_cursor(row=row)

    def _catalog_changed(self, catalog) -> None:
        if catalog is None:
            return
        if self._filters_ready:  # else _mount_filters gives the Selects their options
            clouds, vendors = filter_options(catalog)
            self.query_one("#f-cloud", Select).set_options(clouds)
            self.query_one("#f-vendor", Select).set_options(vendors)
        self.refresh_query()

    # ----- querying -----
    @on(Input.Changed)
    @on(Select.Changed)
    def _filters_changed(self, event) -> None:
        event.stop()
        self.refresh_query()

    def filters(self) -> dict:
        """The filter form as ``query_instances`` keyword arguments (bad numbers are ignored and
        marked invalid by the Input itself); DEFAULT_FILTERS until its fields are mounted."""
        if not self._filters_ready:
            return dict(DEFAULT_FILTERS)

        def text(id_: str) -> str | None:
            value = self.query_one(id_, Input).value.strip()
            return value or None

        def number(id_: str, kind=float):
            value = text(id_)
            try:
                return kind(value) if value is not None else None
            except ValueError:
                return None

        def select(id_: str):
            value = self.query_one(id_, Select).value
            return None if value is Select.NULL else value

        return dict(cloud=select("#f-cloud"), region=text("#f-region"),
                    accelerator=text("#f-accelerator"), vendor=select("#f-vendor"),
                    min_memory_gib=number("#f-min-mem"), count=number("#f-count", int),
                    max_usd_per_hour=number("#f-max-price"), pricing=select("#f-pricing"),
                    sort=select("#f-sort"), descending=select("#f-order") == "desc")

    def refresh_query(self) -> None:
        catalog = self.app.catalog
        if catalog is None:
            return
        self._generation += 1
        self._run_query(catalog, self.filters(), self._generation)

    @work(thread=True, exclusive=True, group="catalog-query", exit_on_error=False)
    def _run_query(self, catalog, filters: dict, generation: int) -> None:
        page = query_page(catalog, filters)
        self.app.call_from_thread(self._show_page, page, generation)

    def _show_page(self, page: CatalogPage, generation: int) -> None:
        if generation != self._generation:
            return  # a newer query is on its way
        previous, self._page = self._page, page
        if previous is not None and previous == page:
            return  # the same answer again (a Select settling on mount): keep the table, no flicker
        count = self.query_one("#cat-count", Static)
        table = self.query_one("#cat-table", DataTable)
        self._reset_columns(table)
        self._schedule_filters()
        if page.error:
            count.update(f"[$error]{escape(page.error)}[/]")
            return
        table.add_rows(page.rows if not self._narrow else [narrow_row(r) for r in page.rows])
        shown = len(page.rows)
        if page.total > shown:
            count.update(f"showing {shown:,} of {page.total:,} — refine filters")
        else:
            count.update(f"{page.total:,} offer{'s' if page.total != 1 else ''}")
        self._show_detail(0)

    @on(DataTable.RowHighlighted, "#cat-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)

    @on(DataTable.RowSelected, "#cat-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        page = self._page
        if page is not None and 0 <= event.cursor_row < len(page.instances):
            self.app.push_screen(OfferDetail(instance_detail(self.app.catalog,
                                                             page.instances[event.cursor_row])))

    def _show_detail(self, row: int) -> None:
        page = self._page
        text = self.query_one("#cat-detail-text", Static)
        if page is None or not (0 <= row < len(page.instances)):
            text.update("")
            return
        text.update(instance_detail(self.app.catalog, page.instances[row]))

    # ----- actions -----
    def action_focus_filters(self) -> None:
        if self._filters_ready:
            self.query_one("#f-accelerator", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#cat-table", DataTable).focus()

    def action_reset_filters(self) -> None:
        if not self._filters_ready:
            return
        with self.prevent(Input.Changed, Select.Changed):
            for widget in self.query("#cat-filters Input").results(Input):
                widget.value = ""
            self.query_one("#f-cloud", Select).clear()
            self.query_one("#f-vendor", Select).clear()
        self.refresh_query()

    def action_toggle_order(self) -> None:
        if not self._filters_ready:
            return
        order = self.query_one("#f-order", Select)
        order.value = "desc" if order.value == "asc" else "asc"


class OfferDetail(ModalScreen[None]):
    """One offer in full (Enter on a row): the detail panel, for terminals too narrow for it."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    OfferDetail { align: center middle; }
    OfferDetail > VerticalScroll { width: 100%; max-width: 80; height: auto; max-height: 100%;
                                   border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._text, id="offer-detail")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).border_title = "Offer · esc closes"

    def action_dismiss(self, result=None) -> None:
        self.dismiss(None)


def middle_clip(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its start and end kept: regions that differ only at the
    end (``northamerica-northeast1`` and ``…2``) stay apart."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[:width - 1 - tail] + "…" + text[len(text) - tail:]


def narrow_row(row: tuple[str, ...]) -> tuple[str, ...]:
    """A COLUMNS row as NARROW_COLUMNS shows it."""
    cells = dict(zip((key for key, _ in COLUMNS), row))
    return (cells["cloud"], middle_clip(cells["region"], NARROW_REGION),
            f"{cells['n']}× {cells['acc']}", cells["gpuh"], cells["price"], cells["instance"])


def filter_options(catalog) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The cloud and vendor Selects' options for ``catalog`` (None: none yet)."""
    if catalog is None:
        return [], []
    clouds = sorted({i.cloud for i in catalog.instances})
    vendors = sorted({a.vendor for a in catalog.accelerators.values()})
    return [(c, c) for c in clouds], [(v, v) for v in vendors]


def price(value: float | None) -> str:
    """Dollars per hour: tenths of a cent under $10 (cheap GPUs differ there), cents above."""
    return usd(value, 3 if value is not None and abs(value) < 10 else 2)


def gib(value: float) -> str:
    """A size in GiB to one decimal, without a trailing .0: some clouds report 15.996 for 16."""
    return f"{round(value, 1):g}"


def query_page(catalog, filters: dict, limit: int = PAGE_ROWS) -> CatalogPage:
    """Run the core query and format one page (called in a worker thread)."""
    from fleet_tui.core.catalog.query import query_instances
    from fleet_tui.core.errors import UserError

    pricing = filters.get("pricing") or "on-demand"
    try:
        result = query_instances(catalog, limit=limit, **filters)
    except UserError as exc:
        return CatalogPage((), (), 0, error=str(exc))
    except Exception as exc:  # an engine bug is shown, the pane stays usable
        return CatalogPage((), (), 0, error=f"internal error in the catalog query: "
                                            f"{type(exc).__name__}: {exc}")
    rows = []
    for inst in result.rows:
        rows.append((
            inst.cloud, inst.instance_type, inst.accelerator, f"{inst.accelerator_count:g}",
            price(inst.usd_per_gpu_hour(pricing)), price(inst.price(pricing)),
            gib(inst.accelerator_memory_gib), inst.region,
            "" if inst.vcpus is None else f"{inst.vcpus:g}",
            "" if inst.ram_gib is None else gib(inst.ram_gib),
            (",".join(inst.flag_codes) + (" excluded" if inst.excluded else ""))[:40],
        ))
    return CatalogPage(tuple(rows), tuple(result.rows), result.total)


def instance_detail(catalog, inst) -> str:
    lines = [f"[b]{escape(inst.instance_type)}[/b]  [$text-muted]{escape(inst.cloud)} "
             f"{escape(inst.region)}[/]", ""]
    lines.append(f"{inst.accelerator_count:g} × {escape(inst.accelerator)}, "
                 f"{gib(inst.accelerator_memory_gib)} GiB each")
    if inst.vcpus is not None or inst.ram_gib is not None:
        lines.append(f"{inst.vcpus or 0:g} vCPU, {gib(inst.ram_gib or 0)} GiB RAM")
    lines.append("")
    lines.append("[b $primary]Prices (USD/hour)[/]")
    for pricing in PRICING:
        raw = inst.raw_price(pricing)
        if raw is None:
            continue
        per_gpu = raw / inst.accelerator_count if inst.accelerator_count else None
        note = "" if inst.price(pricing) is not None else "  [$warning](not ranked)[/]"
        lines.append(f"  {pricing:<11} {usd(raw, 3):>9}  {usd(per_gpu, 3)}/GPU-h{note}")
    lines.append(f"  [$text-muted]source: {escape(inst.source or 'unknown')}[/]")
    lines.append(f"  [$text-muted]as of: {escape(inst.as_of or 'unknown')}[/]")
    if inst.flags:
        lines.append(f"  [$warning]flags: {escape(', '.join(inst.flags))}[/]")
    if inst.excluded:
        lines.append(f"  [$error]excluded: {escape(inst.excluded)}[/]")
    acc = None
    try:
        acc = catalog.accelerator(inst.accelerator) if catalog is not None else None
    except Exception:  # unknown accelerator id: the catalog already reported it
        acc = None
    if acc is not None:
        lines += ["", f"[b $primary]{escape(acc.name or acc.id)}[/]",
                  f"  {escape(acc.vendor)} · {escape(acc.software_stack)}"
                  + (f" · {escape(acc.architecture)}" if acc.architecture else ""),
                  f"  memory {acc.memory_gib:g} GiB"
                  + (f", {acc.memory_bandwidth_gbs:g} GB/s" if acc.memory_bandwidth_gbs else "")]
        if acc.peak_tflops:
            peaks = ", ".join(f"{k} {v:g}" for k, v in acc.peak_tflops.items())
            lines.append(f"  dense TFLOP/s: {escape(peaks)}")
        if acc.tdp_w:
            lines.append(f"  TDP {acc.tdp_w:g} W")
        if acc.interconnect:
            bw = f" {acc.interconnect_bandwidth_gbs:g} GB/s" if acc.interconnect_bandwidth_gbs else ""
            lines.append(f"  {escape(acc.interconnect)}{bw}")
        if acc.source:
            lines.append(f"  [$text-muted]specs: {escape(acc.source)} ({escape(acc.as_of or '?')})[/]")
    return "\n".join(lines)
