"""One diagnosis per device per moment: on every tick of a replay with phase changes, the device
table's row, the card, the diagnoses panel, ``monitor --once``, the recorder and the exporter
show the same primary, read from the same finding object of the same tick."""

from __future__ import annotations

import sqlite3

from fleet_tui.commands.monitor import _device_line
from fleet_tui.core.fleet import FleetViews
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.recorder import Recorder
from fleet_tui.core.monitor.trace import load_trace
from fleet_tui.ui.widgets.device_card import device_lines
from fleet_tui.ui.widgets.device_table import diagnosis_label
from fleet_tui.ui.widgets.diagnosis_text import diagnosis_lines


def _plain(line) -> str:
    return line[1].plain


def test_every_view_shows_the_same_primary_on_every_tick_of_a_replay(tmp_path):
    recorder = Recorder(tmp_path / "h.db")
    eng = MonitorEngine(None, interval=0.2, min_interval_s=0.1, usd_per_hour=1.0,
                        alert_rules=[], recorder=recorder)
    views = FleetViews()
    ticks = kinds = 0
    seen_primaries = []
    for snap in load_trace("demo"):
        tick = eng.process(snap)
        recorder.accept(snap, tick.primaries)
        fleet = views(tick)
        findings = tick.diagnoses
        for dev in snap.devices:
            analysis = tick.analyses[dev.key]
            primary = analysis.diagnoses[0]
            words = primary.headline
            # the table's row
            assert diagnosis_label(dev, analysis) == (words, primary.severity)
            # the card, compact and opened (Enter): the line after the name is the primary
            assert words in _plain(device_lines(dev, analysis=analysis)[1])
            opened = device_lines(dev, analysis=analysis, detailed=True)
            assert words in _plain(opened[1]) and "primary" in _plain(opened[1])
            # the diagnoses panel: the device's first finding is the primary, the same object
            first = next(f for f in findings if f.device_key == dev.key)
            assert first.primary and first.diagnosis is primary
            assert words in _plain(diagnosis_lines(first.diagnosis, primary=True)[0])
            # monitor --once
            assert _device_line(dev, analysis)[-1].startswith(words)
            # the exporter (and fleet pane): the same primary
            row = next(d for d in fleet.offenders if d.key == dev.key)
            assert row.primary == primary.kind
            seen_primaries.append(primary.kind)
            ticks += 1
    recorder.flush()
    with sqlite3.connect(tmp_path / "h.db") as db:
        stored = [r[0] for r in db.execute("SELECT primary_kind FROM samples ORDER BY ts")]
    recorder.close()
    assert stored == seen_primaries  # the recorder wrote each tick's primary
    kinds = len(set(seen_primaries))
    assert ticks > 500 and kinds >= 6  # a replay through phase changes, not one steady state
