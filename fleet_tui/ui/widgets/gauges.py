"""Text gauges (bars, numbers with units) used by cards and tables. Formatting only, no logic."""

from __future__ import annotations

from fleet_tui.core import units
from fleet_tui.core.units import pct, usd  # noqa: F401 - the UI imports them from here
from fleet_tui.ui.widgets.text import styled_line

_BLOCKS = " ▏▎▍▌▋▊▉█"


def bar(frac: float | None, width: int = 10) -> str:
    """A horizontal bar ``width`` cells wide; ``frac`` 0..1 (None: a dotted N/A bar)."""
    if frac is None:
        return "·" * width
    frac = min(max(frac, 0.0), 1.0)
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_BLOCKS[part] if part and full < width else "")
    return text + " " * (width - len(text))


def level_style(frac: float | None, warn: float = 0.8, bad: float = 0.95) -> str:
    if frac is None:
        return "$text-muted"
    if frac >= bad:
        return "$error"
    if frac >= warn:
        return "$warning"
    return "$success"


def gauge_parts(label: str, frac: float | None, text: str, width: int = 10, *,
                warn: float = 0.8, bad: float = 0.95, label_width: int = 6
                ) -> list[tuple[str, str | None]]:
    """``label  ████░░  text`` as (text, style) parts (see ``text.styled_line``)."""
    return [(f"{label:<{label_width}}", "$text-muted"),
            (bar(frac, width), level_style(frac, warn, bad)), (f" {text}", None)]


def gauge(label: str, frac: float | None, text: str, width: int = 10, *, warn: float = 0.8,
          bad: float = 0.95, label_width: int = 6) -> str:
    """``label  ████░░  text`` as Textual markup."""
    return styled_line(gauge_parts(label, frac, text, width, warn=warn, bad=bad,
                                   label_width=label_width))[0]


def human_bytes(value: float | None) -> str:
    if value is None:
        return "N/A"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def gib(value_bytes: int | float | None, digits: int = 1) -> str:
    """GiB without the unit (the gauges and tables name it)."""
    return units.gib(value_bytes, digits, suffix="")
