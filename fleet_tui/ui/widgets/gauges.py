"""Text gauges (bars, numbers with units) used by cards and tables. Formatting only, no logic."""

from __future__ import annotations

from textual.markup import escape

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


def gauge(label: str, frac: float | None, text: str, width: int = 10, *, warn: float = 0.8,
          bad: float = 0.95, label_width: int = 6) -> str:
    """``label  ████░░  text`` as Textual markup."""
    style = level_style(frac, warn, bad)
    return f"[$text-muted]{label:<{label_width}}[/][{style}]{bar(frac, width)}[/] {escape(text)}"


def pct(value: float | None, digits: int = 0) -> str:
    return "N/A" if value is None else f"{value:.{digits}f}%"


def gib(value_bytes: int | float | None, digits: int = 1) -> str:
    return "N/A" if value_bytes is None else f"{value_bytes / 2**30:.{digits}f}"


def human_bytes(value: float | None) -> str:
    if value is None:
        return "N/A"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def usd(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"${value:,.{digits}f}"
