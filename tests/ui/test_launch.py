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
