"""The catalog as every command loads it: bundled + user + ``--catalog-dir``, each broken file's
``file:line: field: message`` printed as a warning on stderr (once per process), so no command
skips a user's file without a word."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the catalog package imports pydantic: only inside the handler
    from fleet_tui.core.catalog import Catalog

_said: set[str] = set()


def load_user_catalog(dirs: Iterable[Path | str] | None = (), **kwargs: bool) -> Catalog:
    """``load_catalog(dirs)``, its problems printed as warnings (see module doc)."""
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.textsafe import clean_lines

    cat = load_catalog(list(dirs or ()), **kwargs)
    for problem in cat.problems:
        if problem not in _said:
            _said.add(problem)
            print(f"fleet-tui: warning: {clean_lines(problem)} (file skipped)", file=sys.stderr)
    return cat
