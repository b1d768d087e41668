"""Times as Slurm's ``sacct --starttime``/``sreport start=`` take them, read into epoch seconds.

A period's digest must know its bounds as numbers to count only the part of each job inside them
(as ``sreport`` does), and must hand ``sacct`` the same bounds it counts. The forms read are the
ones sacct(1) documents under ``--starttime``: ``now``, ``now[+-]N[seconds|minutes|hours|days|
weeks]`` and ``YYYY-MM-DD[THH:MM[:SS]]`` (local time, as Slurm reads it), plus this tool's short
``7d``/``12h``. ``as_sacct`` writes a time back in the ISO form, so sacct gets the very second the
digest counts from.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from fleet_tui.core.errors import FieldError, escape_braces

_UNITS = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
          "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_RELATIVE = re.compile(r"now(?:([+-])(\d{1,6})([a-z]*))?")
_SHORT = re.compile(r"(\d{1,4})([dh])")
_ISO = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d")
FORMS = "now, now-N{seconds|minutes|hours|days|weeks}, 7d, 12h or YYYY-MM-DD[THH:MM[:SS]]"


def parse_when(text: str, now: float, *, field: str) -> float:
    """Epoch seconds of ``text`` (see the module's forms); a ``FieldError`` on ``field``
    otherwise."""
    s = text.strip().lower()
    m = _SHORT.fullmatch(s)
    if m:
        return now - int(m.group(1)) * (86400 if m.group(2) == "d" else 3600)
    m = _RELATIVE.fullmatch(s)
    if m:
        if m.group(1) is None:
            return now
        unit = _UNITS.get(m.group(3) or "s")  # sacct: a bare number is seconds
        if unit is not None:
            n = int(m.group(2)) * unit
            return now - n if m.group(1) == "-" else now + n
    for fmt in _ISO:
        try:
            return time.mktime(datetime.strptime(text.strip(), fmt).timetuple())
        except (ValueError, OverflowError):
            continue
    raise FieldError(field, f"{{{field}}} must be {FORMS}; got {escape_braces(text[:80])!r}")


def as_sacct(epoch_s: float) -> str:
    """``epoch_s`` in the ISO local-time form sacct and sreport read."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(int(epoch_s)))
