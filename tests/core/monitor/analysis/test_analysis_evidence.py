"""Evidence for people: every rule's every value is said with its unit and scale, JSON keeps the
raw numbers, and the words come from one table (analysis.evidence.FORMATS)."""

from __future__ import annotations

import json
import re

import pytest

from fleet_tui.core.monitor.analysis import KINDS, analyze_trace
from fleet_tui.core.monitor.analysis.evidence import FORMATS, evidence_lines, pcie_link_name
from fleet_tui.core.monitor.trace import load_trace
from tests.paths import TESTS

CORPUS = TESTS / "fixtures" / "traces"
# A line carries a unit or a scale: %, a rate, bytes, watts, clocks, temperature, time, FLOP/B,
# or a count of named things.
UNIT = re.compile(r"%|GB/s|MB/s|GiB|\bW\b|MHz|°C|\d s\b|\bmin\b|\bh\b|FLOP/B|×|process|cores?\b"
                  r"|users|rises|XID|ECC|MIG|engine|clocks held|signal|state")


@pytest.fixture(scope="module")
def diagnoses():
    out = []
    for path in ["demo", *sorted(str(p) for p in CORPUS.glob("*/*.jsonl"))]:
        for a in analyze_trace(load_trace(path), window_s=5.0):
            out += list(a.diagnoses)
    return out


def test_every_rule_s_every_value_is_said_with_its_unit(diagnoses):
    seen = set()
    for d in diagnoses:
        seen.add(d.kind)
        for key, _value in d.evidence:
            assert key in FORMATS, (d.kind, key)  # a value without words: add it to FORMATS
        for line in d.evidence_text:
            assert UNIT.search(line), (d.kind, line)
            assert " = " not in line, (d.kind, line)
    # the traces exercise most kinds (the alarms and contention kinds need inputs no trace has)
    assert {"idle", "healthy_compute", "memory_bandwidth_bound", "host_transfer_bound",
            "input_starved", "launch_bound", "memory_growth", "memory_capacity_pressure",
            "engine_pool", "power_capped", "compute_no_tensor_cores"} <= seen, seen
    assert seen <= set(KINDS)


def test_json_keeps_the_raw_numbers_beside_the_words(diagnoses):
    d = next(x for x in diagnoses if x.kind == "host_transfer_bound"
             and x.evidence_value("pcie_rx_bytes_s"))
    out = json.loads(json.dumps(d.to_dict()))
    assert isinstance(out["evidence"]["pcie_rx_bytes_s"], float)
    assert out["evidence"]["pcie_rx_bytes_s"] > 1e9  # bytes/s, not GB/s
    assert any("GB/s of" in line and "PCIe Gen5 x16" in line for line in out["evidence_text"])


def test_the_issue_s_examples_read_as_people_say_them():
    link = 32e9 * 128 / 130 * 16 / 8
    assert pcie_link_name(link) == "PCIe Gen5 x16"
    lines = evidence_lines({"pcie_rx_bytes_s": 59.2e9, "pcie_link_bytes_s": link})
    assert lines == ("PCIe host→device 59.2 GB/s of 63.0 GB/s (PCIe Gen5 x16, 94%)",)
    assert evidence_lines({"dram_active_pct": 63.2}) == ("63 % of peak HBM bandwidth",)
    assert evidence_lines({"wait_share": 0.4})[0].startswith("40% of samples waiting on input")
    assert evidence_lines({"slope_bytes_s": 13e9, "time_to_full_s": 1.3}) == (
        "memory rising at +13.0 GB/s", "full in 1.3 s at that rate")
