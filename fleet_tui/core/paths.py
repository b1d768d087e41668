"""Where bundled and user data live.

Bundled data sits at the repository top (``catalogs/``, ``themes/``) in a source checkout and under
``fleet_tui/_data/`` inside an installed wheel. User data follows XDG: ``$XDG_CONFIG_HOME/fleet-tui``
(default ``~/.config/fleet-tui``) for catalogs, themes and alert rules, ``$XDG_DATA_HOME/fleet-tui``
for recorded history.
"""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent


def _bundled(name: str) -> Path:
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


def bundled_catalog_dir() -> Path:
    return _bundled("catalogs")


def bundled_themes_dir() -> Path:
    return _bundled("themes")


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fleet-tui"


def user_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fleet-tui"


def user_catalog_dir() -> Path:
    return user_config_dir() / "catalogs"


def user_themes_dir() -> Path:
    return user_config_dir() / "themes"


def default_history_db() -> Path:
    return user_data_dir() / "history.db"
