"""Every memo cache of the core, in one place, with one ``clear()``.

A cache here holds the result of one formula for a key made of *values* (frozen models, tuples,
strings), never of ``id()``s: a key that outlives its object can name a new object at the same
address. Each cache is bounded (the oldest entries go first), and ``clear()`` empties all
of them, e.g. after a catalog reload or between tests.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_ALL: dict[str, "Memo"] = {}
_MISSING = object()


class Memo:
    """A bounded, thread-safe map from a hashable key to a computed value (oldest out first)."""

    def __init__(self, name: str, maxsize: int):
        self.name = name
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        # A hit hashes the key once and takes no lock (a dict read is atomic): a pydantic model in
        # a key re-hashes on every lookup (a Workload: ~1.4 µs), and LRU bookkeeping on hits (three
        # lookups) made a cached size_workload 3.8 µs instead of ~1.2 µs (bench/bench_sizing.py).
        # So entries leave in insertion order, not least-recently-used order.
        value = self._data.get(key, _MISSING)
        if value is not _MISSING:
            return value
        value = compute()  # outside the lock: compute may itself use other caches
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class ValueKey:
    """A key for a value that compares by value but cannot be hashed (a frozen pydantic model with
    a dict field, like ``Accelerator.peak_tflops``): hashed by ``hash_parts`` taken from it, equal
    when the values are equal (the same object is checked first, which is the common case)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: Any, *hash_parts: Hashable):
        self.value = value
        self._hash = hash(hash_parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueKey) and (self.value is other.value or self.value == other.value)


def memo(name: str, maxsize: int = 256) -> Memo:
    """The cache called ``name`` (created on first use)."""
    cache = _ALL.get(name)
    if cache is None:
        cache = _ALL[name] = Memo(name, maxsize)
    return cache


def clear() -> None:
    """Empty every cache of the core."""
    for cache in _ALL.values():
        cache.clear()
