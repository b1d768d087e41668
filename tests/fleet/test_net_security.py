"""Credentials never shown and never sent to another origin; a timeout bounds the whole operation
(real hostile servers on 127.0.0.1)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from fleet_tui.cli import main
from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from fleet_tui.core.redact import redact, redact_url
from tests.fleet.hostile import RawServer, http_server
from tests.fleet.promserver import free_port
from tests.fleet.test_faults import GOOD

SECRET = "s3cretpw"


def test_redact_url_and_text():
    assert redact_url(f"http://alice:{SECRET}@prom:9090/x") == "http://prom:9090/x"
    assert redact_url(f"https://prom/api?access_token={SECRET}&q=up") == \
        "https://prom/api?access_token=***&q=up"
    text = f"--source 'prometheus:http://bob:{SECRET}@10.0.0.1:9090': unreachable"
    assert SECRET not in redact(text) and "10.0.0.1:9090" in redact(text)
    assert redact("no url here") == "no url here"


@pytest.mark.parametrize("argv", [
    ["fleet", "--window", "0", "--timeout", "1"],
    ["monitor", "--once"],
    ["record", "--duration", "0.3", "--interval", "0.1"],
])
def test_no_command_prints_credentials(argv, capsys, tmp_path):
    spec = f"prometheus:http://alice:{SECRET}@127.0.0.1:{free_port()}/?token={SECRET}"
    if argv[0] == "record":
        argv = [*argv, "--db", str(tmp_path / "h.db")]
    main([*argv, "--source", spec])
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    assert "127.0.0.1" in out.out + out.err  # still says where
    if argv[0] == "record":
        with sqlite3.connect(tmp_path / "h.db") as db:
            dump = "\n".join(db.iterdump())
        assert SECRET not in dump


def test_export_serving_line_hides_credentials():
    spec = f"prometheus:http://alice:{SECRET}@127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "fleet_tui", "export", "--prometheus",
                             "--port", "0", "--source", spec],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()
    assert "serving metrics" in line and "127.0.0.1" in line and SECRET not in line


def test_status_line_hides_credentials():
    from fleet_tui.ui.state import CatalogStatus, SourceStatus
    from fleet_tui.ui.widgets.chrome import render_status

    status = SourceStatus(kind="fleet", spec=f"prometheus:http://u:{SECRET}@prom:9090",
                          interval_s=1.0)
    assert SECRET not in render_status(status, CatalogStatus())


@pytest.mark.parametrize("code", [302, 307, 308])
def test_authorization_is_never_sent_to_another_origin(code):
    elsewhere, elsewhere_url = http_server(lambda h: (200, {}, GOOD))
    # same host, another port: another origin
    origin, origin_url = http_server(
        lambda h: (code, {"Location": elsewhere_url + "/api/v1/query"}, b""))
    try:
        src = PrometheusSource(origin_url, env={"FLEET_TUI_PROM_TOKEN": SECRET}, timeout_s=5)
        snap = src.sample_blocking()
    finally:
        origin.shutdown()
        elsewhere.shutdown()
    assert origin.seen and origin.seen[0][2] == f"Bearer {SECRET}"
    assert elsewhere.seen, "the redirect was followed"
    assert all(auth is None for _, _, auth in elsewhere.seen), elsewhere.seen
    assert snap.devices and snap.devices[0].gpu_util_pct == 42


def test_same_origin_redirect_keeps_credentials():
    def answer(h):
        if h.path.startswith("/old"):
            return 307, {"Location": "/api/v1/query"}, b""
        return 200, {}, GOOD

    server, url = http_server(answer)
    try:
        src = PrometheusSource(url + "/old", env={}, basic_auth=("alice", SECRET), timeout_s=5)
        src.client._base = url + "/old"  # every request starts under /old and is redirected
        snap = src.sample_blocking()
    finally:
        server.shutdown()
    assert snap.devices
    assert all(auth and auth.startswith("Basic ") for _, _, auth in server.seen)


@pytest.mark.parametrize("argv", [["fleet", "--timeout", "2"], ["monitor", "--once"]])
def test_a_trickling_server_cannot_hang_a_command(argv):
    """Status line, then one header byte a second: the command still ends (before: minutes)."""
    server = RawServer("trickle")
    try:
        proc = subprocess.run([sys.executable, "-m", "fleet_tui", *argv, "--source",
                               f"prometheus:{server.url}"], capture_output=True, text=True,
                              timeout=60)
    finally:
        server.close()
    assert proc.returncode == 2, proc.stderr
    assert "timed out" in proc.stderr


def test_one_deadline_for_every_request_of_fleet(capsys):
    """A server that never answers: `fleet --timeout 2` spends its 2 s on the first request and
    asks nothing more (before: three requests of 2 s each)."""
    server = RawServer("silent")
    try:
        assert main(["fleet", "--timeout", "1", "--source", f"prometheus:{server.url}"]) == 2
    finally:
        server.close()
    assert "timed out" in capsys.readouterr().err
    assert server.connections == 1


def test_monitor_once_and_fleet_give_the_same_answer_for_a_dead_prometheus(capsys):
    spec = f"prometheus:http://127.0.0.1:{free_port()}"
    assert main(["fleet", "--window", "0", "--source", spec]) == 2
    fleet_err = capsys.readouterr().err
    assert main(["monitor", "--once", "--source", spec]) == 2  # before: 0, "retrying in 1 s"
    monitor_err = capsys.readouterr().err
    assert "unreachable" in fleet_err and "retrying" not in monitor_err
    assert monitor_err == fleet_err


@pytest.mark.parametrize("spec", ["dead-prometheus", "auto"])
def test_monitor_alerts_without_a_device_says_so_and_exits(spec):
    """Before: printed nothing and never exited."""
    if spec == "dead-prometheus":
        spec = f"prometheus:http://127.0.0.1:{free_port()}"
    proc = subprocess.run([sys.executable, "-m", "fleet_tui", "monitor", "--alerts", "--source",
                           spec], capture_output=True, text=True, timeout=60)
    if proc.returncode == 0 and spec == "auto":
        pytest.skip("this machine has an accelerator")
    assert proc.returncode == 2 and "--alerts has no device to watch" in proc.stderr
    assert proc.stdout == ""
