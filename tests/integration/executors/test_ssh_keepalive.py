"""A pooled SSH connection whose server went silent (``FLEETCRON_SSH_KEEPALIVE_S``).

The server's side of the connection is paused (SIGSTOP of the sshd processes serving it,
not of the listener): the TCP connection stays open and nothing answers, as behind a cut
link. With keepalives the connection is closed after three unanswered ones and the next
run gets a new connection; the control, with none, keeps holding the silent connection,
which the pool would hand to the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator

import pytest

from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from waiting import eventually_async

pytestmark = pytest.mark.sshd

KEEPALIVE_S = 0.3


@pytest.fixture
def own_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    """A server of this test's own: its connections' processes are paused."""
    with running_sshd(
        tmp_path_factory.mktemp("sshd-keepalive"),
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
    ) as server:
        yield server


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (the sshd processes serving its connections)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@contextlib.contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)


async def pooled_then_silenced(
    keepalive_s: float, target: SshTarget, server: SshServer
) -> tuple[SshExecutor, list[int]]:
    executor = SshExecutor()
    executor.pool.keep_alive_every(keepalive_s)
    first = await executor.run(target, ExecRequest("true"))
    assert first.status == "succeeded", first
    serving = descendants(server.pid)
    assert serving, "no sshd process serves the pooled connection"
    return executor, serving


async def test_a_silent_server_is_noticed_by_keepalives_and_the_next_run_reconnects(
    own_sshd: SshServer, make_target: Callable[..., SshTarget]
) -> None:
    target = make_target(own_sshd)
    executor, serving = await pooled_then_silenced(KEEPALIVE_S, target, own_sshd)
    try:
        with paused(serving):
            (conn,) = executor.pool.connections()
            await eventually_async(
                conn.is_closed,
                20 * KEEPALIVE_S,
                "the silent connection closed after three unanswered keepalives",
            )
            again = await executor.run(target, ExecRequest("echo again"))
        assert (again.status, again.stdout.head) == ("succeeded", "again\n"), again
        assert executor.pool.connections_opened == 2
    finally:
        await executor.close()


async def test_control_without_keepalives_the_silent_connection_is_kept(
    own_sshd: SshServer, make_target: Callable[..., SshTarget]
) -> None:
    """The check above can fail: with none, nothing notices the silent server."""
    target = make_target(own_sshd)
    executor, serving = await pooled_then_silenced(0, target, own_sshd)
    try:
        with paused(serving):
            (conn,) = executor.pool.connections()
            await asyncio.sleep(20 * KEEPALIVE_S)  # the window the keepalives closed it in
            assert not conn.is_closed()
            assert executor.pool.connections_opened == 1
    finally:
        await executor.close()
