"""The raw capture read into plain readings (``analysis.readings``) gives what the snapshot path
gives: the same ``analyze --json`` output and the same errors with ``file:line``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_tui.core.monitor.analysis.readings import RawReadings
from fleet_tui.core.monitor.analysis.stream import analyze_readings, analyze_stream
from fleet_tui.core.monitor.source import SourceUnavailable
from fleet_tui.core.monitor.trace import DEMO_TRACE, TraceReader

LINES = DEMO_TRACE.read_text().splitlines()


def _object_path(path, window_s):
    reader = TraceReader(path)
    out = [json.dumps(a.to_dict(), allow_nan=False)
           for a in analyze_stream(reader, window_s=window_s)]
    return out, reader.repeats


def _fast_path(path, window_s):
    reader = RawReadings(path)
    out = [json.dumps(a.to_dict(), allow_nan=False)
           for a in analyze_readings(reader, window_s=window_s, snapshot_of=reader.snapshot_of)]
    return out, reader.repeats


def _outcome(fn, path, window_s):
    try:
        return fn(path, window_s)
    except SourceUnavailable as exc:
        return type(exc).__name__, str(exc)


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _edit(i: int, **changes) -> str:
    d = json.loads(LINES[i])
    d.update(changes)
    return json.dumps(d)


def _variants() -> dict[str, list[str]]:
    base = list(LINES)
    nan = list(base)
    nan[50] = nan[50].replace('"gpu_util": ', '"gpu_util": NaN, "x": ')
    nan[51] = nan[51].replace('"power_mw": ', '"power_mw": Infinity, "y": ')
    repeated = base[:100] + [base[99]] + base[100:]
    backwards = base[:100] + [base[120]] + base[100:]
    return {
        "demo": base,
        "nan": nan,
        "repeated": repeated,
        "backwards": backwards,
        "string": base[:30] + [_edit(30, gpu_util="x")] + base[31:],
        "bool": base[:30] + [_edit(30, mem_used_bytes=True)] + base[31:],
        "procs": base[:30] + [_edit(30, procs=[1, "x"])] + base[31:],
        "procs_ok": base[:30] + [_edit(30, procs=[{"pid": 7, "used_bytes": 2.0e9}])] + base[31:],
        "phase": base[:30] + [_edit(30, phase=3)] + base[31:],
        "no_t": base[:30] + [_edit(30, t=None)] + base[31:],
        "cores": base[:30] + [_edit(30, host_cpu_per_core_pct=[100.0, 5.0])] + base[31:],
        "cores_bad": base[:30] + [_edit(30, host_cpu_per_core_pct="x")] + base[31:],
        "missing_key": base[:30] + [json.dumps({k: v for k, v in json.loads(base[30]).items()
                                               if k != "gpm_sm_util"})] + base[31:],
        "not_json": base[:30] + ["{not json"] + base[31:],
        "deep": base[:30] + ["[" * 100_000 + "]" * 100_000] + base[31:],
        "not_object": base[:30] + ["[1, 2]"] + base[31:],
        "bad_utf8_blank": base[:30] + ["", "   "] + base[31:],
        "no_static": base[1:],
        "static_bad": [_edit(0, memory_total_bytes="x")] + base[1:],
        "other_kind": base[:30] + ['{"kind": "note", "text": "hi"}'] + base[31:],
    }


@pytest.mark.parametrize("name", sorted(_variants()))
@pytest.mark.parametrize("window_s", [None, 5.0])
def test_fast_reader_matches_object_path(tmp_path, name, window_s):
    path = _write(tmp_path, _variants()[name])
    assert _outcome(_fast_path, path, window_s) == _outcome(_object_path, path, window_s)


def test_fast_reader_bad_bytes(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes("\n".join(LINES[:20]).encode() + b"\n\xff\xfe\n"
                  + "\n".join(LINES[20:]).encode())
    assert _outcome(_fast_path, p, None) == _outcome(_object_path, p, None)
    assert ":21:" in _outcome(_fast_path, p, None)[1]


def test_fast_reader_errors_name_the_line(tmp_path):
    path = _write(tmp_path, _variants()["string"])
    kind, msg = _outcome(_fast_path, path, None)
    assert msg.endswith(":31: gpu_util: expected a number")  # LINES[30] is line 31


def test_fast_reader_reads_recordings_through_snapshots(tmp_path):
    from fleet_tui.core.monitor.trace import load_trace, write_recording

    p = write_recording(tmp_path / "rec.jsonl", load_trace("demo")[:200])
    assert _outcome(_fast_path, p, None) == _outcome(_object_path, p, None)
    assert _fast_path(p, None)[0]


@pytest.mark.parametrize("obj", [
    {"a": [1, 2.5, {"x": None, "y": True, "z": False}], "b": {}, "c": [], "d": "é\"\n\u2265",
     "e": (1,), "f": 1e16, "g": -0.0, "h": {1: 2}, "i": [[[]]], "j": [{}], "k": 2 ** 70},
    [], {}, "x", 3, 0.1, None])
@pytest.mark.parametrize("pad", ["", "  "])
def test_indented_json_is_json_dumps(obj, pad):
    from fleet_tui.commands._analyze import indented_json

    assert indented_json(obj, pad) == json.dumps(obj, indent=2, allow_nan=False).replace(
        "\n", "\n" + pad)


def test_indented_json_of_every_demo_phase():
    from fleet_tui.commands._analyze import indented_json

    for a in analyze_stream(TraceReader(DEMO_TRACE)):
        d = a.to_dict()
        assert indented_json(d, "  ") == json.dumps(d, indent=2, allow_nan=False).replace(
            "\n", "\n  ")


def test_indented_json_rejects_nan_like_json():
    from fleet_tui.commands._analyze import indented_json

    with pytest.raises(ValueError, match="not JSON compliant"):
        indented_json({"a": [float("nan")]})


def test_facts_of_a_line_are_its_snapshots(tmp_path):
    """What a phase reads of its newest sample (``DeviceFacts``, built from the line read here)
    equals the facts of the ``DeviceSnapshot`` the object path builds, for a line with
    processes, with NVML extras missing, and from a run (the line kept as bytes)."""
    from fleet_tui.core.monitor.analysis.runs import read_items
    from fleet_tui.core.monitor.analysis.window import DeviceFacts

    lines = LINES[:40] + [
        _edit(40, procs=[{"pid": 7, "used_bytes": 2.0e9}, {"pid": 8}]),
        _edit(41, pcie_rx_kb_s=None, host_mem_pct=3),
        _edit(42, procs=[{"pid": 9, "used_bytes": None}], gpm_graphics_util=1.5)] + LINES[43:400]
    path = _write(tmp_path, lines)
    snaps = [s.devices[0] for s in TraceReader(path)]
    reader = RawReadings(path)
    got = [reader.snapshot_of(r) for _, r in reader]
    assert got == [DeviceFacts.of(d) for d in snaps]
    assert got[39].processes and got[40].extra != got[39].extra  # (line 0 is the static line)
    items = list(read_items(reader))
    from_runs = [reader.snapshot_of(run.reading(j)) for run in items if not isinstance(run, tuple)
                 for j in range(len(run))]
    assert from_runs and set(from_runs) <= set(got)


def _analysis_cases():
    from dataclasses import replace

    from fleet_tui.core.monitor.analysis.diagnosis import Diagnosis

    found = list(analyze_stream(TraceReader(DEMO_TRACE)))
    found += list(analyze_stream(TraceReader(DEMO_TRACE), window_s=5.0))
    a = found[0]
    d = Diagnosis("x", 0.51234, (("a", 1.5), ("b", None), ("c", "é"), ("d", True), ("e", 3)),
                  "why \u2265", "act", "warning", "risk")
    odd = [replace(a, diagnoses=()), replace(a, phase=None, diagnoses=(d, d)),
           replace(a, diagnoses=(replace(d, evidence=()),), missing_signals=("sm", "tensor")),
           replace(a, diagnoses=(replace(d, evidence=(("a", [1, 2]),)),)),
           replace(a, diagnoses=(replace(d, evidence=((1, 2.0),)),)),
           replace(a, diagnoses=(replace(d, evidence=(("a", 1.0), ("a", 2.0))),)),
           replace(a, start=1e16, end=-0.0)]
    return found + odd


def test_analysis_json_is_indented_json_of_to_dict():
    from fleet_tui.commands._analyze import analysis_json, indented_json

    for w in _analysis_cases():
        for pad in ("", "  "):
            assert analysis_json(w, pad) == indented_json(w.to_dict(), pad)


@pytest.mark.parametrize("bad", ["confidence", "evidence", "start"])
def test_analysis_json_rejects_nan_like_json(bad):
    from dataclasses import replace

    from fleet_tui.commands._analyze import analysis_json
    from fleet_tui.core.monitor.analysis.diagnosis import Diagnosis

    a = _analysis_cases()[0]
    d = Diagnosis("x", float("nan") if bad == "confidence" else 0.5,
                  (("a", float("nan") if bad == "evidence" else 1.0),), "e", "a")
    w = replace(a, diagnoses=(d,), start=float("nan") if bad == "start" else a.start)
    with pytest.raises(ValueError, match="not JSON compliant"):
        analysis_json(w, "  ")
