"""The priced offers of one ranking, kept as columns until somebody reads them."""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
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
    served: Any = None  # with a demand: the ranking.serving ServedGroup of these rows


class OfferTable:
    """Offers as two columns: the sort key (a float) and a reference (an int) to the catalog row
    and pricing option; an offer becomes a :class:`Candidate` only when read. Rows are registered
    a device group at a time, so the loop allocates nothing per row or offer but two numbers.

    Columns of floats and ints because the bench shows it matters (``bench_recommend.py``, 100k
    offers, chat workload): floats and ints are not tracked by the garbage collector, while one
    NamedTuple per offer set off collections that walk every live object (the catalog's models
    included): 296 ms median with the collector on, 157 ms with it paused (wall time, busy 2-core
    machine); these columns take 59 ms of CPU where the old paused-collector tuples took 96 ms.
    Offers are ordered as positions by their key; the sort is stable and rows are added in catalog
    order, so equal keys keep catalog order.
    """

    def __init__(self, options: tuple[str, ...], rates: MonthlyRates):
        self.options = options
        self.rates = rates
        self.keys: list[float] = []  # cost per unit, or $/month (unit $/month or speed unknown)
        # offer reference: base of its group + row index × len(options) + index in options
        self.refs: list[int] = []
        # instance type × pricing option of each offer (its regions share one): one row per id
        self.ids: list[int] = []
        self._groups: list[TableGroup] = []
        self._bases: list[int] = []  # first reference of each group
        self._next = 0

    def __len__(self) -> int:
        return len(self.keys)

    def add_group(self, rows: Sequence[CatalogRow], placement: Placement, acc, served=None) -> int:
        """Register a device group's rows; returns the base of its offers' references."""
        base = self._next
        self._groups.append(TableGroup(rows, placement, acc, served))
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

    def candidate(self, pos: int, seq: int, regions: int = 1) -> Candidate:
        group, row, pricing = self._locate(pos)
        i = PRICING_OPTIONS.index(pricing)
        price = row.prices[i]
        # the same product the ranking loop computed for this offer's month
        served = group.served
        scale = served.scale if served is not None else 1
        month = price * group.placement.instances * scale * self.rates(pricing, row.instance.cloud)
        price_range = ()
        if regions > 1:  # the list prices of this instance type in the group's other regions
            same = [r.prices[i] for r in group.rows
                    if r.instance.instance_type == row.instance.instance_type and r.cloud_key == row.cloud_key
                    and r.prices[i] is not None]
            price_range = (min(same), max(same)) if same else ()
        return Candidate(key=self.keys[pos], month=month, seq=seq, instance=row.instance,
                         pricing=pricing, price=price, placement=group.placement, acc=group.acc,
                         regions=regions, price_range=price_range, scale=scale,
                         plan=served.plan if served is not None else None)

    def one_per_id(self, top: int | None = None) -> tuple[list[int], dict[int, int]]:
        """Positions cheapest first, keeping the cheapest offer of each id (instance type ×
        pricing option: its best region), and how many offers (regions) each id has.

        Built from C-level dict/zip/sort calls: a Python loop over every offer cost 3 ms of a
        9 ms repeated ranking of the bundled catalog (bench_recommend.py)."""
        counts = Counter(self.ids)
        if len(counts) == len(self.ids):  # nothing to fold
            return self.order(top), counts
        order = self.order(None)
        rev = order[::-1]
        first = dict(zip(map(self.ids.__getitem__, rev), rev))  # the last write wins: the cheapest
        rank = dict(zip(order, range(len(order))))
        kept = sorted(first.values(), key=rank.__getitem__)
        return (kept if top is None else kept[:top]), counts
