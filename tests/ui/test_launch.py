"""Bad flags stop before the app starts: one sentence, exit status 2, no traceback."""

from __future__ import annotations

import pytest

from fleet_tui.cli import main
from fleet_tui.core.errors import UserError
from fleet_tui.ui.launch import build_app
from tests.ui.conftest import app_args


@pytest.mark.parametrize("kw, words", [
    (dict(source="bogus"), "--source"),
    (dict(source="replay:/no/such/file.jsonl"), "does not exist"),
    (dict(theme="nope"), "--theme"),
    (dict(catalog_dir=["/no/such/dir"]), "--catalog-dir"),
    (dict(interval=0.01), "--interval"),
])
def test_bad_flags_raise_user_error(kw, words):
    with pytest.raises(UserError) as info:
        build_app(app_args(**kw))
    assert words in str(info.value)


def test_cli_exit_2_and_message(capsys):
    assert main(["--theme", "lite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleet-tui: error: --theme 'lite'")
    assert "light" in err  # suggests the near name
    assert "Traceback" not in err


def test_theme_alias_and_default():
    assert build_app(app_args(theme="light")).theme == "fleet-light"
    assert build_app(app_args()).theme == "fleet-dark"


def _contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours."""
    from textual.color import Color

    def luminance(color: Color) -> float:
        def channel(v: int) -> float:
            v /= 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)

    high, low = sorted((luminance(Color.parse(a)), luminance(Color.parse(b))), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_pane_borders_show_on_every_theme(tmp_path):
    # The light theme once drew its panels' borders (and their titles) white on white.
    from fleet_tui.ui.themes import load_theme_file, load_themes

    for item in load_themes():
        colors = item.theme.to_color_system().generate()
        border = item.theme.variables["pane-border"]
        assert _contrast(border, colors["surface"]) >= 3.0, (item.theme.name, border)
    # a user's theme that does not set it gets one derived from its surface and text colours
    path = tmp_path / "paper.toml"
    path.write_text('name = "paper"\nprimary = "#224488"\ndark = false\n'
                    'surface = "#FAFAF5"\nforeground = "#101010"\n')
    theme = load_theme_file(path)
    assert _contrast(theme.variables["pane-border"], "#FAFAF5") >= 3.0


def test_the_cli_hands_the_app_a_config_not_a_namespace(monkeypatch):
    import fleet_tui.ui.launch as launch
    from fleet_tui.ui.launch import AppConfig

    seen = []
    monkeypatch.setattr(launch, "run_app", lambda config: seen.append(config) or 0)
    assert main(["--source", "sim:3", "--theme", "light", "--catalog-dir", "/tmp", "--interval", "2",
                 "--instance", "p5.48xlarge", "--record", "/tmp/h.db"]) == 0
    assert seen == [AppConfig(source="sim:3", instance="p5.48xlarge", theme="light",
                              catalog_dirs=("/tmp",), interval_s=2.0, record_db="/tmp/h.db")]


def test_one_minimum_interval():
    import fleet_tui.ui.launch as launch
    from fleet_tui.core.monitor.engine import MIN_INTERVAL_S

    assert not hasattr(launch, "MIN_INTERVAL_S")
    with pytest.raises(UserError, match=f"at least {MIN_INTERVAL_S}"):
        build_app(app_args(interval=MIN_INTERVAL_S / 2))
