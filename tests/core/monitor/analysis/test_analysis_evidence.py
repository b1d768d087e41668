"""Evidence for people: every rule's every value is said with its unit and scale, JSON keeps the
raw numbers, and the words come from one table (analysis.evidence.FORMATS)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fleet_tui.core.monitor.analysis import (
    KINDS,
    DeviceAnalysis,
    HostLoad,
    analyze_device_window,
    analyze_trace,
)
from fleet_tui.core.monitor.analysis.evidence import (
    FORMATS,
    UNITS,
    countdown,
    evidence_lines,
    evidence_values,
    pcie_link_name,
)
from fleet_tui.core.monitor.snapshot import DeviceSnapshot, ProcessInfo
from fleet_tui.core.monitor.trace import load_trace
from tests.paths import TESTS

CORPUS = TESTS / "fixtures" / "traces"
# A line carries a unit or a scale: %, a rate, bytes, watts, clocks, temperature, time, FLOP/B,
# or a count of named things.
UNIT = re.compile(r"%|GB/s|MB/s|GiB|\bW\b|MHz|°C|\d s\b|\bmin\b|\bh\b|FLOP/B|×|process|cores?\b"
                  r"|users|rises|XID|ECC|MIG|engine|clocks held|signal|state")


GIB = 2**30


def _dev(t: float, **kw: Any) -> DeviceSnapshot:
    base: dict[str, Any] = dict(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", timestamp=t,
                gpu_util_pct=99.0, sm_active_pct=95.0, tensor_active_pct=60.0,
                dram_active_pct=30.0, fp32_active_pct=5.0, mem_used_bytes=60 * GIB,
                mem_total_bytes=80 * GIB, power_w=500.0, power_limit_w=700.0,
                sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, clock_event_reasons=0)
    base.update(kw)
    return DeviceSnapshot(**base)


def _unit_windows() -> list[DeviceAnalysis]:
    """The kinds no recording covers, from windows built here (as the rules' unit tests do)."""
    starved = dict(gpu_util_pct=30.0, sm_active_pct=20.0, tensor_active_pct=10.0)
    users = (ProcessInfo(pid=1, device_index=0, user="alice"),
             ProcessInfo(pid=2, device_index=0, user="bob"))
    return [
        analyze_device_window([_dev(t, nvlink_rx_bytes_s=300e9, **starved) for t in range(5)]),
        analyze_device_window([_dev(t, **starved) for t in range(5)],
                              host=HostLoad(cpu_pct=35.0, busy_cores=4.0, cores=16)),
        analyze_device_window([_dev(t, processes=users) for t in range(5)]),
        analyze_device_window([_dev(t, mig_enabled=True) for t in range(5)]),
        analyze_device_window([_dev(t, clock_event_reasons=0x20, temp_c=90.0, slowdown_temp_c=89.0,
                                    sm_clock_mhz=1400.0, tensor_active_pct=80.0)
                               for t in range(5)]),
        analyze_device_window([_dev(t, ecc_uncorrected=t, xid_errors=(79,) if t == 4 else ())
                               for t in range(5)]),
        analyze_device_window([_dev(0, state="lost")]),
        analyze_device_window([_dev(t, mem_used_bytes=10 * GIB) for t in range(5)]),
    ]


@pytest.fixture(scope="module")
def diagnoses():
    out = []
    for path in ["demo", *sorted(str(p) for p in CORPUS.glob("*/*.jsonl"))]:
        for a in analyze_trace(load_trace(path), window_s=5.0):
            out += list(a.diagnoses)
    for a in _unit_windows():
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
    # every rule's output: the traces' and, for the kinds no recording covers, the unit windows
    assert seen == set(KINDS) - {"unknown"}, set(KINDS) - seen


def test_every_numeric_value_has_its_unit_for_machines(diagnoses):
    # the exporter publishes these as gauges named by their unit
    for d in diagnoses:
        numeric = {k for k, v in d.evidence
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert numeric <= set(UNITS), (d.kind, numeric - set(UNITS))
        assert {k for k, _, _ in evidence_values(d.evidence_dict)} == {
            k for k in numeric if d.evidence_value(k) == d.evidence_value(k)}  # (NaN: none)
    assert evidence_values({"sm_clock_mhz": 1980.0, "time_to_full_s": 1.3, "filling": True,
                            "engine": "vLLM"}) == (("sm_clock_mhz", "hertz", 1.98e9),
                                                   ("time_to_full_s", "seconds", 1.3))


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
        "memory rising at +13.0 GB/s", "full in 1 s at that rate")
    # a countdown as steady as its estimate: the words the headline uses too
    assert [countdown(s) for s in (0.4, 1.3, 9.6, 47.0, 52.6, 600.0)] == [
        "under 1 s", "1 s", "10 s", "45 s", "55 s", "10 min"]
