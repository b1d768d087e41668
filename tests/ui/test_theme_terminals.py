"""The light theme stays readable on 16- and 256-colour terminals (TERM=screen), and the
focused field shows under NO_COLOR by more than the cursor."""

from __future__ import annotations

from rich.color import Color, ColorSystem

from fleet_tui.ui.themes import load_themes
from tests.ui.conftest import settle

LIGHT_ON_WHITE = {7, 15}  # ANSI white and bright white: invisible on the light theme's background


def _light():
    theme = next(t.theme for t in load_themes() if t.theme.name == "fleet-light")
    return theme, theme.to_color_system().generate()


def test_light_theme_colours_survive_16_and_256_colour_terminals():
    theme, colors = _light()
    background = Color.parse(colors["background"])
    assert background.downgrade(ColorSystem.STANDARD).number in LIGHT_ON_WHITE
    for name in ("foreground", "primary", "error", "warning", "success", "accent", "pane-border"):
        colour = Color.parse(colors.get(name) or theme.variables[name])
        ansi16 = colour.downgrade(ColorSystem.STANDARD).number
        assert ansi16 not in LIGHT_ON_WHITE, (name, colour, ansi16)
        assert colour.downgrade(ColorSystem.EIGHT_BIT).number != background.downgrade(
            ColorSystem.EIGHT_BIT).number, name
    # success and primary keep their hue: green is not grey, blue is not cyan
    assert Color.parse(colors["success"]).downgrade(ColorSystem.STANDARD).number in (2, 10)
    assert Color.parse(colors["primary"]).downgrade(ColorSystem.STANDARD).number in (4, 12)


async def test_focused_field_is_marked_without_colour(make_app, monkeypatch):
    from textual.widgets import Input, Label

    from fleet_tui.ui.widgets.form import Field

    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        params = app.screen.query_one("#b-params", Input)
        params.focus()
        await pilot.pause(0.2)
        await pilot.pause()
        fields = list(app.screen.query(Field))
        focused = next(f for f in fields if params in f.query(Input))
        other = next(f for f in fields if f is not focused)
        assert app.focused is params, app.focused
        assert focused.query_one(Label).rich_style.reverse
        assert not other.query_one(Label).rich_style.reverse
