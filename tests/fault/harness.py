"""A lab of real cluster scheduler processes on one real PostgreSQL, for fault injection."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from node_forks import NodeForks, NodeProcess
from pydantic import SecretStr
from sqlalchemy import select

import fixtures.sshd as sshd_fixture
from fixtures.app import make_settings
from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.app import SYSTEM, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.status import Node
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import FencedWrite, Run
from waiting import eventually


@dataclass
class Lab:
    """Nodes named ``alpha``, ``beta``, ... share ``database_url``; simulated time runs
    ``speed`` times faster than real time from ``sim_epoch``."""

    database_url: str
    directory: Path
    speed: float = 10.0
    master_key: str = ""
    real_epoch: float = field(default_factory=time.time)
    sim_epoch: datetime = field(default_factory=lambda: datetime(2026, 3, 2, 9, 0, 50, tzinfo=UTC))
    #: The fork server the nodes are started from (this pytest process's: ``node_forks``).
    forks: NodeForks | None = None
    processes: dict[str, NodeProcess] = field(default_factory=dict)
    apps: dict[str, App] = field(default_factory=dict)
    #: A replicated pair: each node's own database (a node not named uses database_url).
    database_urls: dict[str, str] = field(default_factory=dict)
    topology: str = "shared-database"
    #: Endpoints other than http://NAME.test:8080 (a node served by the test, on loopback).
    endpoints: dict[str, str] = field(default_factory=dict)
    #: Simulated time when :meth:`stop_all` last stopped running nodes.
    stopped_at: datetime | None = None
    #: The installation's shard count (``FLEETCRON_SHARDS``; None: the default).
    shards: int | None = None
    #: Settings added to those of the apps the test opens as a node (:meth:`app`).
    app_settings: dict[str, object] = field(default_factory=dict)

    def accounted_until(self, grace: timedelta) -> datetime:
        """The end of the window C3 checks: every slot due two misfire graces before the
        nodes were stopped (before now, while they run) has a record. A slot due later may
        still have been waiting, within its grace, for the previous owner's claims when the
        nodes stopped, and stopping takes its time (a node cut off from PostgreSQL is given
        20 s): measured from after the stop, the window took in slots nobody could record."""
        return (self.stopped_at or self.sim_now()) - 2 * grace

    @property
    def effects(self) -> Path:
        return self.directory / "effects.log"

    def sim_now(self) -> datetime:
        return self.sim_epoch + timedelta(seconds=(time.time() - self.real_epoch) * self.speed)

    def real_time_of(self, sim: datetime) -> float:
        """The true unix time at which simulated time reaches ``sim``."""
        return self.real_epoch + (sim - self.sim_epoch).total_seconds() / self.speed

    def env(self, name: str, **extra: str) -> dict[str, str]:
        machine_id = self.directory / f"{name}.machine-id"
        if not machine_id.exists():
            machine_id.write_text(secrets.token_hex(16) + "\n")
        return {
            **os.environ,
            "FLEETCRON_DATABASE_URL": self.database_urls.get(name, self.database_url),
            "FLEETCRON_TOPOLOGY": self.topology,
            "FLEETCRON_CLUSTER": "true",
            "FLEETCRON_ENDPOINT": self.endpoints.get(name, f"http://{name}.test:8080"),
            "FLEETCRON_MACHINE_ID_FILE": str(machine_id),
            "FLEETCRON_MASTER_KEY": self.master_key,
            "FLEETCRON_NODE_NAME": name,
            "FLEETCRON_DATA_DIR": str(self.directory / name),
            "FLEETCRON_TICK_S": "0.1",
            "FLEETCRON_MAINTENANCE_INTERVAL_S": "0.3",
            "FLEETCRON_CLAIM_MARGIN_S": "6",
            "FLEETCRON_SHUTDOWN_GRACE_S": "1",
            # Small batches give a second claimer every chance to interleave within a minute.
            "FLEETCRON_CLAIM_BATCH": "5",
            # The boxes are local targets (off by default in a real install).
            "FLEETCRON_ALLOW_LOCAL_TARGETS": "true",
            "FLEETCRON_LOCAL_ALLOW_ROOT": "true",
            # Active cleanup scans the SSH target's processes: only scenarios whose sshd runs
            # in a PID namespace of its own switch it on (the shared sshd sees every suite's).
            "FLEETCRON_ACTIVE_CLEANUP": "false",
            **({"FLEETCRON_SHARDS": str(self.shards)} if self.shards else {}),
            **extra,
        }

    def app(self, name: str) -> App:
        """The node's settings opened in the test process (for admin actions as that node)."""
        if name not in self.apps:
            env = self.env(name)
            settings = make_settings(
                self.directory / name,
                self.database_urls.get(name, self.database_url),
                cluster=True,
                topology=self.topology,
                endpoint=env["FLEETCRON_ENDPOINT"],
                machine_id_file=Path(env["FLEETCRON_MACHINE_ID_FILE"]),
                master_key=SecretStr(self.master_key),
                node_name=name,
                shards=self.shards,
                **self.app_settings,
            )
            self.apps[name] = App.open(settings, clock=self.sim_now)
        return self.apps[name]

    def node(self, name: str) -> Node:
        return Node(self.app(name))

    def approve(self, *names: str) -> None:
        for name in names:
            node = self.node(name)
            cluster.announce(node.app, node)
            cluster.approve(node.app, SYSTEM, node.identity)

    def make_owner(self, name: str) -> None:
        cluster.request_transfer(self.app(name), SYSTEM, self.node(name).identity.node_id)

    def add_fleet(
        self,
        count: int,
        *,
        work: str = "sleep 0",
        timeout_s: int = 30,
        ssh: SshServer | None = None,
        ports: Mapping[int, int] | None = None,
        jitter_s: int = 0,
        overlap: str | None = None,
    ) -> None:
        """``count`` targets (local, or SSH targets on ``ssh``) and one bulk job on all of
        them, every minute, whose command appends its start and end to the effects file
        (with the shell's pid, so :class:`netfault.ProcessWatch` can watch its group).
        ``ports`` gives SSH target number N another port (a proxy in front of ``ssh``)."""
        app = self.app("alpha")
        for n in range(count):
            if ssh is None:
                targets.add_target(app, SYSTEM, TargetSpec(f"box{n:03d}", TargetKind.LOCAL))
            else:
                targets.add_target(
                    app,
                    SYSTEM,
                    TargetSpec(
                        f"box{n:03d}",
                        host=ssh.host,
                        port=(ports or {}).get(n, ssh.port),
                        user=ssh.user,
                        private_key=ssh.client_private_key.encode(),
                        host_key=ssh.host_key_line,
                    ),
                    allow_same_host=True,
                )
        fields = (
            "$FLEETCRON_SCHEDULED_FOR $FLEETCRON_TARGET $FLEETCRON_FENCING_TOKEN $FLEETCRON_NODE"
        )
        command = (
            f'echo "start $(date +%s.%N) {fields} $$" >> {self.effects}; {work}; '
            f'echo "end $(date +%s.%N) {fields} $$" >> {self.effects}'
        )
        jobs.add_job(
            app,
            SYSTEM,
            "everywhere",
            replace(
                JobSpec("* * * * *", command, timeout_s=timeout_s, jitter_s=jitter_s),
                overlap=overlap or JobSpec("* * * * *", command).overlap,
            ),
            bulk=True,
        )

    def start(self, name: str, **extra_env: str) -> None:
        assert self.forks is not None, "a lab that starts nodes needs the node_forks fixture"
        self.processes[name] = self.forks.start(
            [str(self.real_epoch), self.sim_epoch.isoformat(), str(self.speed)],
            self.env(name, **extra_env),
            self.directory / f"{name}.log",
        )

    def start_worker(self, name: str, index: int, count: int, **extra_env: str) -> str:
        """Start worker ``index`` of ``count`` worker processes of node ``name`` (as
        ``fleetcron scheduler --workers count`` composes it); returns its process name,
        ``<name>/<index>``, the node name its runs record."""
        worker = f"{name}/{index}"
        self.start(name, FAULT_WORKER=f"{index}/{count}", FLEETCRON_NODE_NAME=worker, **extra_env)
        self.processes[worker] = self.processes.pop(name)
        return worker

    def signal(self, name: str, sig: signal.Signals) -> None:
        self.processes[name].send_signal(sig)

    def stop_all(self) -> None:
        if any(proc.poll() is None for proc in self.processes.values()):
            self.stopped_at = self.sim_now()
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for app in self.apps.values():
            app.close()

    def runs(self) -> list[Run]:
        with self.app("alpha").db.read() as session:
            return list(session.scalars(select(Run).order_by(Run.id)))

    def fenced_writes(self) -> list[FencedWrite]:
        with self.app("alpha").db.read() as session:
            return list(session.scalars(select(FencedWrite)))

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text() if path.exists() else ""


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    eventually(condition, timeout, what, interval=0.1)


UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


@contextlib.contextmanager
def namespaced_sshd(workdir: Path, client_key: ClientKey) -> Iterator[SshServer]:
    """A real sshd whose sessions see only their own processes in /proc: active cleanup's
    scan on it never touches other suites' tagged runs on a shared machine (as in
    tests/integration/executors/test_kill_generations.py)."""
    wrapper = workdir / "sshd-in-namespace"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(
        "#!/bin/sh\n"
        f'{shlex.join(UNSHARE)} {sshd_fixture.SSHD_BINARY} "$@" &\n'
        'pid=$!; trap \'kill -s KILL "$pid"\' TERM; wait "$pid"\n'
    )
    wrapper.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sshd_fixture, "SSHD_BINARY", wrapper)
        with running_sshd(
            workdir / "sshd", authorized_keys=[client_key.public_key_line], client_key=client_key
        ) as server:
            try:
                yield server
            finally:
                _wait_for_sessions_to_end(server)


def _wait_for_sessions_to_end(server: SshServer, timeout_s: float = 30) -> None:
    """Stopping the namespace SIGKILLs everything in it: give the sessions still logging in
    or out time to finish first (a login shell killed halfway can leave lock files behind
    in the user's home, e.g. a shell profile's own locks)."""
    inner = [c for u in _children(server.pid) for c in _children(u)]
    if not inner:
        return
    try:
        namespace = os.readlink(f"/proc/{inner[0]}/ns/pid")
    except OSError:
        return

    def only_the_listener() -> bool:
        members = 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    members += os.readlink(f"/proc/{entry}/ns/pid") == namespace
        return members <= 1  # sshd's listener alone

    # Best effort: after the timeout the namespace is stopped anyway, sessions or not.
    with contextlib.suppress(AssertionError):
        eventually(only_the_listener, timeout_s, "the ssh sessions to end", interval=0.2)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def namespace_resolver(server: SshServer) -> Callable[[int], int | None]:
    """Maps a pid as seen inside ``server``'s PID namespace (what a command writes as
    ``$$``) to the same process's pid here, for :class:`netfault.ProcessWatch`."""
    inner = [c for u in _children(server.pid) for c in _children(u)]
    assert inner, "the namespaced sshd is not running"
    namespace = os.readlink(f"/proc/{inner[0]}/ns/pid")

    def resolve(nspid: int) -> int | None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                    continue
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("NSpid:") and int(line.split()[-1]) == nspid:
                    return int(entry)
        return None

    return resolve


def remove_marks(scope: str) -> None:
    """Remove the installation's marks (one per shard) from the SSH user's home."""
    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    for mark in (home / ".fleetcron").glob(f"generation-{scope}*"):
        shutil.rmtree(mark, ignore_errors=True)
