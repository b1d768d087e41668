"""A refresh that reads only what changed: which GPUs were scraped since the last refresh, and the
values the others keep (``queries.build_probe_query`` / ``build_changed_query`` say why)."""

from __future__ import annotations

from fleet_tui.core.monitor.sources.prometheus.parse import Acc

# Above this share of GPUs with a new sample, the probes would only add a request: read it all.
FULL_READ_SHARE = 0.5


class ChangedOnly:
    """Each GPU's sample time and raw values as of the last refresh (GPU key -> (time, values)).

    ``ready``: the next refresh may read only the changes (the last one read every GPU with its
    sample time, and few of them had moved); ``moved_since(groups)`` reuses the kept values of
    GPUs whose sample time did not move and returns the time after which to ask for the others;
    ``take(groups, fresh)`` puts their fresh values in; ``remember(groups)`` keeps the result."""

    def __init__(self, *, enabled: bool = True):
        self.enabled = enabled
        self._kept: dict[tuple, tuple[float | None, dict]] | None = None
        self.moved_share = 0.0

    @property
    def ready(self) -> bool:
        return self._kept is not None and self.moved_share <= FULL_READ_SHARE

    def forget(self) -> None:
        self._kept = None

    def moved_since(self, groups: dict[tuple, Acc]) -> float | None | bool:
        """None: nothing moved; False: a GPU came without its sample time (read everything)."""
        kept = self._kept or {}
        moved: list[float] = []
        for key, acc in groups.items():
            if key[0] != "nvidia":
                continue
            before = kept.get(key)
            if before is not None and before[0] == acc.sample_ts:
                acc.values = before[1]  # the same scrape: the same values (the same dict)
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
        age probe); otherwise the next refresh reads everything."""
        if not self.enabled:
            return
        kept: dict[tuple, tuple[float | None, dict]] = {}
        before = self._kept or {}
        moved = 0
        for key, acc in groups.items():
            if key[0] == "nvidia":
                if acc.sample_ts is None or not acc.values:
                    self._kept = None
                    return
                previous = before.get(key)
                if (previous is not None and previous[0] == acc.sample_ts
                        and previous[1] is acc.values):
                    kept[key] = previous  # unchanged: the same entry (no new object to collect)
                    continue
                kept[key] = (acc.sample_ts, acc.values)
                moved += previous is None or previous[0] != acc.sample_ts
        self.moved_share = moved / len(kept) if before and kept else 0.0
        self._kept = kept
