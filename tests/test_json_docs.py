"""docs/json.md lists the top-level keys each command's --json prints: the real output must have
exactly those keys, in that order."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cli_run import run

DOC = Path(__file__).resolve().parent.parent / "docs" / "json.md"


def _sections() -> list[tuple[list[str], list[str]]]:
    """(argv, documented keys) for each ``## `fleet-tui …` `` heading of docs/json.md."""
    out: list[tuple[list[str], list[str]]] = []
    for block in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        command = re.fullmatch(r"`fleet-tui (.+)`", head.strip())
        assert command, head
        keys = re.findall(r"^\| `([a-z_0-9]+)` \|", body, flags=re.M)
        out.append((shlex.split(command.group(1)), keys))
    return out


SECTIONS = _sections()


def test_the_document_covers_the_commands_it_names():
    assert len(SECTIONS) >= 4 and all(keys for _, keys in SECTIONS)


@pytest.mark.parametrize(("argv", "keys"), SECTIONS, ids=[" ".join(a[:2]) for a, _ in SECTIONS])
def test_the_printed_keys_are_the_documented_keys(capsys, argv, keys):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    data = json.loads(out)
    first = data[0] if isinstance(data, list) else data
    assert list(first) == keys
