"""argparse types for numeric flags: argparse's ``float`` takes 'nan' and 'inf', which no flag of
ours means (an 'nan' analysis window once looped forever), so they are refused at parse time with
the flag's name (exit 2), and so is a magnitude over ``MAX_FLAG_NUMBER`` (``--timeout 1e308``
overflowed a timer): no count, price or duration of ours comes near it. Flags with a tighter range
check it in their handler, or use a type below (``timeout_seconds``)."""

from __future__ import annotations

import argparse
import math

# the bounds of core.limits (not imported: every command's start-up reads this module)
MAX_FLAG_NUMBER = 1e12
MAX_TIMEOUT_S = 3600.0


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
    if abs(value) > MAX_FLAG_NUMBER:
        raise argparse.ArgumentTypeError(f"{text!r}: must be from -{MAX_FLAG_NUMBER:,.0f} to "
                                         f"{MAX_FLAG_NUMBER:,.0f}")
    return value


def timeout_seconds(text: str) -> float:
    """A network timeout: > 0 and at most ``MAX_TIMEOUT_S``."""
    value = finite_float(text)
    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0 and at most "
                                         f"{MAX_TIMEOUT_S:,.0f} seconds")
    return value


def whole_number(text: str) -> int:
    """An int 1-``MAX_FLAG_NUMBER`` (counts and --top)."""
    try:
        value = int(text) if len(text) <= 20 else None  # no int() of 5,000 digits
    except ValueError:
        value = None
    if value is None:
        shown = repr(text) if len(text) <= 80 else f"a {len(text)}-character value"
        raise argparse.ArgumentTypeError(f"{shown} is not a whole number")
    if not 1 <= value <= MAX_FLAG_NUMBER:
        raise argparse.ArgumentTypeError(f"{text}: must be a whole number from 1 to "
                                         f"{MAX_FLAG_NUMBER:,.0f}")
    return value
