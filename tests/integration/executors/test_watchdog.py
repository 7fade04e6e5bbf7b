"""The watchdog ends a run at its budget where the command runs, without the scheduler.

Each case starts the executor in a process of its own ("the scheduler"), waits until the
command runs, then kills it (SIGKILL), freezes it (SIGSTOP) or cuts its TCP link to the
target, and watches the command's processes through /proc (this machine is also the
loopback SSH target) and, for SSH, through a second SSH connection. The command has a
child and an orphaned grandchild in its process group, and a 60 s timeout: only the
watchdog budget (2 s) can end it in time. Negative controls run the same cases with the
test-only switch that turns the watchdog off and see the command survive the budget.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from procs import kill_all, marker_seconds, sleeping

from fixtures.sshd import SshServer
from fleetcron.executors import SshTarget
from waiting import eventually_async

CHILD = Path(__file__).with_name("exec_child.py")
BUDGET_S = 2.0
TOLERANCE_S = 1.5
"""Slack for a loaded 2-core machine between the budget and the processes being gone."""


@dataclass
class Proxy:
    """A loopback TCP proxy to ``upstream`` that can stop forwarding or close everything."""

    upstream: int
    stalled: threading.Event = field(default_factory=threading.Event)
    sockets: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                if self.stalled.is_set():
                    time.sleep(0.05)  # sleep-in-loop: stalled, it moves nothing, sockets open
                    continue
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready or self.stalled.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    return
                sink.sendall(data)
        except (OSError, ValueError):
            # ValueError: close() closed the socket between two selects (its fd is -1).
            return

    def stall(self) -> None:
        self.stalled.set()

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy(sshd: SshServer) -> Iterator[Proxy]:
    relay = Proxy(sshd.port)
    try:
        yield relay
    finally:
        relay.close()


def ssh_spec(sshd: SshServer, port: int | None = None) -> dict[str, Any]:
    return {
        "mode": "ssh",
        "host": sshd.host,
        "port": port or sshd.port,
        "user": sshd.user,
        "key_file": str(sshd.client_key_path),
        "host_key": sshd.host_key_line,
    }


async def remote_sleeping(sshd: SshServer, seconds: str) -> str:
    """``pgrep`` for the command's processes, asked over a second SSH connection."""
    target = SshTarget(
        "check", sshd.host, sshd.port, sshd.user, sshd.client_private_key, sshd.host_key_line
    )
    async with asyncssh.connect(
        target.host,
        target.port,
        username=target.user,
        client_keys=[asyncssh.import_private_key(target.private_key)],
        known_hosts=([asyncssh.import_public_key(target.host_key)], [], []),
        config=None,
        agent_path=None,
    ) as conn:
        result = await conn.run(f"pgrep -f '^sleep {seconds}$' || true", check=False)
    return str(result.stdout).strip()


@dataclass
class Outcome:
    alive_after_disruption: bool
    gone_after_s: float | None
    """Seconds from the command's start until child and grandchild were gone; None: never."""
    child: str
    grandchild: str
    remote_view: tuple[str, str] | None = None
    """What ``pgrep`` over a second SSH connection saw at the end (SSH cases)."""


async def scenario(
    tmp_path: Path,
    spec: dict[str, Any],
    disrupt: Callable[[subprocess.Popen[bytes]], None],
    *,
    watchdog: bool = True,
    watch_s: float = BUDGET_S + TOLERANCE_S,
    remote: SshServer | None = None,
) -> Outcome:
    child, grandchild = marker_seconds(), marker_seconds()
    command = f"(sleep {grandchild} &); sleep {child}"
    full = {**spec, "command": command, "timeout_s": 60, "watchdog_s": BUDGET_S}
    full["watchdog"] = watchdog
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(full)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.DEVNULL,
    )
    try:

        def command_started() -> bool:
            assert proc.poll() is None, "the executor process ended before the command ran"
            return bool(sleeping(child) and sleeping(grandchild))

        await eventually_async(command_started, 20, "the command to start")
        started = time.monotonic()  # after the executor's run() call: a conservative start
        disrupt(proc)
        alive = bool(sleeping(child)) and bool(sleeping(grandchild))

        def gone() -> float | None:
            if not sleeping(child) and not sleeping(grandchild):
                return time.monotonic() - started
            return None

        gone_after: float | None = None
        # Not a failure here: the negative controls expect the command to outlive watch_s.
        with contextlib.suppress(AssertionError):
            gone_after = await eventually_async(
                gone,
                max(watch_s - (time.monotonic() - started), 0),
                "the command and its orphan to be gone",
                interval=0.05,
            )
        outcome = Outcome(alive, gone_after, child, grandchild)
        if remote is not None:
            outcome.remote_view = (
                await remote_sleeping(remote, child),
                await remote_sleeping(remote, grandchild),
            )
        return outcome
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()
        if not watchdog:
            kill_all(child, grandchild)


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def sigstop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGSTOP)


def assert_ended_by_the_watchdog(outcome: Outcome) -> None:
    assert outcome.alive_after_disruption, "the disruption itself ended the command"
    assert outcome.gone_after_s is not None, "the command outlived its budget"
    assert outcome.gone_after_s <= BUDGET_S + TOLERANCE_S
    if outcome.remote_view is not None:
        assert outcome.remote_view == ("", ""), outcome.remote_view


def assert_survived(outcome: Outcome) -> None:
    assert outcome.alive_after_disruption
    assert outcome.gone_after_s is None, f"gone after {outcome.gone_after_s} s"
    if outcome.remote_view is not None:
        assert all(outcome.remote_view), outcome.remote_view


LOCAL = {"mode": "local"}


async def test_a_local_command_is_gone_at_its_budget_after_the_scheduler_is_sigkilled(
    tmp_path: Path,
) -> None:
    assert_ended_by_the_watchdog(await scenario(tmp_path, LOCAL, sigkill))


async def test_a_local_command_is_gone_at_its_budget_while_the_scheduler_is_stopped(
    tmp_path: Path,
) -> None:
    assert_ended_by_the_watchdog(await scenario(tmp_path, LOCAL, sigstop))


async def test_without_the_watchdog_a_local_command_outlives_a_sigkilled_scheduler(
    tmp_path: Path,
) -> None:
    """Negative control: the checks above can fail."""
    assert_survived(await scenario(tmp_path, LOCAL, sigkill, watchdog=False))


async def test_an_ssh_command_is_gone_at_its_budget_after_the_scheduler_is_sigkilled(
    tmp_path: Path, sshd: SshServer
) -> None:
    assert_ended_by_the_watchdog(await scenario(tmp_path, ssh_spec(sshd), sigkill, remote=sshd))


async def test_an_ssh_command_is_gone_at_its_budget_while_the_scheduler_is_stopped(
    tmp_path: Path, sshd: SshServer
) -> None:
    assert_ended_by_the_watchdog(await scenario(tmp_path, ssh_spec(sshd), sigstop, remote=sshd))


async def test_an_ssh_command_is_gone_at_its_budget_when_the_link_stops_forwarding(
    tmp_path: Path, sshd: SshServer, proxy: Proxy
) -> None:
    outcome = await scenario(
        tmp_path, ssh_spec(sshd, proxy.port), lambda _: proxy.stall(), remote=sshd
    )
    assert_ended_by_the_watchdog(outcome)


async def test_an_ssh_command_is_gone_at_its_budget_when_the_link_is_closed(
    tmp_path: Path, sshd: SshServer, proxy: Proxy
) -> None:
    outcome = await scenario(
        tmp_path, ssh_spec(sshd, proxy.port), lambda _: proxy.close(), remote=sshd
    )
    assert_ended_by_the_watchdog(outcome)


async def test_without_the_watchdog_an_ssh_command_outlives_a_sigkilled_scheduler(
    tmp_path: Path, sshd: SshServer
) -> None:
    """Negative control: the checks above can fail."""
    outcome = await scenario(tmp_path, ssh_spec(sshd), sigkill, watchdog=False, remote=sshd)
    assert_survived(outcome)


async def test_without_the_watchdog_an_ssh_command_outlives_a_stalled_link(
    tmp_path: Path, sshd: SshServer, proxy: Proxy
) -> None:
    """Negative control for the partition: the stalled link alone does not end it."""
    outcome = await scenario(
        tmp_path, ssh_spec(sshd, proxy.port), lambda _: proxy.stall(), watchdog=False, remote=sshd
    )
    assert_survived(outcome)
