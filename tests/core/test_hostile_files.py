"""Input files read bounded and regular-only, outputs replaced with their mode kept, every size
from input bounded, a damaged history refused, user mistakes as exit 2 and bugs as a traceback
with a way to report them."""

from __future__ import annotations

import io
import os
import sqlite3
import stat
import threading
import time

import pytest

from fleet_tui.cli import main
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.fsutil import (
    InputFileError,
    iter_line_blocks,
    iter_lines_capped,
    read_bytes_capped,
    read_text_capped,
    write_atomic,
)
from fleet_tui.core.limits import BOUNDS, check_count, check_time
from tests.paths import REPO


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done: list[BaseException] = []

    def read() -> None:
        try:
            read_text_capped(fifo, "demand profile")
        except InputFileError as exc:
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)  # a blocking open would wait for a writer for ever
    assert done and "not a regular file" in str(done[0]) and str(fifo) in str(done[0])


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_devices_are_refused(path):
    with pytest.raises(InputFileError, match="not a regular file"):
        read_bytes_capped(path, "job list")


def test_a_file_over_the_cap_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"1\n" * 5000)
    assert read_bytes_capped(big, max_bytes=10_000) == b"1\n" * 5000
    with pytest.raises(InputFileError, match="over the bound of 9,999 bytes"):
        read_bytes_capped(big, max_bytes=9_999)


def test_binary_and_odd_paths_name_the_path_and_cause(tmp_path):
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"ok\n\xff\xfe")
    with pytest.raises(InputFileError, match=r"x.bin:2: not UTF-8"):
        read_text_capped(binary, "demand profile")
    with pytest.raises(InputFileError, match="is a directory"):
        read_text_capped(tmp_path)
    with pytest.raises(InputFileError, match="empty path"):
        read_text_capped("")
    with pytest.raises(InputFileError, match="over 255 bytes"):
        read_text_capped(tmp_path / ("n" * 300))
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(InputFileError, match="symbolic links"):
        read_text_capped(loop)


def test_line_reads_stop_at_the_bound():
    data = b"".join(b"line %d\n" % i for i in range(500)) + b"tail"
    blocks = list(iter_line_blocks(io.BytesIO(data), "t.jsonl", 64))
    assert [line for block in blocks for line in block] == data.split(b"\n")
    huge = b"a\nb\n" + b"x" * 5000 + b"\nc\n"
    with pytest.raises(InputFileError, match=r"^t.jsonl:3: a line over the bound of 1,000"):
        list(iter_line_blocks(io.BytesIO(huge), "t.jsonl", 64, max_line_bytes=1000))
    with pytest.raises(InputFileError, match=r"^t.jsonl:3: a line over"):
        list(iter_lines_capped(io.BytesIO(huge), "t.jsonl", max_line_bytes=1000))
    assert [n for n, _ in iter_lines_capped(io.BytesIO(b"a\nb\nc"), "t")] == [1, 2, 3]


def test_a_replaced_file_keeps_its_mode(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("old")
    os.chmod(report, 0o600)
    write_atomic(report, "new")
    assert report.read_text() == "new"
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.md"
    old_umask = os.umask(0o022)
    try:
        write_atomic(fresh, "x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_bounds_name_the_value_the_place_and_the_bound():
    with pytest.raises(UserError, match=r"^d.txt:2: device count 1e\+09 is over the bound of "
                                        r"1e\+06 devices"):
        check_count(1e9, "devices", "d.txt:2", "device count")
    with pytest.raises(UserError, match="finite"):
        check_time(float("nan"), "j.json:3", "time.start")
    with pytest.raises(UserError, match="outside"):
        check_time(1.7e18, "t.jsonl:1", "t")
    assert check_time(1.7e9, "t.jsonl:1", "t") == 1.7e9
    assert all(b.limit > 0 and b.why for b in BOUNDS.values())


def test_the_docs_list_every_bound():

    doc = (REPO / "docs" / "hostile-input.md").read_text()
    for bound in BOUNDS.values():
        assert f"`{bound.name}`" in doc, bound.name


@pytest.mark.parametrize("text", ["1\n1e9\n", "1\n1e308\n", '{"demand": [1, 1e9]}',
                                  "hour,devices\n1,1e9\n"])
def test_one_huge_demand_value_is_refused_before_any_allocation(text, tmp_path, capsys):
    demand = tmp_path / "d.txt"
    demand.write_text(text)
    assert main(["plan", "--demand", str(demand), "--on-demand-price", "10"]) == 2
    err = capsys.readouterr().err
    assert str(demand) in err and "bound" in err or "finite" in err


def test_a_large_fleet_plans_in_linear_time(tmp_path, capsys):
    demand = tmp_path / "d.txt"
    demand.write_text("\n".join(str(50_000 + (h % 24) * 1000) for h in range(24 * 365)))
    assert main(["plan", "--demand", str(demand), "--on-demand-price", "10",
                 "--reserved-1y-price", "6", "--json"]) == 0
    assert '"peak_devices": 73000' in capsys.readouterr().out


def test_instance_activity_matches_the_definition():
    from fleet_tui.core.cluster.portfolio import (
        device_utilization,
        instance_activity,
        reserved_device_utilization,
    )

    demand = [0, 3, 8, 8.5, 16, 1, 0, 24]
    for n in (1, 4, 8):
        peak = -(-max(demand) // n)
        assert instance_activity(demand, n) == [
            sum(1 for d in demand if d > k * n) / len(demand) for k in range(int(peak))]
        for k in range(1, int(peak) + 1):
            assert reserved_device_utilization(demand, n, k) == pytest.approx(
                sum(device_utilization(demand, n, i) for i in range(k)) / k)


def _corrupt(db) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as fh:
        for page in range(2, pages):
            fh.seek(page * size + 8)
            fh.write(b"\x7f\x13" * 50)


def test_record_refuses_a_damaged_history(tmp_path, capsys):
    db = tmp_path / "h.db"
    argv = ["record", "--db", str(db), "--source", "sim:2", "--interval", "0.05",
            "--duration", "0.5"]
    assert main(argv) == 0
    _corrupt(db)
    before = db.read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "quick_check" in err and "Traceback" not in err
    assert db.read_bytes() == before  # nothing appended


def test_user_mistakes_exit_2_and_a_bug_prints_how_to_report(tmp_path, capsys, monkeypatch):
    unreadable = tmp_path / "d.txt"
    unreadable.write_text("1\n")
    os.chmod(unreadable, 0)
    if os.access(unreadable, os.R_OK):  # root reads anything: use a name the OS refuses instead
        unreadable = tmp_path / ("x" * 300)
    assert main(["plan", "--demand", str(unreadable), "--on-demand-price", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "fleet-tui: error:" in err

    from fleet_tui.commands import plan

    def broken(args):
        raise AttributeError("a real bug: token=Hunter2Secret")

    monkeypatch.setattr(plan, "_cmd_plan", broken)
    from fleet_tui import cli

    parser = cli.build_parser(["plan"])
    args = parser.parse_args(["plan", "--demand", "x", "--on-demand-price", "1"])
    code = cli._dispatch(parser, None, broken, args)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" in err and "please report it" in err


def test_a_lone_brace_in_a_message_is_text():
    exc = FieldError("policy", "{policy} '{0}%s}{' is not a policy")
    assert exc.render(lambda f: "--" + f) == "--policy '{0}%s}{' is not a policy"


@pytest.mark.parametrize("signame, status", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_record_exits_128_plus_the_signal_with_its_rows_kept(signame, status, tmp_path):
    import signal
    import subprocess
    import sys

    db = tmp_path / "h.db"
    proc = subprocess.Popen([sys.executable, "-m", "fleet_tui", "record", "--db", str(db),
                             "--source", "sim:2", "--interval", "0.05"],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        assert "recording" in proc.stderr.readline()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if db.exists():
                with sqlite3.connect(db) as conn:
                    try:
                        if conn.execute("SELECT count(*) FROM samples").fetchone()[0]:
                            break
                    except sqlite3.OperationalError:
                        pass
            time.sleep(0.1)
        proc.send_signal(getattr(signal, signame))
        assert proc.wait(timeout=20) == status
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] > 0


def test_jobs_passes_its_timeout_to_the_source(monkeypatch, capsys):
    from fleet_tui.core.monitor import sources
    from fleet_tui.core.monitor.sources.prometheus import PrometheusSource

    made: list[PrometheusSource] = []
    real = sources.open_source

    def spy(spec: str, **opts):
        made.append(real(spec, **opts))
        raise UserError("stop here")

    monkeypatch.setattr(sources, "open_source", spy)
    assert main(["jobs", "--source", "prometheus:http://127.0.0.1:9", "--timeout", "2.5"]) == 2
    assert made and made[0].timeout_s == 2.5  # it was always 5 s
    with pytest.raises(SystemExit) as refused:  # argparse: exit 2 with the flag named
        main(["jobs", "--source", "prometheus:http://127.0.0.1:9", "--timeout", "5000"])
    assert refused.value.code == 2 and "at most 3,600 seconds" in capsys.readouterr().err
