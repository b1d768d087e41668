"""A DataTable whose cached lines follow its column widths.

Textual's DataTable measures new cells on an idle event and then changes the column widths, but the
lines it rendered between ``add_rows`` and that idle event stay in its caches under the same key
(the key holds the update count, not the widths). On a loaded machine a frame lands in that gap and
the header and first row stay drawn at the old widths (a truncated ``democ`` under ``cloud``) until
the cursor moves. Dropping the caches whenever a measurement changes a width fixes that.
"""

from __future__ import annotations

from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey


class Table(DataTable):
    def _widths(self) -> tuple[int, ...]:
        return (self._label_column.content_width,
                *(column.content_width for column in self.columns.values()))

    def _update_dimensions(self, new_rows) -> None:
        before = self._widths()
        super()._update_dimensions(new_rows)
        if self._widths() != before:
            self._clear_caches()
            self.refresh()

    def set_cell(self, row_key: str, column_key: str, value) -> bool:
        """Change one cell and repaint only its row; False when it already held ``value``.
        ``DataTable.update_cell`` repaints every visible row, and on a monitor tick usually a few
        numbers change. Columns keep their widths (set them fixed where values vary)."""
        if self.get_cell(row_key, column_key) == value:
            return False
        # The same data change update_cell makes (its caches are keyed by the update count),
        # but only the row's lines are marked dirty; the others repaint from the line cache.
        self._data[RowKey(row_key)][ColumnKey(column_key)] = value
        self._update_count += 1
        self.refresh_row(self.get_row_index(row_key))
        return True
