"""AMD GPUs in the fleet view: a real Prometheus scraping exporters that speak AMD
device-metrics-exporter's format, read by ``fleet`` and ``jobs``.

The exposition follows the exporter's documented names and labels (ROCm/device-metrics-exporter,
docs/configuration/metricslist.md: lower-case ``gpu_*`` names, ``gpu_id``/``serial_number``/
``hostname``/``card_series`` labels, VRAM in MB; docs/integrations/slurm-integration.md: the
``job_id``/``job_user``/``job_partition`` labels its Slurm integration sets, empty without a job).
The values are chosen for the test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet_tui.cli import main
from tests.fleet.promserver import PROMETHEUS, PrometheusServer, wait_until

pytestmark = pytest.mark.prometheus

# node -> per GPU (gfx activity %, used VRAM MB, power W, junction temp C, job id, job user)
NODES = {
    "mi300-a": [(97, 150_000, 690, 81, "3101", "alice"), (95, 149_000, 680, 79, "3101", "alice")],
    "mi300-b": [(0, 300, 140, 41, "3102", "bob"), (0, 280, 138, 40, "", "")],
}
TOTAL_MB = 196_592  # an MI300X's 192 GiB


def exposition(host: str) -> str:
    lines = []
    for name, pick in (("gpu_gfx_activity", 0), ("gpu_used_vram", 1), ("gpu_power_usage", 2),
                       ("gpu_junction_temperature", 3), ("gpu_total_vram", None)):
        lines.append(f"# TYPE {name} gauge")
        for gpu, row in enumerate(NODES[host]):
            labels = (f'card_model="102-G30211-0C",card_series="AMD Instinct MI300X OAM",'
                      f'card_vendor="AMD",gpu_compute_partition_type="spx",gpu_id="{gpu}",'
                      f'gpu_partition_id="0",hostname="{host}",job_id="{row[4]}",'
                      f'job_partition="{"gpu" if row[4] else ""}",job_user="{row[5]}",'
                      f'serial_number="69240900{gpu}{len(host)}"')
            value = TOTAL_MB if pick is None else row[pick]
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server API
        body = exposition(self.server.host).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def amd_fleet():
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed")
    servers = []
    for host in NODES:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        srv.host = host
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    prom = PrometheusServer([f"127.0.0.1:{s.server_address[1]}" for s in servers])
    try:
        prom.start()
        wait_until(lambda: len(prom.query("gpu_gfx_activity")) == 4, 30, what="AMD exporters scraped")
        yield prom
    finally:
        prom.close()
        for s in servers:
            s.shutdown()
            s.server_close()


def test_fleet_reads_amd_exporter_metrics(amd_fleet, capsys):
    assert main(["fleet", "--source", f"prometheus:{amd_fleet.url}", "--json", "--window", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    devices = {(d["node"], d["index"]): d for n in data["nodes"] for d in n["device_list"]}
    assert set(devices) == {(h, g) for h in NODES for g in range(2)}
    for (host, gpu), d in devices.items():
        util, used_mb, power, temp, *_ = NODES[host][gpu]
        assert d["vendor"] == "amd" and d["name"] == "AMD Instinct MI300X OAM"
        assert (d["gpu_util_pct"], d["power_w"], d["temp_c"]) == (util, power, temp)
        assert (d["mem_used_bytes"], d["mem_total_bytes"]) == (used_mb << 20, TOTAL_MB << 20)
    assert devices[("mi300-b", 1)]["idle"] and not devices[("mi300-a", 0)]["idle"]


def test_jobs_from_amd_slurm_labels(amd_fleet, capsys):
    assert main(["jobs", "--source", f"prometheus:{amd_fleet.url}", "--json", "--window", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    jobs = {j["job"]: j for j in data["jobs"]}
    assert set(jobs) == {"3101", "3102"}
    assert (jobs["3101"]["user"], jobs["3101"]["devices"], jobs["3101"]["util_pct"]) == ("alice", 2, 96)
    assert (jobs["3102"]["user"], jobs["3102"]["devices"]) == ("bob", 1)
    assert data["jobs"][0]["job"] == "3102"  # its GPU is idle
    assert data["unattributed"]["devices"] == 1  # mi300-b's second GPU: empty job_id
