"""A DataTable whose cached lines follow its column widths.

Textual's DataTable measures new cells on an idle event and then changes the column widths, but the
lines it rendered between ``add_rows`` and that idle event stay in its caches under the same key
(the key holds the update count, not the widths). On a loaded machine a frame lands in that gap and
the header and first row stay drawn at the old widths (a truncated ``democ`` under ``cloud``) until
the cursor moves. Dropping the caches whenever a measurement changes a width fixes that.

Textual's ``LRUCache`` keeps its entries in a ring of ``[prev, next, key, value]`` lists, and its
``clear()`` drops the ring whole: every entry, with the Rich texts and strips it holds, becomes a
reference cycle that only a full garbage collection frees. The fleet pane freezes what survives a
refresh out of the collector's sight (``ui.runtime.FrozenSurvivors``), so there each dropped ring
(~20,000 objects for 512 node rows) waited for the periodic full collection, which blocked the UI
for ~150-190 ms. ``Table`` unlinks the rings before they are dropped, so reference counting frees
them at once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from fleet_tui.core.textsafe import clean

K = TypeVar("K", bound=Hashable)

STALE_SCAN_LIMIT = 2000  # cache entries looked through for a changed cell's (~0.1 ms)


def drop_stale(cache: LRUCache[K, Any], stale: Callable[[K], bool]) -> None:
    """Discard every entry of ``cache`` whose key ``stale`` picks; ``stale`` is typed for the
    keys of this very cache (each DataTable render cache has its own key tuple)."""
    for key in [k for k in cache.keys() if stale(k)]:
        cache.discard(key)


def free_ring(cache: LRUCache) -> None:
    """Empty ``cache`` with its entries unlinked first, so reference counting frees them
    (``LRUCache.clear`` leaves its ring of entries a reference cycle)."""
    for link in cache._cache.values():
        link.clear()
    cache.clear()


def safe_cell(value: object) -> object:
    """A cell as it may be shown: text from outside (a node's label, a job's name, an error)
    through ``core.textsafe.clean`` and as Rich ``Text``, so neither an escape code nor
    ``[markup]`` in it acts (DataTable reads a ``str`` cell as markup). Plain text without
    ``[`` stays a ``str`` (the common case, no cost)."""
    if isinstance(value, str) and (not value.isprintable() or "[" in value):
        return Text(clean(value))
    return value


class Table(DataTable):
    """Textual's DataTable with its caches freed as they are dropped (module doc) and every cell
    passed through ``safe_cell``."""

    def add_row(self, *cells: Any, height: int | None = 1, key: str | None = None,
                label: Any = None) -> RowKey:
        return super().add_row(*map(safe_cell, cells), height=height, key=key, label=label)

    def add_rows(self, rows: Iterable[Iterable[Any]]) -> list[RowKey]:
        return super().add_rows([list(map(safe_cell, row)) for row in rows])

    def update_cell(self, row_key: Any, column_key: Any, value: Any, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, safe_cell(value), update_width=update_width)

    def _rings(self) -> tuple[LRUCache, ...]:
        return (self._row_render_cache, self._cell_render_cache, self._row_renderable_cache,
                self._line_cache, self._offset_cache, self._ordered_row_cache)

    def _clear_caches(self) -> None:
        for cache in self._rings():
            free_ring(cache)
        super()._clear_caches()

    def notify_style_update(self) -> None:
        for cache in self._rings():
            free_ring(cache)
        super().notify_style_update()

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
        value = safe_cell(value)
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
        # Each cache is checked on its own so that its predicate is typed for its own keys.
        if len(self._cell_render_cache) > STALE_SCAN_LIMIT:  # cheaper to start again
            free_ring(self._cell_render_cache)
        else:
            drop_stale(self._cell_render_cache, lambda k: k[0] == row and k[1] == column)
        if len(self._row_render_cache) > STALE_SCAN_LIMIT:
            free_ring(self._row_render_cache)
        else:
            drop_stale(self._row_render_cache, lambda k: k[0] == row)
        if len(self._line_cache) > STALE_SCAN_LIMIT:
            free_ring(self._line_cache)
        else:
            drop_stale(self._line_cache, lambda k: k[0] in lines)
        self._row_renderable_cache.discard((self._update_count, index))
        self.refresh_row(index)
        return True
