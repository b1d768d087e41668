"""The priced offers of one ranking, kept as columns until somebody reads them."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from typing import Any, NamedTuple

from fleet_tui.core.pricing import PRICING_OPTIONS
from fleet_tui.core.ranking.costs import MonthlyRates
from fleet_tui.core.ranking.index import CatalogRow
from fleet_tui.core.ranking.offers import Candidate
from fleet_tui.core.ranking.placement import Placement


class TableGroup(NamedTuple):
    rows: Sequence[CatalogRow]  # the group's rows that passed the filters
    placement: Placement
    acc: Any


class OfferTable:
    """Offers as two columns: the sort key (a float) and a reference (an int) to the catalog row
    and pricing option; an offer becomes a :class:`Candidate` only when read. Rows are registered
    a device group at a time, so the loop allocates nothing per row or offer but two numbers.

    Columns of floats and ints because the bench shows it matters (``bench_recommend.py``, 100k
    offers, chat workload): floats and ints are not tracked by the garbage collector, while one
    NamedTuple per offer set off collections that walk every live object (the catalog's models
    included): 296 ms median with the collector on, 157 ms with it paused (wall time, busy 2-core
    machine); these columns take 59 ms of CPU where the old paused-collector tuples took 96 ms. Offers are ordered as positions by their key;
    the sort is stable and rows are added in catalog order, so equal keys keep catalog order.
    """

    def __init__(self, options: tuple[str, ...], rates: MonthlyRates):
        self.options = options
        self.rates = rates
        self.keys: list[float] = []  # cost per unit, or $/month (unit $/month or speed unknown)
        # offer reference: base of its group + row index × len(options) + index in options
        self.refs: list[int] = []
        self._groups: list[TableGroup] = []
        self._bases: list[int] = []  # first reference of each group
        self._next = 0

    def __len__(self) -> int:
        return len(self.keys)

    def add_group(self, rows: Sequence[CatalogRow], placement: Placement, acc) -> int:
        """Register a device group's rows; returns the base of its offers' references."""
        base = self._next
        self._groups.append(TableGroup(rows, placement, acc))
        self._bases.append(base)
        self._next += len(rows) * len(self.options)
        return base

    def order(self, top: int | None = None) -> list[int]:
        """Positions, cheapest key first (all, or the first ``top``)."""
        positions = range(len(self.keys))
        by_key = self.keys.__getitem__
        if top is not None and top * 8 < len(self.keys):
            return heapq.nsmallest(top, positions, key=by_key)
        ordered = sorted(positions, key=by_key)
        return ordered if top is None else ordered[:top]

    def _locate(self, pos: int) -> tuple[TableGroup, CatalogRow, str]:
        ref = self.refs[pos]
        g = bisect.bisect_right(self._bases, ref) - 1
        group = self._groups[g]
        row_index, option = divmod(ref - self._bases[g], len(self.options))
        return group, group.rows[row_index], self.options[option]

    def candidate(self, pos: int, seq: int) -> Candidate:
        group, row, pricing = self._locate(pos)
        price = row.prices[PRICING_OPTIONS.index(pricing)]
        # the same product the ranking loop computed for this offer's month
        month = price * group.placement.instances * self.rates(pricing, row.instance.cloud)
        return Candidate(key=self.keys[pos], month=month, seq=seq, instance=row.instance,
                         pricing=pricing, price=price, placement=group.placement, acc=group.acc)
