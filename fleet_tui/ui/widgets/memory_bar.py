"""A stacked bar of memory per component (weights, KV cache, activations, ...) against capacity."""

from __future__ import annotations

from collections.abc import Mapping

from textual.markup import escape

# Theme variables only: the bar follows the theme.
SEGMENT_STYLES = ("$primary", "$accent", "$success", "$warning", "$secondary", "$error",
                  "$primary-lighten-2", "$accent-lighten-2")
_GIB = 2**30


def memory_bar_markup(components: Mapping[str, float], capacity_bytes: float | None,
                      width: int = 60) -> str:
    """Bar line(s) and a legend. The scale is max(total, capacity); a ``│`` marks the capacity."""
    items = [(name, float(v)) for name, v in components.items() if v and v > 0]
    total = sum(v for _, v in items)
    scale = max(total, capacity_bytes or 0.0) or 1.0
    cells: list[str] = []
    legend: list[str] = []
    used = 0
    for i, (name, value) in enumerate(items):
        style = SEGMENT_STYLES[i % len(SEGMENT_STYLES)]
        n = max(1, round(value / scale * width)) if value else 0
        n = min(n, width - used)
        if n > 0:
            cells.append(f"[{style}]{'█' * n}[/]")
            used += n
        legend.append(f"[{style}]■[/] {escape(name.replace('_', ' '))} {value / _GIB:,.2f} GiB")
    free = width - used
    cap_text = ""
    if capacity_bytes:
        cap_pos = round(capacity_bytes / scale * width)
        if cap_pos < width:  # over capacity: mark where the device ends
            bar = "".join(cells)
            cap_text = f"  [$error]needs {total / _GIB:,.1f} GiB > {capacity_bytes / _GIB:,.1f} GiB[/]"
            return (f"{bar}\n[$error]{' ' * cap_pos}▲ capacity[/]{cap_text}\n" + "   ".join(legend))
        cap_text = f"  {total / _GIB:,.1f} of {capacity_bytes / _GIB:,.1f} GiB"
    bar = "".join(cells) + f"[$text-muted]{'░' * free}[/]"
    return f"{bar}{cap_text}\n" + "   ".join(legend)
