"""Start and stop a real Prometheus server on a free 127.0.0.1 port, with temporary config and data.

Used by the fleet tests (``conftest.py``) and by ``bench/bench_fleet.py``. The binary is Debian's
``prometheus`` (installed by ``.ci/run``). Every process started here is stopped by ``stop()``
(terminate, then kill), which the fixtures call in teardown, also when a test fails.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout_s: float = 20.0, every_s: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


class PrometheusServer:
    def __init__(self, targets: list[str], *, scrape_interval: str = "1s", workdir: str | None = None,
                 job: str = "dcgm-exporter", retention: str = "1h"):
        if PROMETHEUS is None:
            raise RuntimeError("the prometheus binary is not installed")
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="fleet-tui-prom-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.config = self.workdir / "prometheus.yml"
        self.retention = retention  # blocks older than this are dropped at start
        # JSON is YAML: no YAML library needed.
        self.config.write_text(json.dumps({
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": "1m",
                       # a scrape must end before the next starts
                       "scrape_timeout": "900ms" if scrape_interval == "1s" else scrape_interval},
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}],
        }))

    def start(self, timeout_s: float = 30.0) -> "PrometheusServer":
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        log = open(self.workdir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={data}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
             f"--storage.tsdb.retention.time={self.retention}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        try:
            wait_until(self.ready, timeout_s, what=f"Prometheus on {self.url} to be ready")
        except AssertionError:
            self.stop()
            raise AssertionError(f"Prometheus did not start; log:\n{self.log_tail()}") from None
        return self

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.workdir / "prometheus.log").read_text().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def query(self, promql: str) -> list:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]["result"]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
