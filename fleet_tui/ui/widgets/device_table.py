"""The monitor's compact device table: one row per device with its primary diagnosis.

Small screen first: at 80×24 every device of a box (up to 8; more scroll with the
cursor) shows its numbers and its primary diagnosis on the first screen; Enter on a row opens its
card. Wider terminals get more columns. Columns have fixed widths, so a steady tick re-lays out
nothing: only the lines whose text changed are rendered again and repainted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.message import Message

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.records import record
from fleet_tui.ui.widgets.diagnosis_text import headline
from fleet_tui.ui.widgets.gauges import gib
from fleet_tui.ui.widgets.severity import severity_mark, severity_style
from fleet_tui.ui.widgets.text import LiveText, Parts, styled_line

if TYPE_CHECKING:  # for the checker only: the analysis loads with the engine, after the first frame
    from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis


@record
class Column:
    key: str
    label: str
    width: int  # cells, fixed; the diagnosis column takes what is left
    wide_only: bool = False  # shown from WIDE_COLUMNS_AT columns on


COLUMNS = (
    Column("dev", "#", 3),
    Column("name", "device", 12),
    Column("util", "util", 4),
    Column("mem", "mem GiB", 7),
    Column("power", "power W", 8),
    Column("temp", "°C", 3),
    Column("clock", "MHz", 9, wide_only=True),
    Column("sm", "SM", 4, wide_only=True),
    Column("tensor", "TC", 4, wide_only=True),
    Column("dram", "DRAM", 4, wide_only=True),
    Column("diag", "diagnosis", 0),
)
WIDE_COLUMNS_AT = 120  # terminal columns from which the activity columns are added
MIN_DIAGNOSIS_WIDTH = 20


def short_name(dev: DeviceSnapshot, width: int = 12) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100 80GB``: whole words that fit ``width``."""
    return _short_name(dev.name or "", dev.node, width)


@lru_cache(maxsize=256)  # a table row per device a tick: the same few names
def _short_name(name: str, node: str, width: int) -> str:
    name = name.replace("NVIDIA ", "").replace("AMD ", "").replace(" (simulated)", "")
    name = f"{node}:{name.strip()}" if node else name.strip()
    if len(name) <= width:
        return name
    out = ""
    for word in name.split():
        candidate = f"{out} {word}".strip()
        if len(candidate) > width:
            break
        out = candidate
    return out or name[:width]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}%"


def device_cells(dev: DeviceSnapshot) -> dict[str, str]:
    """The numeric cells of one device's row (formatting only; N/A stays visible as —)."""
    if dev.state != "ok":
        return {"util": "—", "mem": "—", "power": "—", "temp": "—", "clock": "—", "sm": "—",
                "tensor": "—", "dram": "—"}
    mem = (f"{gib(dev.mem_used_bytes, 0)}/{gib(dev.mem_total_bytes, 0)}"
           if dev.mem_total_bytes else gib(dev.mem_used_bytes))
    power = "—" if dev.power_w is None else f"{dev.power_w:.0f}" + (
        f"/{dev.power_limit_w:.0f}" if dev.power_limit_w else "")
    clock = "—" if dev.sm_clock_mhz is None else f"{dev.sm_clock_mhz:.0f}" + (
        f"/{dev.sm_clock_max_mhz:.0f}" if dev.sm_clock_max_mhz else "")
    return {"util": _pct(dev.gpu_util_pct), "mem": mem, "power": power,
            "temp": "—" if dev.temp_c is None else f"{dev.temp_c:.0f}", "clock": clock,
            "sm": _pct(dev.sm_active_pct), "tensor": _pct(dev.tensor_active_pct),
            "dram": _pct(dev.dram_active_pct)}


def diagnosis_label(dev: DeviceSnapshot, analysis: DeviceAnalysis | None) -> tuple[str, str]:
    """(text, severity) of a device's primary diagnosis; a device without a reading says so."""
    if dev.state != "ok":
        return f"{dev.state.upper()}: {dev.error or 'no reading'}", "critical"
    diag = analysis.primary_diagnosis if analysis is not None else None
    if diag is None:
        return "collecting…", "info"
    return headline(diag), diag.severity


class DeviceTable(LiveText, can_focus=True):
    """One line per device, drawn as text: a tick re-renders only the lines whose text changed
    (a DataTable re-rendered every cell of each changed row through Rich: ~1 ms a cell, measured
    with bench/bench_monitor_cpu.py). Up/down move the cursor, Enter opens the device; with more
    devices than rows the window follows the cursor."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Previous device", show=False),
        Binding("down", "cursor(1)", "Next device", show=False),
        Binding("pageup", "cursor(-8)", show=False),
        Binding("pagedown", "cursor(8)", show=False),
        Binding("enter", "select", "Open device", show=False),  # said in the diagnoses title
    ]
    DEFAULT_CSS = """
    DeviceTable { height: auto; padding: 0; }
    """

    class Selected(Message):
        """Enter on a device's row."""

        def __init__(self, device_key: str) -> None:
            super().__init__()
            self.device_key = device_key

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cursor = 0
        self.max_rows = 8
        self._keys: list[str] = []
        self._devices: dict[str, DeviceSnapshot] = {}
        self._analyses: Mapping[str, DeviceAnalysis] = {}
        self._layout: tuple[tuple[str, int], ...] = ()
        self._diag_width = MIN_DIAGNOSIS_WIDTH
        self._formatted: dict[str, tuple[dict[str, str], Parts]] = {}  # key -> (cells, row parts), rows in view only
        self._header = styled_line([])

    @property
    def rows_shown(self) -> int:
        return min(len(self._keys), self.max_rows)

    @property
    def device_keys(self) -> list[str]:
        return list(self._keys)

    def cell(self, key: str, column: str) -> str:
        return self.row(key)[0][column]

    def columns_for(self, width: int) -> tuple[tuple[str, int], ...]:
        wide = width >= WIDE_COLUMNS_AT
        cols = [(c.key, c.width) for c in COLUMNS if wide or not c.wide_only]
        used = sum(w + 2 for _k, w in cols) + 1
        rest = max(width - used, MIN_DIAGNOSIS_WIDTH)
        return tuple((k, w or rest) for k, w in cols)

    def show(self, devices: Sequence[DeviceSnapshot], analyses: Mapping[str, DeviceAnalysis],
             width: int) -> None:
        """Keep this tick's devices; only the rows in the window are formatted (64 devices show
        16 rows: the other 48 cost nothing until the cursor brings them into view)."""
        layout = self.columns_for(width)
        if layout != self._layout:
            labels = {c.key: c.label for c in COLUMNS}
            self._layout = layout
            self._diag_width = dict(layout)["diag"]
            self._header = styled_line([(_join(((labels[k], w) for k, w in layout)), "b $primary")])
        self._devices = {d.key: d for d in devices}
        self._keys = list(self._devices)
        self._analyses = analyses
        self._formatted = {}
        self.cursor = min(self.cursor, max(len(self._keys) - 1, 0))
        self._render_rows()

    def row(self, key: str) -> tuple[dict[str, str], Parts]:
        """(cells, styled parts) of a device's row, formatted once a tick when first needed."""
        row = self._formatted.get(key)
        if row is None:
            dev, layout = self._devices[key], self._layout
            cells = device_cells(dev)
            cells["dev"] = str(dev.index)
            cells["name"] = short_name(dev)
            text, severity = diagnosis_label(dev, self._analyses.get(key))
            cells["diag"] = f"{severity_mark(severity)}{text}"
            plain = _join(((cells[k], w) for k, w in layout if k != "diag"))
            parts: Parts = [(plain + "  ", None),
                            (cells["diag"][:self._diag_width], severity_style(severity, emphasis=True))]
            row = self._formatted[key] = (cells, parts)
        return row

    def _render_rows(self) -> None:
        keys = self._keys
        if not keys:
            self.set_markup("[$text-muted]No devices.[/]")
            return
        first = min(max(self.cursor - self.max_rows + 1, 0), max(len(keys) - self.max_rows, 0))
        first = min(first, self.cursor)
        out = [self._header]
        for index in range(first, min(first + self.max_rows, len(keys))):
            outer = None
            if index == self.cursor:
                outer = "reverse" if self.has_focus else "b"
            out.append(styled_line(self.row(keys[index])[1], outer))
        if len(keys) > self.max_rows:
            out.append(styled_line([(
                f"devices {first + 1}–{min(first + self.max_rows, len(keys))} of {len(keys)} · "
                "↑↓ to move, Enter to open", "$text-muted")]))
        self.set_lines(out)

    def action_cursor(self, step: int) -> None:
        if self._keys:
            self.cursor = min(max(self.cursor + step, 0), len(self._keys) - 1)
            self._render_rows()

    def action_select(self) -> None:
        if self._keys:
            self.post_message(self.Selected(self._keys[self.cursor]))

    def on_focus(self) -> None:
        self._render_rows()

    def on_blur(self) -> None:
        self._render_rows()


def _join(cells) -> str:
    return " " + " ".join(f"{text[:width]:<{width}} " for text, width in cells).rstrip()
