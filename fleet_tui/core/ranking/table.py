"""The priced offers of one ranking, kept as columns until somebody reads them."""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple

from fleet_tui.core.pricing import PRICING_OPTIONS
from fleet_tui.core.ranking.costs import MonthlyRates
from fleet_tui.core.ranking.index import CatalogRow
from fleet_tui.core.ranking.offers import Candidate
from fleet_tui.core.ranking.placement import Placement


class TableRow(NamedTuple):
    row: CatalogRow
    placement: Placement
    acc: Any


class OfferTable:
    """Offers as two columns: the sort key (a float) and a reference (an int) to the catalog row
    and pricing option; an offer becomes a :class:`Candidate` only when read.

    Columns of floats and ints because the bench shows it matters (``bench_recommend.py``, 100k
    offers): floats and ints are not tracked by the garbage collector, while one tuple per offer
    set off collections that walk every live object (the catalog's models included): 110 ms
    became 300 ms median on a busy 2-core machine. Offers are ordered as positions by their key;
    the sort is stable and rows are added in catalog order, so equal keys keep catalog order.
    """

    def __init__(self, options: tuple[str, ...], rates: MonthlyRates):
        self.options = options
        self.rates = rates
        self.keys: list[float] = []  # cost per unit, or $/month (unit $/month or speed unknown)
        self.refs: list[int] = []  # row slot × len(options) + index in options
        self._rows: list[TableRow] = []  # catalog rows with at least one offer

    def __len__(self) -> int:
        return len(self.keys)

    def add_row(self, row: CatalogRow, placement: Placement, acc) -> int:
        """Register a catalog row; returns the base of its offers' ``refs``."""
        self._rows.append(TableRow(row, placement, acc))
        return (len(self._rows) - 1) * len(self.options)

    def order(self, top: int | None = None) -> list[int]:
        """Positions, cheapest key first (all, or the first ``top``)."""
        positions = range(len(self.keys))
        by_key = self.keys.__getitem__
        if top is not None and top * 8 < len(self.keys):
            return heapq.nsmallest(top, positions, key=by_key)
        ordered = sorted(positions, key=by_key)
        return ordered if top is None else ordered[:top]

    def month(self, pos: int) -> float:
        """USD per month of the offer at ``pos`` (the same product the ranking loop computed)."""
        row, placement, _acc = self._rows[self.refs[pos] // len(self.options)]
        pricing = self.options[self.refs[pos] % len(self.options)]
        price = row.prices[PRICING_OPTIONS.index(pricing)]
        return price * placement.instances * self.rates(pricing, row.instance.cloud)

    def candidate(self, pos: int, seq: int) -> Candidate:
        slot, option = divmod(self.refs[pos], len(self.options))
        row, placement, acc = self._rows[slot]
        pricing = self.options[option]
        return Candidate(key=self.keys[pos], month=self.month(pos), seq=seq,
                         instance=row.instance, pricing=pricing,
                         price=row.prices[PRICING_OPTIONS.index(pricing)], placement=placement,
                         acc=acc)
