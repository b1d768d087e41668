"""A DataTable whose cached lines follow its column widths.

Textual's DataTable measures new cells on an idle event and then changes the column widths, but the
lines it rendered between ``add_rows`` and that idle event stay in its caches under the same key
(the key holds the update count, not the widths). On a loaded machine a frame lands in that gap and
the header and first row stay drawn at the old widths (a truncated ``democ`` under ``cloud``) until
the cursor moves. Dropping the caches whenever a measurement changes a width fixes that.
"""

from __future__ import annotations

from textual.widgets import DataTable


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
