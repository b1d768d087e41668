"""The hot path's parser: a compact instant-vector answer cut by string splits, not ``json.loads``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fleet_tui.core.monitor.sources.prometheus.parse import Acc, classify_series, group_classified, json_loads

# Prometheus writes its answers compactly, fields in a fixed order (the API's Go structs), so an
# instant vector can be cut into (label text, time, value) by string splits, about 3x faster than
# json.loads building a dict per series, and the label text is a ready cache key. orjson does not
# change that: it still builds two dicts and a list per series (bench, 4,096 GPUs, 18 MB: split
# 116 ms, orjson 315 ms, json 358 ms); it decodes each new label text and whole answers elsewhere. Only an answer
# without backslashes takes this path: then no string can hold a quote, so the separators below
# cannot occur inside a label value and the cut is exact. Anything else goes through json.
# a label text not classified yet; a tuple (never a classification: compared by identity) so that
# the cache's lookup stays one typed get
_MISSING: tuple = ("not classified yet",)
_VECTOR_HEAD = '{"status":"success","data":{"resultType":"vector","result":['


def _vector_parts(body: bytes) -> list[str] | None:
    """The series' texts of a compact instant-vector answer (each from after ``{"metric":{``)."""
    if not body.startswith(b'{"status":"success","data":{"resultType":"vector","result":[{') \
            or b"\\" in body:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split('{"metric":{')
    if len(parts) < 2 or parts[0] != _VECTOR_HEAD:
        return None
    del parts[0]
    return parts



@dataclass(slots=True)
class LabelCache:
    """Label text -> ``classify_series`` for one kind of query, kept across refreshes. Cleared
    when it outgrows four times the largest answer seen (label sets churn as pods come and go);
    sized by the largest, not the latest, answer, since the changed-only refresh's answers are a
    fraction of the full one's and would otherwise clear it every time."""

    texts: dict[str, tuple | None] = field(default_factory=dict)
    peak: int = 0  # series in the largest answer seen


class NotCompact(Exception):
    """The answer is not in the compact form the splits assume: decode it as JSON instead."""


def iter_classified(parts: list[str], labels: LabelCache,
                    ) -> Iterator[tuple[tuple | None, str]]:
    """(classification, raw value) per series of ``_vector_parts``, each label text classified
    once and kept in ``labels``. A generator, so the grouping that consumes it keeps no row
    objects alive: at 4,096 GPUs, ~90,000 surviving tuples per refresh were what made the
    garbage collector cost ~40 % of a refresh (bench/bench_fleet.py). Raises ``NotCompact``."""
    labels.peak = max(labels.peak, len(parts))
    cache = labels.texts
    if len(cache) > 4 * labels.peak + 10_000:
        cache.clear()
    missing = _MISSING
    lookup = cache.get
    last = len(parts) - 1
    for i, chunk in enumerate(parts):
        text, sep, rest = chunk.partition('},"value":[')
        if not sep:
            raise NotCompact
        rest = rest.partition(',"')[2]
        raw, sep, rest = rest.partition('"]}')
        if not sep or (rest != "," if i != last
                       else not (rest.startswith("]}") and rest.rstrip().endswith("}"))):
            raise NotCompact
        entry = lookup(text, missing)
        if entry is missing:
            try:
                decoded = json_loads("{%s}" % text)
                entry = classify_series(decoded) if isinstance(decoded, dict) else None
            except (ValueError, TypeError, AttributeError, KeyError):
                raise NotCompact from None
            cache[text] = entry
        yield entry, raw


def split_grouped(body: bytes, labels: LabelCache, *,
                  neuron_per_device: dict[str, int] | None = None,
                  skip: Callable[[tuple, object], bool] | None = None,
                  ) -> tuple[dict[tuple, Acc], dict[str, float]] | None:
    """A compact answer grouped by device (``group_classified``, ``skip`` as there) straight from
    the splits; None: decode the body as JSON."""
    parts = _vector_parts(body)
    if parts is None:
        return None
    try:
        return group_classified(iter_classified(parts, labels), neuron_per_device=neuron_per_device,
                                skip=skip)
    except NotCompact:
        return None


def split_classified(body: bytes, cache: dict[str, tuple | None],
                     ) -> list[tuple[tuple | None, str]] | None:
    """A compact answer cut into series, each classified (``classify_series``): (classification,
    raw value) per series; None: decode the body as JSON."""
    parts = _vector_parts(body)
    if parts is None:
        return None
    try:
        return list(iter_classified(parts, LabelCache(texts=cache)))
    except NotCompact:
        return None
