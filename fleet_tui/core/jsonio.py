"""One JSON document read from a user's file or a tool's output, its problems as ``where:line:``.

A syntax error names the line ``json`` stopped at; a document nested deeper than the interpreter can
recurse (``[[[[…`` from a hostile file) is refused by name instead of escaping as a RecursionError.
The caller picks the exception class its front end turns into a one-line error and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from fleet_tui.core.errors import UserError


def parse_json(text: str, where: str, error: Callable[[str], Exception] = UserError) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise error(f"{where}:1: JSON nested too deeply") from None
