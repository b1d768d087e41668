"""A refresh that reads only what changed: which GPUs were scraped since the last refresh, and the
values the others keep (``queries.build_probe_query`` / ``build_changed_query`` say why)."""

from __future__ import annotations

from typing import NamedTuple

from fleet_tui.core.monitor.sources.prometheus.parse import Acc

# Above this share of GPUs with a new sample, the probes would only add a request: read it all.
FULL_READ_SHARE = 0.5


class Kept(NamedTuple):
    """One GPU as of the last refresh: its sample time and raw values, and the sample-time probe
    they came with (its classification, the same object for the same label text, and its text)."""

    sample_ts: float | None
    values: dict
    probe_entry: tuple | None
    probe_raw: object


class ChangedOnly:
    """Each GPU's sample time and raw values as of the last refresh (``Kept`` by GPU key).

    ``ready``: the next refresh may read only the changes (the last one read every GPU with its
    sample time, and few of them had moved). A refresh ``begin``s; ``unchanged(entry, raw)``, the
    probe answer's filter, leaves out each GPU whose probe repeats the last refresh's (same label
    text, same sample-time text) and notes it in ``same`` (key -> sample time): no per-GPU object
    is made for it, its reading is the one the source already holds (at 4,096 GPUs scraped every
    15 s, ~7/8 of them). ``moved_since(groups)`` reuses the kept values of the other GPUs whose
    sample time did not move and returns the time after which to ask for the rest;
    ``take(groups, fresh)`` puts their fresh values in; ``remember(groups)`` keeps the result."""

    def __init__(self, *, enabled: bool = True):
        self.enabled = enabled
        self._kept: dict[tuple, Kept] | None = None
        self.moved_share = 0.0
        self.same: dict[tuple, float] = {}

    @property
    def ready(self) -> bool:
        return self._kept is not None and self.moved_share <= FULL_READ_SHARE

    def forget(self) -> None:
        self._kept = None
        self.same = {}

    def begin(self) -> None:
        self.same = {}

    def unchanged(self, entry: tuple, raw: object) -> bool:
        """Whether this series is a GPU's sample-time probe exactly as last refresh."""
        if entry[0] != "dev" or entry[2] is not None or entry[3] != "nvidia" \
                or self._kept is None:
            return False
        kept = self._kept.get(entry[1])
        if kept is None or kept.probe_entry is not entry or kept.probe_raw != raw \
                or kept.sample_ts is None:
            return False
        self.same[entry[1]] = kept.sample_ts
        return True

    def moved_since(self, groups: dict[tuple, Acc]) -> float | None | bool:
        """None: nothing moved; False: a GPU came without its sample time (read everything)."""
        kept = self._kept or {}
        moved: list[float] = []
        for key, acc in groups.items():
            if key[0] != "nvidia":
                continue
            before = kept.get(key)
            if before is not None and before.sample_ts == acc.sample_ts:
                acc.values = before.values  # the same scrape: the same values (the same dict)
            elif acc.sample_ts is None:
                return False
            else:
                moved.append(acc.sample_ts)
        return min(moved) - 0.001 if moved else None

    @staticmethod
    def take(groups: dict[tuple, Acc], fresh: dict[tuple, Acc]) -> None:
        for key, acc in fresh.items():
            target = groups.get(key)
            if target is not None and acc.values:
                target.values = acc.values

    def remember(self, groups: dict[tuple, Acc]) -> None:
        """Keep each GPU's sample time and values, when every GPU came with its sample time (the
        age probe); otherwise the next refresh reads everything. The GPUs in ``same`` keep what
        they had."""
        if not self.enabled:
            return
        before = self._kept or {}
        kept: dict[tuple, Kept] = {key: before[key] for key in self.same}
        moved = 0
        for key, acc in groups.items():
            if key[0] == "nvidia":
                if acc.sample_ts is None or not acc.values:
                    self._kept = None
                    return
                previous = before.get(key)
                kept[key] = Kept(acc.sample_ts, acc.values, acc.probe_entry, acc.probe_raw)
                moved += previous is None or previous.sample_ts != acc.sample_ts
        self.moved_share = moved / len(kept) if before and kept else 0.0
        self._kept = kept
