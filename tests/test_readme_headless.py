"""Every line of the README's headless section runs as written when pasted.

The lines run verbatim through ``bash`` in order, in a scratch copy of the clone's root (links to
the repository's folders, so files they make stay out of the repository), with the virtual
environment's ``fleet-tui`` first on ``PATH`` as the README tells users to have it. Lines that need
what a test machine may lack are still run, and must give the README's documented answer:

* a device (``monitor``/``record`` without ``--source``): a reading, or exit 2 with "no accelerator
  found", never a traceback;
* Prometheus at 127.0.0.1:9090: when that port is free and the ``prometheus`` binary is installed,
  a real one is started there, scraping a replayed DCGM fleet (tests/fleet), and the lines must work;
  when nothing listens there, they exit 2 naming the source; when something else holds the port (a
  user's Prometheus, another test run's), a result or an error, never a traceback;
* ``export`` serves until Ctrl-C: it must answer ``/metrics`` on its port, then stop on SIGINT.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.signals import default_sigint

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PROM = "prometheus:http://127.0.0.1:9090"


def headless_lines() -> list[str]:
    section = README.split("## Headless commands\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M).group(1)
    lines = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines


LINES = headless_lines()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Prometheus binds: TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def prometheus_9090():
    """A real Prometheus on 127.0.0.1:9090 scraping 2 replayed nodes, when it can be had."""
    from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

    if PROMETHEUS is None or not _port_free(9090):
        yield None
        return
    from tests.fleet.dcgm_replay import ReplayFleet, make_nodes

    fleet = ReplayFleet(make_nodes(2, 2))
    prom = PrometheusServer(fleet.targets)
    prom.port, prom.url = 9090, "http://127.0.0.1:9090"
    try:
        prom.start()
        wait_until(lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 4, 30,
                   what="both replayed nodes to be scraped")
        yield prom
    finally:
        prom.close()
        fleet.close()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch folder that looks like the clone's root: links to its folders, nothing else."""
    where = tmp_path_factory.mktemp("clone")
    for entry in ROOT.iterdir():
        if entry.name in ("catalogs", "tests", "fleet_tui", "bench", "themes", "dashboards", "scripts"):
            (where / entry.name).symlink_to(entry)
    return where


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CONFIG_HOME"], env["XDG_DATA_HOME"] = str(home / "config"), str(home / "data")
    env.pop("FLEET_TUI_PROM_TOKEN", None)
    return env


def _run(line: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(cwd), capture_output=True,
                          text=True, timeout=timeout)


def _export(line: str, cwd: Path) -> None:
    port = int(re.search(r"--port (\d+)", line).group(1))
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=_env(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        if body is None:  # it ended: the port was taken, which it must say plainly
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 2 and str(port) in err and "Traceback" not in err, err
            return
        assert "fleet_tui_" in body
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, 130) and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_the_section_has_the_examples():
    assert len(LINES) >= 30
    assert not [line for line in LINES if re.search(r"\[[A-Z .]+\]|\bPATH\b|\.\.\.|…", line)], \
        "placeholders are not runnable"


def test_every_headless_line_runs_as_written(clone, prometheus_9090):
    failures = []
    had_device = None
    for line in LINES:
        if " export " in f" {line} ":
            _export(line, clone)
            continue
        run = _run(line, clone)
        said = f"$ {line}\n-> exit {run.returncode}\n{run.stderr[-2000:]}"
        if "Traceback" in run.stderr:
            failures.append("traceback: " + said)
            continue
        needs_device = line.startswith(("fleet-tui monitor", "fleet-tui record")) and "--source" not in line
        if line.startswith("fleet-tui record") and needs_device:
            had_device = run.returncode == 0
            if not had_device and not (run.returncode == 2 and "no accelerator found" in run.stderr):
                failures.append("no device, but not the documented answer: " + said)
            continue
        if needs_device:  # a reading, or the documented "no device" answer
            if not (run.returncode == 0 or run.returncode == 2 and "no accelerator found" in run.stderr):
                failures.append("no device, but not the documented answer: " + said)
            continue
        if "--db history.db" in line and had_device is False:  # nothing could be recorded
            if not (run.returncode == 2 and "no such history database" in run.stderr):
                failures.append("history.db was never recorded, but not the documented answer: " + said)
            continue
        if PROM in line and prometheus_9090 is None and not _port_free(9090):
            # 9090 is someone else's (a Prometheus of the user's, another suite's server): what
            # the line prints depends on what answers there, so only "no traceback" holds
            if run.returncode not in (0, 2) or "Traceback" in run.stderr:
                failures.append("9090 is taken, and the answer is not a result or an error: "
                                + said)
            continue
        if PROM in line and prometheus_9090 is None:  # every command: the same clear error
            if not (run.returncode == 2 and f"--source {PROM}" in run.stderr):
                failures.append("no Prometheus on 9090, but not a clear error: " + said)
            continue
        if "jobs report" in line:  # the replayed fleet carries no job labels: a clear 'no job'
            if not (run.returncode == 0 or run.returncode == 2 and "4242" in run.stderr):
                failures.append(said)
            continue
        if run.returncode != 0:
            failures.append(said)
        elif line.startswith("fleet-tui") and not (run.stdout.strip() or run.stderr.strip()):
            failures.append("printed nothing: " + said)
    assert not failures, "\n\n".join(failures)
    assert (clone / "my-catalog/instances/gcp.toml").is_file()
