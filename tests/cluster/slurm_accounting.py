"""A real multi-node Slurm with accounting for the tests: a private MariaDB (Debian's
``mariadb-server``) on a temporary data directory bound to 127.0.0.1, ``slurmdbd`` on it,
``slurmctld``, and one ``slurmd -N`` per node (distinct ``NodeName``\\ s, all on 127.0.0.1 with
their own ports), authenticated by a private ``munged``. Users and accounts are created by the
fixture (``useradd``; root only) and registered with ``sacctmgr``. Everything runs in the
foreground under this process and is stopped at teardown; the users are removed again.

Two GPU nodes (4 fake GPUs each: GRES ``File=`` on empty files) and one CPU-only node; job
accounting gathers CPU time and RSS (``jobacct_gather/linux``) so ``sacct`` has TotalCPU/MaxRSS.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

PROGRAMS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mungekey", "sbatch", "squeue", "sinfo",
            "sacct", "sacctmgr", "sreport", "scontrol", "scancel", "mariadbd",
            "mariadb-install-db", "mariadb", "useradd", "userdel", "runuser")
GPU_NODES = ("gn1", "gn2")
CPU_NODE = "cn1"
GPUS_PER_NODE = 4
USER_COMMENT = "fleet-tui test user"
# user -> account; each run makes them with a suffix of its own ("ftdave-3fa9"), so two runs on
# one machine (and their cleanup) never touch each other's users
USERS = {"ftalice": "physics", "ftbob": "physics", "ftcarol": "bio", "ftdave": "bio"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_or_skip() -> None:
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    why = f"programs missing: {', '.join(missing)}" if missing else None
    if why is None and os.geteuid() != 0:
        why = "slurmd and useradd need root"
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI is set: .ci/run must install slurm-wlm, slurmdbd, munge and "
                        "mariadb-server)")
        pytest.skip(why)


class AccountingCluster:
    """Start with :meth:`start`, always :meth:`stop` (a ``finally``)."""

    def __init__(self) -> None:
        # world-traversable, so jobs running as the test users can read slurm.conf
        self.root = Path(tempfile.mkdtemp(prefix="fleet-slurm-"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.users_made: list[str] = []
        tag = "".join(c for c in self.root.name.rsplit("-", 1)[-1].lower() if c.isalnum())[:4]
        self.users = {name: f"{name}-{tag}" for name in USERS}  # name in the tests -> real
        self.cluster = "fleetacct"
        self._log = open(self.root / "console.log", "wb")  # noqa: SIM115 - closed in stop()

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        r = self.root
        for d in ("munge", "state", "spool", "log", "dev", "db", "run"):
            (r / d).mkdir()
        (r / "munge").chmod(0o711)
        (r / "log").chmod(0o777)
        for i in range(GPUS_PER_NODE):
            (r / "dev" / f"nvidia{i}").touch()
        self._users()
        self._munge()
        self._mariadb()
        self.dbd_port = free_port()
        self._slurm_conf()
        self._slurmdbd()
        self.sacctmgr("add", "cluster", self.cluster)
        for account in sorted(set(USERS.values())):
            self.sacctmgr("add", "account", account, f"cluster={self.cluster}")
        for user, account in USERS.items():
            self.sacctmgr("add", "user", self.users[user], f"account={account}",
                          f"cluster={self.cluster}")
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for node in (*GPU_NODES, CPU_NODE):
            self._spawn(["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        self.wait(self._all_idle, "the nodes to be idle", 60)

    def _users(self) -> None:
        for user in self.users.values():
            try:
                pwd.getpwnam(user)
            except KeyError:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh",
                                "--comment", USER_COMMENT, user], check=True, capture_output=True)
            if pwd.getpwnam(user).pw_gecos == USER_COMMENT:  # ours, perhaps from a killed run
                self.users_made.append(user)

    def _spawn(self, argv: list[str]) -> None:
        self.procs.append(subprocess.Popen(argv, stdout=self._log, stderr=self._log, env=self.env))

    def _munge(self) -> None:
        r = self.root
        subprocess.run(["mungekey", "--create", f"--keyfile={r}/munge/munge.key"], check=True,
                       capture_output=True)
        self.munge_sock = r / "munge" / "munge.sock"
        self._spawn(["munged", "-F", "-f", f"--socket={self.munge_sock}",
                     f"--key-file={r}/munge/munge.key", f"--pid-file={r}/munge/munged.pid",
                     f"--log-file={r}/munge/munged.log", f"--seed-file={r}/munge/munged.seed"])
        self.wait(self.munge_sock.exists, "munged")

    def _mariadb(self) -> None:
        r = self.root
        subprocess.run(["mariadb-install-db", f"--datadir={r}/db", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        self.db_port = free_port()
        self.db_sock = r / "run" / "mysqld.sock"
        self._spawn(["mariadbd", "--no-defaults", f"--datadir={r}/db", "--user=root",
                     f"--socket={self.db_sock}", f"--port={self.db_port}",
                     "--bind-address=127.0.0.1", f"--pid-file={r}/run/mysqld.pid",
                     f"--log-error={r}/log/mariadb.log", "--innodb-buffer-pool-size=32M",
                     "--innodb-log-file-size=16M", "--max-connections=40",
                     "--performance-schema=OFF", "--skip-name-resolve"])
        self.wait(self.db_sock.exists, "mariadbd", 60)

    def _slurmdbd(self) -> None:
        r = self.root
        conf = r / "slurmdbd.conf"
        conf.write_text(f"""AuthType=auth/munge
AuthInfo=socket={self.munge_sock}
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort={self.dbd_port}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        conf.chmod(0o600)
        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF
        self._spawn(["slurmdbd", "-D"])
        self.wait(lambda: _port_open(self.dbd_port), "slurmdbd", 60)

    def _slurm_conf(self) -> None:
        r = self.root
        host = socket.gethostname().split(".")[0]
        ctld = free_port()
        lines = [f"""ClusterName={self.cluster}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={self.munge_sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/ctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
AccountingStoragePass={self.munge_sock}
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
PriorityType=priority/basic
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=2
DefMemPerCPU=500
"""]
        for node in GPU_NODES:
            lines.append(f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 "
                         f"Port={free_port()} CPUs=4 RealMemory=4000 "
                         f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN\n")
        lines.append(f"NodeName={CPU_NODE} NodeHostname={host} NodeAddr=127.0.0.1 "
                     f"Port={free_port()} CPUs=4 RealMemory=4000 State=UNKNOWN\n")
        lines.append(f"PartitionName=gpu Nodes={','.join(GPU_NODES)} Default=YES "
                     "MaxTime=INFINITE State=UP\n")
        lines.append(f"PartitionName=cpu Nodes={CPU_NODE} MaxTime=INFINITE State=UP\n")
        self.conf.write_text("".join(lines))
        (r / "gres.conf").write_text("".join(
            f"NodeName={n} Name=gpu File={r}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"
            for n in GPU_NODES))

    # ---------------------------------------------------------------- use

    def run(self, *argv: str, user: str | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        cmd = list(argv) if user is None else ["runuser", "-u", self.users.get(user, user), "--",
                                               *argv]
        out = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=60,
                             check=False)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: status {out.returncode}: {out.stderr[-800:]}")
        return out

    def sacctmgr(self, *args: str) -> None:
        self.run("sacctmgr", "-i", *args)

    def sql(self, statement: str) -> str:
        """Run SQL on the accounting database (as root, on the private server's socket)."""
        return self.run("mariadb", f"--socket={self.db_sock}", "-u", "root", "--batch",
                        "--skip-column-names", "slurm_acct_db", "-e", statement).stdout

    def move_jobs(self, shifts: dict[str, int]) -> None:
        """Move finished jobs back in time in the accounting database: job id -> seconds.

        ``sreport`` reads only the hourly rollups of hours that have ended, so jobs that ran a
        minute ago are not in it. Moving a job's recorded submit/eligible/start/end (and its
        steps') back by whole hours, with the cluster's registration before them, is the cluster
        as it would be had the jobs run then; ``sacct`` and ``sreport`` read the same rows."""
        jobs, steps = f"{self.cluster}_job_table", f"{self.cluster}_step_table"
        for job, by in shifts.items():
            def back(col: str, by: int = by) -> str:  # 0 is "unset": kept
                return f"{col} = IF({col} > 0, {col} - {by}, 0)"

            self.sql(f"UPDATE {steps} s JOIN {jobs} j ON s.job_db_inx = j.job_db_inx SET "
                     f"{back('s.time_start')}, {back('s.time_end')} "
                     f"WHERE j.id_job = {int(job)} AND j.time_end > 0;"
                     f"UPDATE {jobs} SET {back('time_submit')}, {back('time_eligible')}, "
                     f"{back('time_start')}, {back('time_end')} "
                     f"WHERE id_job = {int(job)} AND time_end > 0;")
        earliest = max(shifts.values()) + 3600
        self.sql(f"UPDATE {self.cluster}_event_table SET time_start = time_start - {earliest} "
                 "WHERE node_name = '';")

    def roll(self, start: str, end: str) -> None:
        """Roll the accounting usage up over ``[start, end)`` now (slurmdbd does it hourly)."""
        self.run("sacctmgr", "-i", "roll", start, end)

    def sbatch(self, *args: str, user: str) -> str:
        out = self.run("sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args,
                       user=user)
        return out.stdout.strip().split(";")[0]

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return len(states) == len(GPU_NODES) + 1 and set(states.values()) == {"idle"}

    def wait(self, ok: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead:
                break
            if ok():
                return
            time.sleep(0.25)
        logs = "".join(f"== {p.name}\n{p.read_text(errors='replace')[-1500:]}\n"
                       for p in sorted((self.root / "log").glob("*.log")))
        logs += (self.root / "console.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"Slurm accounting cluster: gave up waiting for {what}\n{logs}")

    # ---------------------------------------------------------------- stop

    def stop(self) -> None:
        """Cancel every job and wait for it to end (a job's slurmstepd outlives slurmd), stop the
        daemons, kill anything still holding a file of the cluster's directory, remove the users
        made and the directory."""
        if self.procs and all(p.poll() is None for p in self.procs):
            try:
                for user in self.users.values():
                    self.run("scancel", "-u", user, check=False)
                self.wait(lambda: not self.run("squeue", "-h", "-o", "%A",
                                               check=False).stdout.strip(), "jobs to end", 30)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass  # the leftovers are killed below
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._log.close()
        kill_holders(self.root, [*self.users.values()])
        for user in self.users_made:
            subprocess.run(["userdel", user], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def kill_holders(root: Path, users: list[str]) -> None:
    """SIGKILL the processes that hold a file under ``root`` open, run from it, or run as one
    of the test's users (a job's shell and its children): only this cluster's processes."""
    uids = set()
    for user in users:
        try:
            uids.add(pwd.getpwnam(user).pw_uid)
        except KeyError:
            pass
    prefix = str(root)
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            ours = pid_dir.stat().st_uid in uids
            if not ours:
                cmd = (pid_dir / "cmdline").read_bytes().decode(errors="replace")
                links = [os.readlink(f) for f in (pid_dir / "fd").iterdir()]
                ours = prefix in cmd or any(link.startswith(prefix) for link in links)
            if ours:
                os.kill(int(pid_dir.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
