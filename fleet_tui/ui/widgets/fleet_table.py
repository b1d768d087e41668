"""The fleet pane's node table: rows by rank (row N shows the N-th worst node), changed cells
written in place, and only the lines that show them drawn again.

A fleet's ranking moves on most refreshes. Keyed by node, the rows had to be re-sorted
(``DataTable.sort``) and each changed cell set with ``update_cell``: both bump the table's update
count, which every render cache is keyed by, so every visible cell went through Rich again on
each refresh — the longest block of the app's event loop at 512 nodes (bench/fleet_app_loop.py).
Keyed by rank, a moved node is a few changed cells: they are written into the table's data and
only the cached renders of their rows are dropped, in one pass over each cache per refresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.widgets.data_table import RowKey

from fleet_tui.ui.widgets.table import Table, drop_stale


class FleetTable(Table):
    """A ``Table`` whose rows are positions (keys ``"0"``, ``"1"``, …) filled by ``show_rows``."""

    def show_rows(self, rows: Sequence[tuple[str, ...]]) -> None:
        """Show ``rows`` (one tuple of cell texts per row, in the columns' order), top first."""
        if self.row_count != len(rows):
            cursor = self.cursor_row  # the number of rows changed: rebuild once
            self.clear()
            for i, values in enumerate(rows):
                self.add_row(*values, key=str(i))
            if rows:
                self.move_cursor(row=min(cursor, len(rows) - 1))
            return
        columns = [column.key for column in self.ordered_columns]
        data = self._data
        changed: list[int] = []
        for i, values in enumerate(rows):
            cells = data[RowKey(str(i))]
            for column, value in zip(columns, values):
                if cells[column] != value:
                    cells[column] = value
                    if not changed or changed[-1] != i:
                        changed.append(i)
        if changed:
            self._forget_rows(changed)

    def _forget_rows(self, indices: list[int]) -> None:
        """Drop the cached renders of the rows at ``indices`` (their cells, lines and renderables)
        and repaint; every other row keeps its renders, so the repaint draws only these. Every
        row is one line high (``add_row``'s default)."""
        keys = {RowKey(str(i)) for i in indices}
        at = set(indices)
        top = self.header_height if self.show_header else 0
        lines = {top + i for i in indices}
        drop_stale(self._cell_render_cache, lambda k: k[0] in keys)
        drop_stale(self._row_render_cache, lambda k: k[0] in keys)
        drop_stale(self._line_cache, lambda k: k[0] in lines)
        drop_stale(self._row_renderable_cache, lambda k: k[1] in at)
        self.refresh()
