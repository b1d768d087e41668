"""Small helpers the rules share: clamping a confidence and writing numbers into sentences."""

from __future__ import annotations

from fleet_tui.core import units


def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if x < lo else hi if x > hi else x


def gib(b: float | None) -> str:
    return units.gib(b, missing="?")


def gbs(b: float | None) -> str:
    return "?" if b is None else f"{b / 1e9:.1f} GB/s"


def duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
