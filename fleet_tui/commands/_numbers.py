"""argparse types for numeric flags: argparse's ``float`` takes 'nan' and 'inf', which no flag of
ours means (an 'nan' analysis window once looped forever), so they are refused at parse time with
the flag's name (exit 2)."""

from __future__ import annotations

import argparse
import math


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
    return value


def whole_number(text: str) -> int:
    """An int >= 1 (counts and --top)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be a whole number >= 1")
    return value
