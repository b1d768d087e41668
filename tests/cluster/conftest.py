"""A real single-node Slurm for the tests: Debian's ``slurmctld``, ``slurmd`` and ``munged`` with a
config in a temporary directory, in the foreground, on free loopback ports, stopped afterwards.

The node declares 8 CPUs and 4 GPUs (``SlurmdParameters=config_overrides``; the GPUs are GRES whose
device files are empty files in the temporary directory), so jobs can ask for ``--gres=gpu:N`` on a
machine without GPUs. Accounting is off, so ``sacct`` is not available here. Without the programs
(or without root, which slurmd needs) the tests skip; with ``CI`` set they fail instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.slurm_accounting import kill_holders

SLURM_PROGRAMS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "sinfo")
NODE = "ftnode"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missing_or_skip() -> None:
    missing = [p for p in SLURM_PROGRAMS if shutil.which(p) is None]
    why = f"Slurm programs missing: {', '.join(missing)}" if missing else None
    if why is None and os.geteuid() != 0:
        why = "slurmd needs root"
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI is set: .ci/run must install slurm-wlm and munge)")
        pytest.skip(why)


class SlurmCluster:
    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        r = self.root
        for d in ("munge", "state", "spool", "log", "dev", "out"):
            (r / d).mkdir()
        (r / "munge").chmod(0o711)
        for i in range(4):
            (r / "dev" / f"nvidia{i}").touch()
        subprocess.run(["mungekey", "--create", f"--keyfile={r}/munge/munge.key"], check=True,
                       capture_output=True)
        sock = r / "munge" / "munge.sock"
        host = socket.gethostname().split(".")[0]
        ctld, slurmd = _free_port(), _free_port()
        self.conf.write_text(f"""ClusterName=fleettest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/ctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
PriorityType=priority/basic
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:4 RealMemory=1000 State=UNKNOWN
PartitionName=gpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
        (r / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File={r}/dev/nvidia[0-3]\n")
        log = open(r / "log" / "console.log", "wb")  # noqa: SIM115 - closed with the processes
        self.procs.append(subprocess.Popen(
            ["munged", "-F", "-f", f"--socket={sock}", f"--key-file={r}/munge/munge.key",
             f"--pid-file={r}/munge/munged.pid", f"--log-file={r}/munge/munged.log",
             f"--seed-file={r}/munge/munged.seed"], stdout=log, stderr=log))
        self._wait(lambda: sock.exists(), "munged")
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(self.conf)],
                                           stdout=log, stderr=log, env=self.env))
        self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", NODE, "-f", str(self.conf)],
                                           stdout=log, stderr=log, env=self.env))
        self._wait(self._idle, "the node to be idle")

    def _idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                             env=self.env, timeout=10)
        return out.stdout.strip() == "idle"

    def _wait(self, ok, what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            if ok():
                return
            time.sleep(0.2)
        logs = "".join(p.read_text(errors="replace")[-1500:] for p in (self.root / "log").glob("*.log"))
        raise RuntimeError(f"Slurm test cluster: gave up waiting for {what}\n{logs}")

    def sbatch(self, *args: str) -> str:
        out = subprocess.run(["sbatch", "--parsable", "-o", f"{self.root}/out/%j.out", *args],
                             capture_output=True, text=True, env=self.env, timeout=30, check=True)
        return out.stdout.strip().split(";")[0]

    def stop(self) -> None:
        """Cancel the jobs and wait for them (a job's slurmstepd outlives slurmd), stop the
        daemons, then kill whatever still holds a file of the cluster's directory."""
        if self.procs and all(p.poll() is None for p in self.procs):
            try:
                subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True,
                               timeout=15)
                self._wait(lambda: not subprocess.run(
                    ["squeue", "-h", "-o", "%A"], capture_output=True, text=True, env=self.env,
                    timeout=10).stdout.strip(), "the jobs to end")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass  # killed below
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        kill_holders(self.root, [])


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    _missing_or_skip()
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
