"""At 80×24, in a real terminal (tmux), Enter on a device opens its card on the answer: the primary
diagnosis (the row's words), its evidence in units and the action, then readings and graphs, all
on the first screen; escape goes back to every device."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_small_screen import ROW, _start
from tests.e2e.test_tmux import tmux  # noqa: F401 - the fixture

pytestmark = [pytest.mark.tmux]


def test_80x24_enter_opens_the_card_on_its_diagnosis(tmux, tmp_path):  # noqa: F811
    _start(tmux, tmp_path, "--source replay:demo --interval 0.5")
    deadline = time.monotonic() + 40
    while True:  # the first device's row with its primary (not "collecting…")
        screen = tmux.wait_for("REPLAY", "diagnosis")
        rows = {m.group(1): m.group("diag") for line in screen.splitlines()
                if (m := ROW.match(line))}
        if "0" in rows and "collecting" not in rows["0"]:
            break
        assert time.monotonic() < deadline, screen
        time.sleep(0.5)
    tmux.keys("p")  # hold the replay still: the row and the card then read the same tick
    time.sleep(1.0)
    screen = tmux.screen()
    row = next(m.group("diag") for line in screen.splitlines()
               if (m := ROW.match(line)) and m.group(1) == "0")
    words = row[2:].strip()  # after the severity mark
    tmux.keys("Enter")
    screen = tmux.wait_for("diagnosed over", "· primary", "util ")  # the card's own lines
    lines = screen.splitlines()
    assert len(lines) <= 24
    head = next(i for i, line in enumerate(lines) if "· primary" in line)
    readings = next((i for i, line in enumerate(lines) if line.lstrip("│ ").startswith("util ")),
                    None)
    assert readings is not None, screen
    assert head < readings  # the answer first, then the readings
    assert words.rstrip("…")[:20] in lines[head], (words, lines[head])
    answer = "\n".join(lines[head:readings])
    assert "•" in answer and "→" in answer, answer  # evidence lines and the action
    assert any(unit in answer for unit in ("%", "GB/s", "GiB", " W", "MHz")), answer
    tmux.escape(gone="diagnosed over")
    tmux.wait_for("diagnosis")
    tmux.keys("q")
    screen = tmux.wait_for("FLEET_EXIT=")
    assert "FLEET_EXIT=0" in screen and "Traceback" not in screen
