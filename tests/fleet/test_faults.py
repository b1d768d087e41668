"""Faults: Prometheus stopped and restarted, a node's exporter dying, garbage, errors and slow answers.
The source must report each one, keep the last good data with its age, never raise, never block
the event loop, and recover."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
from tests.fleet.promserver import wait_until

GOOD = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-x",
                "Hostname": "fake-node", "instance": "10.9.9.9:9400"}, "value": [1.0, "42"]},
    {"metric": {"__name__": "up", "instance": "10.9.9.9:9400", "job": "dcgm"},
     "value": [1.0, "1"]},
]}}).encode()

STATIC = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "DCGM_FI_DEV_MAX_SM_CLOCK", "gpu": "0", "UUID": "GPU-x",
                "Hostname": "fake-node", "instance": "10.9.9.9:9400", "modelName": "NVIDIA H100"},
     "value": [1.0, "1980"]},
]}}).encode()


class FakePrometheus:
    """A tiny HTTP server on 127.0.0.1 whose /api/v1/query answers per ``mode``."""

    def __init__(self, tls: "ssl.SSLContext | None" = None):
        self.mode = "ok"
        self.token: str | None = None
        self.requests = 0
        self.static_requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                fake.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length) if length else b""
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._send(401, b'{"status":"error","error":"unauthorized"}')
                mode = fake.mode
                if mode == "ok" and b"modelName" in form:  # the static-facts query
                    fake.static_requests += 1
                    return self._send(200, STATIC)
                if mode == "ok":
                    return self._send(200, GOOD)
                if mode == "garbage":
                    return self._send(200, b"\x00\xffnot json at all <html>")
                if mode == "wrong-shape":
                    return self._send(200, b'{"status": "success", "data": {"resultType": '
                                           b'"vector", "result": [{"metric": 3}, 7]}}')
                if mode == "error":
                    return self._send(503, b'{"status":"error","errorType":"unavailable",'
                                           b'"error":"too many queries"}')
                if mode == "slow":
                    time.sleep(3.0)
                    return self._send(200, GOOD)
                if mode == "trickle":  # bytes keep coming, each within the socket timeout
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(GOOD)))
                    self.end_headers()
                    for i in range(0, len(GOOD), 8):
                        self.wfile.write(GOOD[i:i + 8])
                        self.wfile.flush()
                        time.sleep(0.2)
                    return None
                raise AssertionError(mode)

            def _send(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakePrometheus()
    try:
        yield server
    finally:
        server.close()


def fast_source(url, **kw):
    kw.setdefault("timeout_s", 0.5)
    return PrometheusSource(url, env={}, min_backoff_s=0.3, max_backoff_s=0.6, **kw)


def recover(src, what="recovery"):
    return wait_until(lambda: (s := src.sample_blocking()) and not s.errors and s, 10, 0.05, what)


@pytest.mark.parametrize("mode, fragment", [
    ("garbage", "not JSON"),
    ("wrong-shape", None),
    ("error", "HTTP 503"),
    ("slow", "timed out"),
    ("trickle", "no complete answer"),
])
def test_bad_answers_are_reported_last_data_kept_and_recovered(fake, mode, fragment):
    src = fast_source(fake.url)
    good = src.sample_blocking()
    assert not good.errors and good.devices[0].gpu_util_pct == 42
    fake.mode = mode
    bad = src.sample_blocking()
    if mode == "wrong-shape":  # junk entries are skipped; the answer is valid but empty
        assert bad.devices and bad.devices[0].gpu_util_pct == 42  # kept from before
    else:
        assert bad.errors and fragment in bad.errors[0], bad.errors
        assert "retrying in" in bad.errors[0]
        (kept,) = bad.devices
        assert kept.gpu_util_pct == 42 and kept.node == "fake-node" and kept.age_s is not None
        # while backing off, samples answer from memory without asking the server
        asked = fake.requests
        again = src.sample_blocking()
        assert again.errors and fake.requests == asked
    fake.mode = "ok"
    fresh = recover(src)
    assert fresh.devices[0].state == "ok" and fresh.devices[0].gpu_util_pct == 42


def test_backoff_doubles_up_to_the_cap(fake):
    src = PrometheusSource(fake.url, env={}, timeout_s=0.5, min_backoff_s=1, max_backoff_s=4)
    fake.mode = "garbage"
    clock = [1000.0]
    src._clock = lambda: clock[0]
    delays = []
    for _ in range(5):
        src.sample_blocking()
        delays.append(src._next_try - clock[0])
        clock[0] = src._next_try  # come back exactly when allowed
    assert delays == [1, 2, 4, 4, 4]


def test_slow_server_never_blocks_the_event_loop(fake):
    fake.mode = "slow"
    src = fast_source(fake.url, timeout_s=1.0)

    async def run():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        snap = await src.sample()
        done.set()
        await task
        return snap, ticks

    snap, ticks = asyncio.run(run())
    assert snap.errors and "timed out" in snap.errors[0]
    assert ticks > 5  # the loop kept running while the query waited


def test_credentials_are_sent(fake):
    fake.token = "s3cret"
    unauth = fast_source(fake.url).sample_blocking()
    assert "401" in unauth.errors[0] and "FLEET_TUI_PROM_TOKEN" in unauth.errors[0]
    assert "s3cret" not in " ".join(unauth.errors)
    ok = PrometheusSource(fake.url, env={"FLEET_TUI_PROM_TOKEN": "s3cret"}).sample_blocking()
    assert not ok.errors and ok.devices


def test_unreachable_server_is_reported_without_raising():
    from tests.fleet.promserver import free_port

    src = fast_source(f"http://127.0.0.1:{free_port()}")
    snap = asyncio.run(src.sample())
    assert snap.errors and "unreachable" in snap.errors[0] and snap.devices == ()
    assert snap.message  # nothing to show: the pane says why


# -- with a real Prometheus ------------------------------------------------------------------------
@pytest.mark.prometheus
def test_prometheus_stopped_mid_run_then_restarted(small_fleet):
    fleet, prom = small_fleet
    src = fast_source(prom.url)
    first = src.sample_blocking()
    assert not first.errors and len(first.devices) == 2
    prom.stop()
    down = src.sample_blocking()
    assert down.errors and "unreachable" in down.errors[0]
    assert len(down.devices) == 2 and all(d.age_s is not None for d in down.devices)
    assert any("showing the last data" in e for e in down.errors)
    prom.start()  # same port, same data directory
    fresh = recover(src, "the source to recover after the restart")
    assert len(fresh.devices) == 2 and all(d.state == "ok" for d in fresh.devices)


@pytest.mark.prometheus
def test_one_exporter_dies_its_node_goes_stale_others_fine(small_fleet):
    fleet, prom = small_fleet
    src = fast_source(prom.url)
    assert len(src.sample_blocking().devices) == 2
    names = {i: name for name, i in fleet.node_names().items()}
    fleet.kill(1)
    dead = names[1]
    snap = wait_until(
        lambda: (s := src.sample_blocking()) and any(d.state != "ok" for d in s.devices) and s,
        15, 0.2, "the dead node to go stale")
    by_node = {d.node: d for d in snap.devices}
    assert by_node[dead].state == "unavailable" and by_node[dead].age_s is not None
    assert "no data" in by_node[dead].error
    assert by_node[names[0]].state == "ok"
    assert any(e.startswith(f"{dead}:") and "down" in e for e in snap.errors), snap.errors
    # fleet view: the stale node ranks first, with its age
    from fleet_tui.core.fleet import FleetView

    view = FleetView.from_snapshot(snap)
    assert view.offenders[0].node == dead and view.offenders[0].primary == "stale"
    assert view.node(dead).stale_devices == 1 and view.node(names[0]).stale_devices == 0


def test_fleet_command_names_an_unreachable_prometheus(capsys):
    from fleet_tui.cli import main
    from tests.fleet.promserver import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["fleet", "--source", f"prometheus:{url}", "--window", "0"]) == 2
    err = capsys.readouterr().err
    assert url in err and "unreachable" in err


@pytest.fixture
def tls_fake(tmp_path):
    """The fake Prometheus over HTTPS with a self-signed certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = FakePrometheus(tls=ctx)
    try:
        yield server, cert
    finally:
        server.close()


def test_tls_is_verified_by_default(tls_fake):
    server, cert = tls_fake
    refused = PrometheusSource(server.url, env={}, timeout_s=2).sample_blocking()
    assert refused.errors and "CERTIFICATE_VERIFY_FAILED" in refused.errors[0]
    trusted = PrometheusSource(server.url, env={}, ca_file=str(cert)).sample_blocking()
    assert not trusted.errors and trusted.devices[0].gpu_util_pct == 42
    insecure = PrometheusSource(server.url, env={}, verify_tls=False).sample_blocking()
    assert not insecure.errors and insecure.devices


def test_basic_auth_is_sent(fake):
    import base64

    fake.token = None
    seen = {}
    original = fake.server.RequestHandlerClass._answer

    def spy(handler):
        seen["auth"] = handler.headers.get("Authorization")
        return original(handler)

    fake.server.RequestHandlerClass._answer = spy
    fake.server.RequestHandlerClass.do_POST = spy
    env = {"FLEET_TUI_PROM_USER": "ops", "FLEET_TUI_PROM_PASSWORD": "pw:1"}
    assert not PrometheusSource(fake.url, env=env).sample_blocking().errors
    assert seen["auth"] == "Basic " + base64.b64encode(b"ops:pw:1").decode()


def test_static_facts_are_read_once_per_period_and_merged(fake):
    clock = [1000.0]
    src = PrometheusSource(fake.url, env={}, static_every_s=60, clock=lambda: clock[0])
    for t in (1000.0, 1002.0, 1030.0):
        clock[0] = t
        d = src.sample_blocking().devices[0]
        assert d.name == "NVIDIA H100" and d.sm_clock_max_mhz == 1980 and d.gpu_util_pct == 42
    assert fake.static_requests == 1
    clock[0] = 1061.0
    src.sample_blocking()
    assert fake.static_requests == 2
