"""The monitor's compact device table: one row per device with its primary diagnosis.

Small screen first (issue 11): at 80×24 every device of a box (up to 8 and more, scrolled) shows
its numbers and its primary diagnosis on the first screen; Enter on a row opens its card. Wider
terminals get more columns. Columns have fixed widths, so a steady tick measures nothing and
re-lays out nothing: only the cells whose text changed are replaced, and only their rows repaint.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.ui.widgets.gauges import gib
from fleet_tui.ui.widgets.table import Table

# Marks readable without colour (NO_COLOR, 16-colour terminals): severity is not colour alone.
SEVERITY_MARK = {"critical": "!!", "warning": "! ", "info": "· ", "ok": "✓ "}
SEVERITY_VARIABLE = {"critical": "error", "warning": "warning", "info": "primary", "ok": "success"}


@dataclass(frozen=True, slots=True)
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
    name = (dev.name or "").replace("NVIDIA ", "").replace("AMD ", "").replace(" (simulated)", "")
    name = f"{dev.node}:{name.strip()}" if dev.node else name.strip()
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


def diagnosis_label(dev: DeviceSnapshot, analysis) -> tuple[str, str]:
    """(text, severity) of a device's primary diagnosis; a device without a reading says so."""
    if dev.state != "ok":
        return f"{dev.state.upper()}: {dev.error or 'no reading'}", "critical"
    diag = getattr(analysis, "primary_diagnosis", None) if analysis is not None else None
    if diag is None:
        return "collecting…", "info"
    return diag.kind.replace("_", " "), diag.severity


class DeviceTable(Table):
    """Rows keyed by device key; ``show`` updates changed cells only."""

    DEFAULT_CSS = """
    DeviceTable { height: auto; max-height: 11; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._layout: tuple[tuple[str, int], ...] = ()
        self._styles: dict[str, str] = {}

    def columns_for(self, width: int) -> tuple[tuple[str, int], ...]:
        wide = width >= WIDE_COLUMNS_AT
        cols = [(c.key, c.width) for c in COLUMNS if wide or not c.wide_only]
        used = sum(w + 2 * self.cell_padding for _k, w in cols) + 2 * self.cell_padding
        rest = max(width - used - 2, MIN_DIAGNOSIS_WIDTH)  # 2: the scroll bar's room
        return tuple((k, w or rest) for k, w in cols)

    def _build_columns(self, layout) -> None:
        labels = {c.key: c.label for c in COLUMNS}
        self.clear(columns=True)
        for key, width in layout:
            self.add_column(labels[key], width=width, key=key)
        self._layout = layout

    def show(self, devices, analyses, width: int) -> None:
        layout = self.columns_for(width)
        if layout != self._layout:
            self._build_columns(layout)
        diag_width = dict(layout)["diag"]
        keys = [c for c, _w in layout]
        wanted = [d.key for d in devices]
        if [str(k.value) for k in self.rows] != wanted:  # devices came or went: rebuild once
            cursor = self.cursor_row
            self.clear()
            for dev in devices:
                self.add_row(*self._row(dev, analyses.get(dev.key), keys, diag_width), key=dev.key)
            if devices:
                self.move_cursor(row=min(cursor, len(devices) - 1), animate=False)
            return
        for dev in devices:
            values = self._row(dev, analyses.get(dev.key), keys, diag_width)
            for column, value in zip(keys, values):
                self.set_cell(dev.key, column, value)

    def _row(self, dev: DeviceSnapshot, analysis, keys, diag_width: int) -> list:
        cells = device_cells(dev)
        cells["dev"] = str(dev.index)
        cells["name"] = short_name(dev)
        text, severity = diagnosis_label(dev, analysis)
        mark = SEVERITY_MARK.get(severity, "  ")
        cells["diag"] = Text(f"{mark}{text}"[:diag_width], style=self._severity_style(severity))
        return [cells[k] for k in keys]

    def _severity_style(self, severity: str) -> str:
        variable = SEVERITY_VARIABLE.get(severity, "text")
        style = self._styles.get(variable)
        if style is None:
            colour = self.app.theme_variables.get(variable, "")
            style = self._styles[variable] = f"bold {colour}".strip() if severity in (
                "critical", "warning") else colour
        return style

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._styles.clear())
