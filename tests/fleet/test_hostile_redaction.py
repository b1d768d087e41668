"""No password fragment in any output: a password holding each printable ASCII character class
(every punctuation mark, space and tab included: ``( ' " < / # ? @`` once broke the redaction or
ended in a traceback quoting the secret) goes through every command that takes a source, with and
without a scheme, against a real closed port on 127.0.0.1."""

from __future__ import annotations

import sqlite3
import string

import pytest

from fleet_tui.cli import main
from fleet_tui.core.redact import MASK, forget_all, split_url
from tests.fleet.promserver import free_port

PASSWORDS = [f"Sx{c}Kq7{c}Wm" for c in string.punctuation + " \t"] + ["Sx0Kq7zWm"]


def _fragments(password: str) -> set[str]:
    return {password[i:i + 4] for i in range(len(password) - 3)}


def _commands(tmp_path) -> list[list[str]]:
    return [
        ["monitor", "--once"],
        ["fleet", "--timeout", "1"],
        ["jobs", "--timeout", "1"],
        ["record", "--duration", "0.2", "--interval", "0.1", "--db", str(tmp_path / "h.db")],
        ["plan", "--on-demand-price", "1", "--days", "1"],
        ["rightsize", "--db", str(tmp_path / "none.db")],
    ]


@pytest.fixture(autouse=True)
def _fresh_secrets():
    forget_all()  # each case proves its own masking, not one learnt from the case before
    yield
    forget_all()


@pytest.mark.parametrize("password", PASSWORDS, ids=[repr(p[2]) for p in PASSWORDS])
def test_no_password_fragment_in_any_output(password, tmp_path, capsys):
    port = free_port()
    specs = [f"prometheus:http://alice:{password}@127.0.0.1:{port}/prom",
             f"prometheus:alice:{password}@127.0.0.1:{port}"]  # no scheme: refused, not echoed
    for spec in specs:
        for argv in _commands(tmp_path):
            code = main([*argv, "--source", spec])
            out = capsys.readouterr()
            text = out.out + out.err
            assert code in (0, 2), (argv, text)
            assert "Traceback" not in text, (argv, text)
            shown = [f for f in _fragments(password) if f in text]
            assert not shown, (argv, spec, text)
    db = tmp_path / "h.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            dump = "\n".join(conn.iterdump())
        assert not [f for f in _fragments(password) if f in dump]


@pytest.mark.parametrize("password", PASSWORDS, ids=[repr(p[2]) for p in PASSWORDS])
def test_the_url_is_split_at_the_last_at_sign(password):
    split = split_url(f"http://alice:{password}@prom.example:9090/api?token=abc123&q=up")
    assert split.url == "http://prom.example:9090/api?token=abc123&q=up"
    assert split.display == f"http://prom.example:9090/api?token={MASK}&q=up"
    assert (split.username, split.password) == ("alice", password) or "%" in password
    assert password not in repr(split)


@pytest.mark.parametrize("password", PASSWORDS, ids=[repr(p[2]) for p in PASSWORDS])
def test_a_spec_is_shown_from_its_structure_without_any_secret_remembered(password):
    """The display of a spec (the app's status line, ``record``'s start line) hides the password
    by the spec's structure, not by having seen it before."""
    from fleet_tui.core.redact import redact_spec
    from fleet_tui.ui.state import CatalogStatus, SourceStatus
    from fleet_tui.ui.widgets.chrome import render_status

    for spec, shown in ((f"prometheus:http://alice:{password}@prom:9090/x", "prom:9090/x"),
                        (f"prometheus:alice:{password}@prom:9090", "prom:9090")):
        forget_all()
        line = render_status(SourceStatus(kind="fleet", spec=spec, interval_s=1.0), CatalogStatus())
        forget_all()
        text = redact_spec(spec)
        for out in (line, text):
            assert shown in out and not [f for f in _fragments(password) if f in out], out
    assert redact_spec("replay:demo@2x") == "replay:demo@2x"  # a speed, not a secret
