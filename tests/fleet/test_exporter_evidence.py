"""The exporter publishes the tick's finding object itself: each device's primary kind with its
severity, and the primary's and each risk's evidence as gauges in units, equal to the numbers
``--json`` keeps. Scraped over 127.0.0.1 on every few ticks of a replay through an out-of-memory leak."""

from __future__ import annotations

import pytest

from fleet_tui.core.exporter import FleetExporter
from fleet_tui.core.monitor.analysis.evidence import evidence_values
from fleet_tui.core.monitor.trace import load_trace
from tests.fleet.test_exporter import scrape
from tests.paths import TESTS

LEAK = TESTS / "fixtures" / "traces" / "synthetic" / "synthetic_leak_to_oom.jsonl"


def _evidence(metrics: dict[str, list]) -> dict[tuple[str, str, str], tuple[str, float]]:
    """(gpu, kind, key) -> (family, value) of every evidence gauge scraped."""
    out = {}
    for name, samples in metrics.items():
        if name.startswith("fleet_tui_diagnosis_evidence"):
            for lab, value in samples:
                out[(lab["gpu"], lab["kind"], lab["key"])] = (name, value)
    return out


def test_the_exporter_publishes_each_tick_s_primary_severity_and_evidence_in_units():
    exporter = FleetExporter(None, interval_s=0.5)
    port = exporter.serve("127.0.0.1", 0)
    scraped = critical = 0
    try:
        for i, snap in enumerate(load_trace(str(LEAK))):
            tick = exporter.engine.process(snap)
            exporter.on_tick(tick)
            if i % 4:
                continue
            metrics = scrape(port)
            scraped += 1
            (primary_labels, _), = metrics["fleet_tui_device_primary_diagnosis"]
            analysis = tick.analyses[snap.devices[0].key]
            top = analysis.diagnoses[0]
            assert (primary_labels["kind"], primary_labels["severity"]) == (top.kind,
                                                                            top.severity)
            got = _evidence(metrics)
            want = {(str(snap.devices[0].index), d.kind, key): (unit, value)
                    for n, d in enumerate(analysis.diagnoses) if n == 0 or d.role == "risk"
                    for key, unit, value in evidence_values(d.evidence_dict)}
            assert set(got) == set(want)
            for k, (unit, value) in want.items():
                family, shown = got[k]
                assert family == ("fleet_tui_diagnosis_evidence_" + unit if unit
                                  else "fleet_tui_diagnosis_evidence")
                assert shown == pytest.approx(value, rel=1e-12)
            if top.kind == "memory_growth" and top.severity == "critical":
                critical += 1
                name, seconds = got[("0", "memory_growth", "time_to_full_s")]
                assert name == "fleet_tui_diagnosis_evidence_seconds" and seconds < 60
                name, rate = got[("0", "memory_growth", "slope_bytes_s")]
                assert name == "fleet_tui_diagnosis_evidence_bytes_per_second" and rate > 0
                # the three say one thing: the free bytes run out in that time at that rate
                free = (got[("0", "memory_growth", "mem_total_bytes")][1]
                        - got[("0", "memory_growth", "mem_used_bytes")][1])
                assert seconds * rate == pytest.approx(max(free, 0.0), rel=5e-3, abs=1e6)  # (round3: 3 digits)
    finally:
        exporter.stop()
    assert scraped >= 30 and critical >= 2, (scraped, critical)
