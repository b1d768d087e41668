"""Malformed and odd traces: never a traceback, never confident nonsense.
Hand-made (synthetic) files: unit tests of the reader, not accuracy claims."""

from __future__ import annotations

import asyncio
import json

import pytest

from fleet_tui.cli import main
from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.analysis.stream import analyze_stream
from fleet_tui.core.monitor.sources.replay import ReplaySource
from fleet_tui.core.monitor.trace import TraceOrderError, TraceReader, load_sorted, load_trace

STATIC = {"kind": "static", "name": "NVIDIA H200", "uuid": "GPU-x",
          "memory_total_bytes": 150754820096, "power_limit_mw": 700000}


def _sample(t_s, **kw):
    s = {"kind": "sample", "t": t_s, "gpu_util": 0, "mem_util": 0, "mem_used_bytes": 2**30,
         "power_mw": 80000, "gpm_sm_util": 0.0, "gpm_any_tensor_util": 0.0,
         "gpm_dram_bw_util": 0.0, "gpm_fp32_util": 0.0, "procs": []}
    s.update(kw)
    return s


def _write(path, samples, raw_lines=()):
    lines = [json.dumps(STATIC)] + [json.dumps(s) for s in samples] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_nan_and_inf_readings_are_missing_values_never_a_diagnosis(tmp_path):
    lines = [json.dumps(STATIC)] + [
        '{"kind": "sample", "t": %.1f, "gpu_util": NaN, "mem_used_bytes": NaN, '
        '"power_mw": Infinity, "gpm_sm_util": NaN, "procs": []}' % (t / 5) for t in range(50)]
    p = tmp_path / "nan.jsonl"
    p.write_text("\n".join(lines) + "\n")
    snaps = load_trace(p)
    d = snaps[0].devices[0]
    assert d.gpu_util_pct is None and d.mem_used_bytes is None and d.power_w is None
    for a in analyze_stream(snaps):
        assert a.primary == "unknown"
        assert not a.get("memory_capacity_pressure") and not a.get("memory_growth")
    assert main(["analyze", str(p), "--json"]) == 0


@pytest.mark.parametrize("field, value, expected", [
    ("gpu_util", "high", "gpu_util: expected a number"),
    ("mem_used_bytes", [1], "mem_used_bytes: expected a number"),
    ("procs", [1, "x"], "procs: expected a list of objects"),
    ("procs", "x", "procs: expected a list of objects"),
    ("t", "soon", "t: expected a number"),
])
def test_wrong_types_name_file_line_and_field(tmp_path, capsys, field, value, expected):
    p = _write(tmp_path / "bad.jsonl", [_sample(0.0), _sample(0.2, **{field: value})])
    with pytest.raises(UserError, match=f"bad.jsonl:3: {expected}"):
        load_trace(p)
    assert main(["analyze", str(p)]) == 2
    assert f"bad.jsonl:3: {expected}" in capsys.readouterr().err


def test_recording_with_wrong_shapes_is_a_user_error(tmp_path, capsys):
    p = tmp_path / "rec.jsonl"
    p.write_text('{"kind": "fleet-tui-recording"}\n{"timestamp": 1.0, "devices": "x"}\n')
    assert main(["analyze", str(p)]) == 2
    assert "rec.jsonl:2: devices: expected a list of objects" in capsys.readouterr().err
    p.write_text('{"kind": "fleet-tui-recording"}\n'
                 '{"timestamp": 1.0, "devices": [{"index": 0, "name": "g", "power_w": "x"}]}\n')
    assert main(["analyze", str(p)]) == 2
    assert "rec.jsonl:2: power_w: expected a number" in capsys.readouterr().err


def test_deeply_nested_line_is_named_not_a_traceback(tmp_path, capsys):
    p = _write(tmp_path / "deep.jsonl", [_sample(0.0)], ["[" * 100_000 + "]" * 100_000])
    assert main(["analyze", str(p)]) == 2
    assert "deep.jsonl:3: JSON nested too deeply" in capsys.readouterr().err


def test_shuffled_timestamps_are_sorted_with_a_note_never_silently_empty(tmp_path, capsys):
    samples = [_sample(t / 5) for t in range(50)]
    shuffled = samples[25:] + samples[:25] + [samples[3]]  # and one repeated timestamp
    p = _write(tmp_path / "shuffled.jsonl", shuffled)
    with pytest.raises(TraceOrderError, match="shuffled.jsonl:27"):
        list(TraceReader(p))
    fixed = load_sorted(p)
    assert [s.timestamp for s in fixed.snapshots] == [s["t"] for s in samples]
    assert fixed.repeats == 1
    assert main(["analyze", str(p), "--json"]) == 0
    out = capsys.readouterr()
    assert "sorted" in out.err and json.loads(out.out)[0]["primary"] == "idle"
    # too big to sort in memory: rejected with file:line
    with pytest.raises(UserError, match="shuffled.jsonl:27.*sort it by timestamp"):
        load_sorted(p, max_bytes=100)


def test_repeated_timestamps_are_skipped_and_counted(tmp_path, capsys):
    samples = [_sample(t / 5) for t in range(20)]
    p = _write(tmp_path / "rep.jsonl", samples[:10] + [samples[9]] + samples[10:])
    r = TraceReader(p)
    assert len(list(r)) == 20 and r.repeats == 1
    assert main(["analyze", str(p)]) == 0
    assert "1 sample(s) with a repeated timestamp skipped" in capsys.readouterr().err


def test_replay_of_a_file_that_breaks_midway_raises_a_clear_error(tmp_path):
    p = _write(tmp_path / "mid.jsonl", [_sample(0.0), _sample(0.2), _sample(0.4, gpu_util="x")])
    now = [0.0]
    src = ReplaySource(p, speed=1.0, clock=lambda: now[0])

    async def run():
        await src.open()
        await src.sample()
        now[0] = 1.0
        await src.sample()

    with pytest.raises(UserError, match="mid.jsonl:4: gpu_util: expected a number"):
        asyncio.run(run())


def test_a_trace_without_samples_is_an_error_not_an_empty_success(tmp_path, capsys):
    p = _write(tmp_path / "empty.jsonl", [])
    assert main(["analyze", str(p)]) == 2
    assert "no samples" in capsys.readouterr().err
    p = _write(tmp_path / "static.jsonl", [_sample(0.0)])
    p.write_text('{"kind": "static", "memory_total_bytes": "lots"}\n')
    assert main(["analyze", str(p)]) == 2
    assert "static.jsonl:1: memory_total_bytes: expected a number" in capsys.readouterr().err
