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


STALE_SCAN_LIMIT = 2000  # cache entries looked through for a changed cell's (~0.1 ms)


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
        row, column = RowKey(row_key), ColumnKey(column_key)
        self._data[row][column] = value
        # DataTable keys its render caches by an update count that update_cell bumps, so every
        # cell of the row was rendered again through Rich (~0.85 ms a row of five). Only what
        # holds this cell is dropped instead: its rendered cell, its row's lines and values.
        index = self.get_row_index(row_key)
        region = self._get_row_region(index)
        lines = range(region.y, region.bottom)
        for cache, stale in ((self._cell_render_cache, lambda k: k[0] == row and k[1] == column),
                             (self._row_render_cache, lambda k: k[0] == row),
                             (self._line_cache, lambda k: k[0] in lines)):
            if len(cache) > STALE_SCAN_LIMIT:  # cheaper to start again than to look through
                cache.clear()
                continue
            for key in [k for k in cache.keys() if stale(k)]:
                cache.discard(key)
        self._row_renderable_cache.discard((self._update_count, index))
        self.refresh_row(index)
        return True
