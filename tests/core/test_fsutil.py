"""Files are replaced whole or not at all: an error half-way leaves the old file and no litter."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture
def umask():
    def set_umask(value: int) -> None:
        os.umask(value)

    old = os.umask(0o022)
    os.umask(old)
    yield set_umask
    os.umask(old)


@pytest.mark.parametrize("mask, expect", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_a_written_file_gets_the_mode_the_umask_says(tmp_path, umask, mask, expect):
    umask(mask)
    target = tmp_path / "report.md"
    write_atomic(target, "# r\n")
    assert target.stat().st_mode & 0o777 == expect, oct(target.stat().st_mode & 0o777)


def test_the_temp_file_and_the_directory_are_synced_before_and_after_the_rename(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        target = os.readlink(f"/proc/self/fd/{fd}")
        events.append("fsync dir" if os.path.isdir(target) else f"fsync {Path(target).name[:5]}")
        real_fsync(fd)

    def replace(src, dst):
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "out.md", "x")
    assert events == ["fsync .out.", "rename", "fsync dir"], events


def test_replace_false_refuses_an_existing_file_and_leaves_it_alone(tmp_path):
    target = tmp_path / "out.md"
    target.write_text("mine\n")
    with pytest.raises(FileExistsError) as exc:
        write_atomic(target, "theirs\n", replace=False)
    assert exc.value.filename == str(target)
    assert target.read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]
    write_atomic(tmp_path / "new.md", "fresh\n", replace=False)
    assert (tmp_path / "new.md").read_text() == "fresh\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.md", "out.md"]


def test_a_file_that_appears_while_writing_is_not_clobbered(tmp_path):
    target = tmp_path / "out.md"
    with pytest.raises(FileExistsError), atomic_writer(target, replace=False) as handle:
        handle.write("theirs\n")
        target.write_text("mine\n")  # another program got there first
    assert target.read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]
