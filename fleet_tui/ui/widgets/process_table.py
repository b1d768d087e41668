"""The monitor's process table: one row per GPU process, drawn as text lines.

It looks as the DataTable it replaces did (same columns, widths that only grow to fit, one cell of
padding each side, header, zebra stripes and a row cursor styled by DataTable's component classes)
but a tick that changes one process's memory repaints one line: the DataTable rendered the changed
row's cells again through Rich (~0.9 ms a frame on sim:8, the costliest widget of the pane;
bench/bench_monitor_cpu.py --profile). Up/down (and the mouse wheel) move the cursor; with more
processes than rows the window follows it and the header says which rows are shown.
"""

from __future__ import annotations

from textual.binding import Binding

from fleet_tui.ui.widgets.text import LiveText, styled_line

CELL_PADDING = 1  # spaces each side of a cell, as DataTable's default cell_padding


class ProcessTable(LiveText, can_focus=True):
    """Rows by key (``show_rows``), in the order given; only lines whose text changed repaint."""

    COLUMNS = ("pid", "dev", "mem", "user", "cmd")
    LABELS = {"pid": "PID", "dev": "device", "mem": "GPU memory", "user": "user", "cmd": "command"}
    COMPONENT_CLASSES = {"datatable--header", "datatable--even-row", "datatable--odd-row",
                         "datatable--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Previous process", show=False),
        Binding("down", "cursor(1)", "Next process", show=False),
        Binding("pageup", "cursor(-6)", show=False),
        Binding("pagedown", "cursor(6)", show=False),
        Binding("home", "cursor(-1000000)", show=False),
        Binding("end", "cursor(1000000)", show=False),
    ]
    # DataTable's own rules for what this table uses (textual/widgets/_data_table.py), with the
    # header as app.tcss styles DataTable's; lines are cropped, not wrapped, as a table's are.
    DEFAULT_CSS = """
    ProcessTable {
        background: $surface; color: $foreground; height: auto; max-height: 100%; padding: 0;
        text-wrap: nowrap; text-overflow: clip;
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background; color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header { background-tint: $foreground 5%; }
        }
        &:dark > .datatable--even-row { background: $surface-darken-1 40%; }
        & > .datatable--header { color: $primary; text-style: bold; background: $panel; }
        & > .datatable--even-row { background: $surface-lighten-1 50%; }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background; color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cursor = 0
        self._procs: dict[str, tuple[str, ...]] = {}  # key -> values, in order
        self._widths = [len(self.LABELS[c]) for c in self.COLUMNS]  # grow only, as DataTable's
        self._styles_key: tuple | None = None
        self._row_styles: dict[str, str] = {}
        self._lines: dict[tuple, tuple] = {}  # (values, style, width, column widths) -> line

    @property
    def row_count(self) -> int:
        return len(self._procs)

    @property
    def shown_rows(self) -> dict[str, tuple[str, ...]]:
        """The rows shown, by key, in order (a copy)."""
        return dict(self._procs)

    def show_rows(self, rows: dict[str, tuple[str, ...]]) -> None:
        """Rows by key: what was last given is what the table holds."""
        if rows == self._procs and self._styles_key is not None:
            return
        self._procs = dict(rows)
        for values in rows.values():
            for i, value in enumerate(values):
                if len(value) > self._widths[i]:
                    self._widths[i] = len(value)
        self.cursor = min(self.cursor, max(len(rows) - 1, 0))
        self._draw()

    def _styles(self) -> dict[str, str]:
        """The component classes' styles as markup, resolved again when focus or theme change."""
        key = (self.get_pseudo_class_state(), self.app.theme)
        if key != self._styles_key:
            get = self.get_component_styles
            cursor = self.get_component_rich_style("datatable--cursor")
            styles = {name: get(f"datatable--{name}").rich_style
                      for name in ("header", "even-row", "odd-row")}
            self._row_styles = {
                "header": str(styles["header"]),
                "even": str(styles["even-row"]), "odd": str(styles["odd-row"]),
                "even-cursor": str(styles["even-row"] + cursor),
                "odd-cursor": str(styles["odd-row"] + cursor)}
            self._styles_key = key
        return self._row_styles

    _LINES_KEPT = 256

    def _line(self, values, style: str, width: int):
        """A row as a styled line, kept while its values, style and the column widths stay the
        same (a tick on 64 devices changes one process row of the seven in view; building all
        seven again was most of the table's ~0.5 ms a tick)."""
        key = (tuple(values), style, width, tuple(self._widths))  # rows may come as lists
        line = self._lines.get(key)
        if line is None:
            pad = " " * CELL_PADDING
            text = "".join(f"{pad}{value:<{w}}{pad}" for value, w in zip(values, self._widths))
            if len(self._lines) >= self._LINES_KEPT:
                self._lines.clear()
            # a row spans the width
            line = self._lines[key] = styled_line([(text.ljust(width), style or None)])
        return line

    def _draw(self) -> None:
        styles = self._styles()
        keys = list(self._procs)
        height = self.styles.height  # a fixed height (the monitor's 7) holds a window of rows
        visible = (max(int(height.value) - 1, 1) if height is not None and height.is_cells
                   else max(len(keys), 1))
        first = min(max(self.cursor - visible + 1, 0), max(len(keys) - visible, 0))
        width = self.size.width
        header = tuple(self.LABELS[c] for c in self.COLUMNS)
        out = [self._line(header, styles["header"], width)]
        for index in range(first, min(first + visible, len(keys))):
            kind = "odd" if index % 2 else "even"
            out.append(self._line(self._procs[keys[index]],
                                  styles[f"{kind}-cursor" if index == self.cursor else kind],
                                  width))
        if len(keys) > visible:  # where the window is, in place of a scrollbar
            where = f" {first + 1}–{min(first + visible, len(keys))} of {len(keys)} ↑↓ "
            text = out[0][1].plain.rstrip()
            room = max(self.size.width, len(text) + len(where))
            out[0] = styled_line([(text.ljust(room - len(where)) + where, styles["header"])])
        self.set_lines(out)

    def action_cursor(self, step: int) -> None:
        if self._procs:
            self.cursor = min(max(self.cursor + step, 0), len(self._procs) - 1)
            self._draw()

    def on_mouse_scroll_down(self, event) -> None:
        event.stop()
        self.action_cursor(1)

    def on_mouse_scroll_up(self, event) -> None:
        event.stop()
        self.action_cursor(-1)

    def on_focus(self) -> None:
        self.call_after_refresh(self._draw)  # once the :focus rules apply

    def on_blur(self) -> None:
        self.call_after_refresh(self._draw)

    def on_resize(self) -> None:
        self._draw()
