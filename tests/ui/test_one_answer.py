"""One diagnosis per device per moment: on every tick of a replay with phase changes, the device
table's row, the card, the diagnoses panel, ``monitor --once``, the recorder and the exporter
show the same primary, read from the same finding object of the same tick (the exporter's
scraped over 127.0.0.1: the primary's kind, severity and evidence values)."""

from __future__ import annotations

import sqlite3
import threading

from prometheus_client import CollectorRegistry

from fleet_tui.commands.monitor import _device_line
from fleet_tui.core.exporter import FleetCollector, serve_metrics
from fleet_tui.core.fleet import FleetViews
from fleet_tui.core.monitor.analysis.evidence import evidence_values
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.recorder import Recorder
from fleet_tui.core.monitor.trace import load_trace
from fleet_tui.ui.widgets.device_card import device_lines
from fleet_tui.ui.widgets.device_table import diagnosis_label
from fleet_tui.ui.widgets.diagnosis_text import diagnosis_lines
from tests.fleet.test_exporter import scrape


def _plain(line) -> str:
    return line[1].plain


def test_every_view_shows_the_same_primary_on_every_tick_of_a_replay(tmp_path):
    recorder = Recorder(tmp_path / "h.db")
    eng = MonitorEngine(None, interval_s=0.2, min_interval_s=0.1, usd_per_hour=1.0,
                        alert_rules=[], recorder=recorder)
    views = FleetViews()
    collector = FleetCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server = serve_metrics(registry, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    ticks = kinds = scraped = 0
    seen_primaries = []
    for i, snap in enumerate(load_trace("demo")):
        tick = eng.process(snap)
        recorder.accept(snap, tick.primaries)
        fleet = views(tick)
        collector.publish(fleet, (), 0.0, None)
        metrics = scrape(port) if i % 5 == 0 else None
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
            if metrics is not None:  # scraped: the same kind, its severity, its evidence
                scraped += 1
                (labels, _), = [(lab, v) for lab, v in metrics["fleet_tui_device_primary_diagnosis"]
                                if lab["uuid"] == dev.uuid]
                assert (labels["kind"], labels["severity"]) == (primary.kind, primary.severity)
                for key, unit, value in evidence_values(primary.evidence_dict):
                    name = f"fleet_tui_diagnosis_evidence_{unit}" if unit else \
                        "fleet_tui_diagnosis_evidence"
                    shown = [v for lab, v in metrics[name] if lab["uuid"] == dev.uuid
                             and lab["kind"] == primary.kind and lab["key"] == key]
                    assert shown == [value], (primary.kind, key)
            seen_primaries.append(primary.kind)
            ticks += 1
    server.shutdown()
    server.server_close()
    recorder.flush()
    with sqlite3.connect(tmp_path / "h.db") as db:
        stored = [r[0] for r in db.execute("SELECT primary_kind FROM samples ORDER BY ts")]
    recorder.close()
    assert stored == seen_primaries  # the recorder wrote each tick's primary
    kinds = len(set(seen_primaries))
    assert ticks > 500 and kinds >= 6  # a replay through phase changes, not one steady state
    assert scraped > 100
