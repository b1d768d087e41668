"""Themes: ``themes/*.toml`` (bundled, then the user's config dir) become Textual ``Theme`` objects.

A theme file holds the fields of ``textual.theme.Theme`` (name, primary, secondary, accent, warning,
error, success, foreground, background, surface, panel, boost, dark, luminosity_spread, text_alpha)
and an optional ``[variables]`` table. The app's stylesheets use only the variables these produce,
so a file is all a new look needs. A user file with the same ``name`` replaces the bundled one.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from textual.theme import Theme

from fleet_tui.core.errors import UserError
from fleet_tui.core.paths import bundled_themes_dir, user_themes_dir
from fleet_tui.core.records import record
from fleet_tui.core.tomlio import tomllib  # the project's TOML reader (tomli before 3.11)

DEFAULT_THEME = "fleet-dark"

_FIELDS = {"name", "primary", "secondary", "warning", "error", "success", "accent", "foreground",
           "background", "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha",
           "variables", "ansi"}


@record
class LoadedTheme:
    theme: Theme
    path: Path
    alias: str  # the file stem: ``--theme light`` works as well as ``--theme fleet-light``


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read theme file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise UserError(f"{path}: unknown theme field(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(_FIELDS))}")
    if not isinstance(data.get("name"), str) or not isinstance(data.get("primary"), str):
        raise UserError(f"{path}: a theme needs a 'name' and a 'primary' colour (strings)")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise UserError(f"{path}: [variables] must map names to strings")
    try:
        theme = Theme(**data)
        colors = theme.to_color_system().generate()  # validates every colour now, not on first paint
        if PANE_BORDER not in variables:
            theme = Theme(**{**data, "variables": {**variables,
                                                   PANE_BORDER: pane_border(colors)}})
    except Exception as exc:  # Textual raises ColorParseException and friends
        raise UserError(f"{path}: bad colour in theme {data['name']!r}: {exc}") from None
    return theme


PANE_BORDER = "pane-border"


def pane_border(colors: dict[str, str]) -> str:
    """The panes' border colour when a theme does not set ``pane-border``: halfway from
    the surface to the text colour, so it shows on light and dark surfaces alike (a shade of the
    panel colour vanished on the light theme's white)."""
    from textual.color import Color

    return Color.parse(colors["surface"]).blend(Color.parse(colors["foreground"]), 0.5).hex


def theme_dirs() -> list[Path]:
    return [bundled_themes_dir(), user_themes_dir()]


def load_themes(dirs: list[Path] | None = None) -> list[LoadedTheme]:
    """Every theme in ``dirs`` (later directories override earlier ones by name)."""
    found: dict[str, LoadedTheme] = {}
    for directory in dirs if dirs is not None else theme_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            theme = load_theme_file(path)
            found[theme.name] = LoadedTheme(theme, path, path.stem)
    return list(found.values())


def resolve_theme_name(requested: str | None, loaded: list[LoadedTheme],
                       builtin: tuple[str, ...] = ()) -> str:
    """The registered name for ``--theme`` (a theme name or its file stem); UserError if unknown."""
    if not requested:
        return DEFAULT_THEME if any(t.theme.name == DEFAULT_THEME for t in loaded) else "textual-dark"
    for item in loaded:
        if requested in (item.theme.name, item.alias):
            return item.theme.name
    if requested in builtin:
        return requested
    names = sorted({t.theme.name for t in loaded} | {t.alias for t in loaded})
    close = difflib.get_close_matches(requested, names + list(builtin), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UserError(f"--theme {requested!r} is not a known theme.{hint} "
                    f"Available: {', '.join(names)} (files in {', '.join(map(str, theme_dirs()))}).")
