"""Files are replaced whole or not at all: an error half-way leaves the old file and no litter."""

from __future__ import annotations

import pytest

from fleet_tui.core.fsutil import atomic_writer, write_atomic
from fleet_tui.core.monitor.trace import load_trace, write_recording


def test_write_atomic_replaces_and_sets_mode(tmp_path):
    target = tmp_path / "sub" / "out.toml"
    write_atomic(target, "a = 1\n")
    write_atomic(target, "a = 2\n", mode=0o600)
    assert target.read_text() == "a = 2\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["out.toml"]


def test_an_error_half_way_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write("half a new fi")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_recording_that_fails_mid_stream_is_not_left_behind(tmp_path):
    good = load_trace("demo")[:3]

    def snapshots():
        yield from good
        raise OSError("source went away")

    with pytest.raises(OSError):
        write_recording(tmp_path / "rec.jsonl", snapshots())
    assert list(tmp_path.iterdir()) == []
    path = write_recording(tmp_path / "rec.jsonl", good)
    assert len(load_trace(path)) == 3
