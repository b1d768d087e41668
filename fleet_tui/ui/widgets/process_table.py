"""The monitor's process table: one row per GPU process, updated in place by key."""

from __future__ import annotations

from fleet_tui.ui.widgets.table import Table


class ProcessTable(Table):
    """The process table; ``Table.set_cell`` repaints only a changed cell's row."""

    COLUMNS = ("pid", "dev", "mem", "user", "cmd")
    _shown: dict[str, tuple[str, ...]] | None = None  # key -> the row's values as last drawn

    def show_rows(self, rows: dict[str, tuple[str, ...]]) -> None:
        """Rows by key, updated in place: rows that went are removed, new ones added, and only
        the cells of changed rows are compared (64 devices: 320 cell reads a tick otherwise)."""
        shown = self._shown if self._shown is not None else {}
        for key in shown.keys() - rows.keys():
            self.remove_row(key)
        for key, values in rows.items():
            before = shown.get(key)
            if before is None:
                self.add_row(*values, key=key)
            elif before != values:  # update in place by key; only changed rows repaint
                for column, value, old in zip(self.COLUMNS, values, before):
                    if value != old:
                        self.set_cell(key, column, value)
        self._shown = dict(rows)
