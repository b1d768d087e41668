"""``analyze`` over runs of samples as columns (``analysis.runs`` + ``analysis.blocks``) gives what
the reading-by-reading stream gives: the same phases, numbers and errors, whatever the blocks'
sizes and wherever unusual lines cut the runs."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from fleet_tui.core.monitor.analysis import runs
from fleet_tui.core.monitor.analysis.blocks import analyze_items, features
from fleet_tui.core.monitor.analysis.phases import PhaseDetector, features_of, host_busy_of
from fleet_tui.core.monitor.analysis.readings import RawReadings, row_keys
from fleet_tui.core.monitor.analysis.stream import analyze_readings
from fleet_tui.core.monitor.source import SourceUnavailable
from tests.core.monitor.analysis.test_analysis_fastread import LINES, _edit, _variants, _write


def _stream(path):
    reader = RawReadings(path)
    out = [json.dumps(a.to_dict(), allow_nan=False)
           for a in analyze_readings(reader, snapshot_of=reader.snapshot_of)]
    return out, reader.repeats


def _blocks(path):
    reader = RawReadings(path)
    out = [json.dumps(a.to_dict(), allow_nan=False)
           for a in analyze_items(runs.read_items(reader), reader.snapshot_of)]
    return out, reader.repeats


def _outcome(fn, path):
    try:
        return fn(path)
    except SourceUnavailable as exc:
        return type(exc).__name__, str(exc)


@pytest.fixture(params=[(256 * 2**10, 64), (6000, 4), (2000, 1)], ids=["256k", "6k", "2k"])
def small_blocks(request, monkeypatch):
    """Blocks of a few lines too, so runs start and end everywhere (phases, unusual lines)."""
    block_bytes, min_run = request.param
    monkeypatch.setattr(runs, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(runs, "MIN_RUN", min_run)


def _more_variants() -> dict[str, list[str]]:
    base = list(LINES)
    gaps = list(base)
    for i in range(200, 260, 3):  # readings missing: those samples take the reading path
        d = json.loads(gaps[i])
        del d["gpm_fp32_util"]
        gaps[i] = json.dumps(d)
    nulls = list(base)
    for i in range(400, 800, 7):
        nulls[i] = _edit(i, gpm_sm_util=None)
    ecc = [x if i < 1000 or i % 50 else _edit(i, ecc_uncorrected=1) for i, x in enumerate(base)]
    return {
        "gaps": gaps, "nulls": nulls, "ecc": ecc,
        "used_float": base[:300] + [_edit(300, mem_used_bytes=1.5e9)] + base[301:],
        "big_int": base[:300] + [_edit(300, pcie_tx_kb_s=2**60)] + base[301:],
        "static_again": base[:1500] + [base[0]] + base[1500:],
        "no_limit": [_edit(0, power_limit_mw=None)] + base[1:600],
        "twice": base + [json.dumps(dict(json.loads(x), t=json.loads(x)["t"] + 1000.0))
                         for x in base[1:]],
    }


@pytest.mark.parametrize("name", sorted(_variants()) + sorted(_more_variants()))
def test_blocks_match_the_stream(tmp_path, small_blocks, name):
    lines = {**_variants(), **_more_variants()}[name]
    path = _write(tmp_path, lines)
    assert _outcome(_blocks, path) == _outcome(_stream, path)


def test_blocks_match_on_a_long_trace(tmp_path, monkeypatch):
    """The bench's trace shape (the labelled trace over and over, time shifted)."""
    monkeypatch.setattr(runs, "BLOCK_BYTES", 50_000)
    samples = [json.loads(x) for x in LINES[1:]]
    span = samples[-1]["t"] + 0.2
    out = [LINES[0]] + [json.dumps(dict(s, t=round(k * span + s["t"], 3)))
                        for k in range(3) for s in samples]
    path = _write(tmp_path, out)
    got = _blocks(path)
    assert got == _stream(path)
    assert len(got[0]) > 60


def test_runs_read_what_the_reader_reads(tmp_path):
    path = _write(tmp_path, LINES)
    want = [r for _, r in RawReadings(path)]
    got = []
    for item in runs.read_items(RawReadings(path)):
        if isinstance(item, runs.Run):
            got += [item.reading(j) for j in range(len(item))]
        else:
            got.append(item[1])
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a.ts, a.row, a.reasons, a.phase, a.host, a.power_limit_w, a.mem_total) == \
            (b.ts, b.row, b.reasons, b.phase, b.host, b.power_limit_w, b.mem_total)


def test_sample_type_holds_every_reading():
    assert set(runs.SAMPLE_READINGS) == set(row_keys())


def test_features_are_features_of(tmp_path):
    path = _write(tmp_path, LINES)
    reader = RawReadings(path)
    run = next(x for x in runs.read_items(reader) if isinstance(x, runs.Run))
    det = PhaseDetector()
    xs, alphas = features(det, run, 0)
    for j in range(len(run)):
        r = run.reading(j)
        want = features_of(r.row, r.power_limit_w, r.mem_total, det.link_for(r.extra),
                           host_busy_of(r.host))
        # a run's samples have no per-core host readings: the host feature is missing, and the
        # rows stop before it (PhaseDetector.step skips it either way)
        assert want[-1] is None and xs[j] == want[:-1]
    # no previous sample: dt = SMOOTH_S, smoothed over 3 dt -> dt / (3 dt + dt)
    assert alphas[0] == 0.25


def test_accumulate_adds_in_order():
    """Span sums are running sums: ``numpy.add.accumulate`` must add row after row like Python
    (``numpy.sum`` adds pairwise, with other last bits)."""
    rng = random.Random(7)
    rows = [[rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-8, 8) for _ in range(16)]
            for _ in range(999)]
    start = [rng.random() for _ in range(16)]
    want = list(start)
    for row in rows:
        want = [a + b for a, b in zip(want, row)]
    got = np.add.accumulate(np.concatenate(((start,), rows)), axis=0)[-1].tolist()
    assert got == want


@pytest.mark.parametrize("name", ["demo", "gaps", "backwards", "repeated", "string"])
def test_cli_without_numpy_prints_the_same(tmp_path, capsys, monkeypatch, small_blocks, name):
    """``analyze`` falls back to the reading-by-reading stream where numpy or msgspec is
    missing: the same bytes, exit code and message."""
    import sys

    from tests.cli_run import run

    lines = {**_variants(), **_more_variants()}[name]
    path = _write(tmp_path, lines)
    with_blocks = run(capsys, "analyze", str(path), "--json")
    monkeypatch.setitem(sys.modules, "fleet_tui.core.monitor.analysis.blocks", None)
    without = run(capsys, "analyze", str(path), "--json")
    assert with_blocks == without
    assert with_blocks[0] in (0, 2)


def test_release_scan_back_is_the_forward_scan():
    """memory_growth finds the last release scanning back from the newest reading; the same
    index as a forward scan of every pair (a - b > 1 % of the device)."""
    from fleet_tui.core.monitor.analysis.rules.memory import _after_release

    rng = random.Random(3)
    total = 141e9
    for _ in range(300):
        n = rng.randint(0, 40)
        mems = [rng.choice([1e9, 2e9, 3e9, 2.5e9, 2.2e9, 1e9 + 0.01 * total]) for _ in range(n)]
        points = [(float(t), m) for t, m in enumerate(mems)]
        forward = 0
        for k in range(n - 1):
            if mems[k] - mems[k + 1] > 0.01 * total:
                forward = k + 1
        assert _after_release(points, total) == forward


def test_memory_growth_with_nan_anywhere_is_growth_without_them():
    """memory_growth checks for NaN/inf only after the last release; a NaN or inf reading
    anywhere still gives what the readings without it give."""
    from fleet_tui.core.monitor.analysis.rules.memory import memory_growth
    from fleet_tui.core.monitor.analysis.window import WindowStats

    rng = random.Random(5)
    total = 141e9
    for _ in range(400):
        n = rng.randint(3, 40)
        mems = [1e9]
        for _ in range(n - 1):
            mems.append(max(0.0, mems[-1] + rng.choice([0.0, 0.0, 2e8, 5e8, -3e9, 3e9])))
        points = [(float(t), m) for t, m in enumerate(mems)]
        bad = list(points)
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(bad))
            bad[k] = (bad[k][0], rng.choice([float("nan"), float("inf"), -float("inf")]))
        clean = [p for p in bad if p[1] - p[1] == 0.0]
        st_bad, st_clean = (WindowStats.__new__(WindowStats), WindowStats.__new__(WindowStats))
        for st, pts in ((st_bad, bad), (st_clean, clean)):
            st.mem_total, st.growth_points, st.engine = total, pts, None
            st.pcie_rx_now = None
        a, b = memory_growth(st_bad), memory_growth(st_clean)
        assert (a is None) == (b is None)
        if a is not None:
            assert (a.confidence, a.facts) == (b.confidence, b.facts)
