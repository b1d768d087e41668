"""How every front end writes bytes, percentages, money and durations: one function per unit.

Each takes the value in its base unit (bytes, percent, USD, seconds) and ``None`` for "not read",
written as ``missing`` (front ends differ only in that word: "N/A" in tables, "?" in sentences).
"""

from __future__ import annotations

GIB = 2**30


def gib(value_bytes: float | None, digits: int = 1, *, missing: str = "N/A", suffix: str = " GiB") -> str:
    """Bytes as GiB: ``gib(17e9)`` -> ``"15.8 GiB"``."""
    return missing if value_bytes is None else f"{value_bytes / GIB:.{digits}f}{suffix}"


def pct(value: float | None, digits: int = 0, *, missing: str = "N/A") -> str:
    """A percentage (already in percent): ``pct(42.4)`` -> ``"42%"``."""
    return missing if value is None else f"{value:.{digits}f}%"


def usd(value: float | None, digits: int = 2, *, missing: str = "—") -> str:
    """Dollars with thousands separators: ``usd(1234.5)`` -> ``"$1,234.50"``."""
    return missing if value is None else f"${value:,.{digits}f}"


def hours_minutes(seconds: float) -> str:
    """A duration as ``"3h05m"`` (Slurm-style job times)."""
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
