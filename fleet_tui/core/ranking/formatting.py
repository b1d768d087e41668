"""How money and device counts are written in tables, reasons and explanations."""

from __future__ import annotations

import math


def money(x: float | None) -> str:
    """Dollars as the tables and explanations print them: cents below $1,000, whole dollars
    above, four decimals below $1 (a per-token or per-sample cost)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    sign, x = ("-" if x < 0 else ""), abs(x)
    if x >= 1000:
        return f"{sign}${x:,.0f}"
    if x >= 1:
        return f"{sign}${x:,.2f}"
    return f"{sign}${x:.4f}"


def devices_label(count: float, accelerator: str, instances: int = 1) -> str:
    """``8× H100``, ``2×8× H100`` (two instances), ``0.167× A10`` (a GPU slice)."""
    n = f"{count:g}" if count != int(count) else f"{int(count)}"
    return (f"{instances}×" if instances > 1 else "") + f"{n}× {accelerator}"
