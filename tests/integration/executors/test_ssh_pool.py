"""Connection pool behaviour of SshExecutor: expiry, capacity, handshake bursts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

import asyncssh
import pytest

from fixtures.sshd import SshServer, running_sshd
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget

pytestmark = pytest.mark.sshd

KEYS = 8


@pytest.fixture(scope="module")
def client_keys() -> list[asyncssh.SSHKey]:
    return [asyncssh.generate_private_key("ssh-ed25519") for _ in range(KEYS)]


@pytest.fixture(scope="module")
def strict_sshd(
    tmp_path_factory: pytest.TempPathFactory, client_keys: list[asyncssh.SSHKey]
) -> Iterator[SshServer]:
    """An sshd that drops every unauthenticated connection beyond two (like a busy host)."""
    public = [key.export_public_key("openssh").decode() for key in client_keys]
    with running_sshd(
        tmp_path_factory.mktemp("sshd-strict"),
        authorized_keys=public,
        settings={"MaxStartups": "2:100:2"},
    ) as server:
        yield server


def targets(server: SshServer, keys: list[asyncssh.SSHKey]) -> list[SshTarget]:
    """One target per client key, so each needs a connection of its own."""
    return [
        SshTarget(
            name=f"t{i}",
            host=server.host,
            port=server.port,
            user=server.user,
            private_key=key.export_private_key("openssh"),
            host_key=server.host_key_line,
        )
        for i, key in enumerate(keys)
    ]


async def test_a_burst_of_handshakes_beyond_max_startups_is_retried_until_all_succeed(
    strict_sshd: SshServer, client_keys: list[asyncssh.SSHKey], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fleetcron.executors.ssh")
    executor = SshExecutor(connect_attempts=8, connect_backoff_s=0.05)
    try:
        results = await asyncio.gather(
            *(executor.run(t, ExecRequest("true")) for t in targets(strict_sshd, client_keys))
        )
    finally:
        await executor.close()
    assert [r.status for r in results] == ["succeeded"] * KEYS
    assert executor.connections_opened == KEYS
    retries = [r for r in caplog.records if getattr(r, "action", "") == "ssh.connect_retry"]
    assert retries, "sshd dropped nothing: the burst did not exercise the retry"


async def test_an_idle_connection_expires_and_the_next_run_reconnects(
    sshd: SshServer, client_keys: list[asyncssh.SSHKey], make_target: Callable[..., SshTarget]
) -> None:
    executor = SshExecutor(idle_timeout_s=0.2)
    target = make_target(sshd)
    try:
        await executor.run(target, ExecRequest("true"))
        await asyncio.sleep(0.3)
        await executor.run(target, ExecRequest("true"))
    finally:
        await executor.close()
    assert executor.connections_opened == 2


async def test_the_pool_closes_the_idle_connection_to_make_room(
    strict_sshd: SshServer, client_keys: list[asyncssh.SSHKey]
) -> None:
    executor = SshExecutor(max_concurrency=1, max_connections=1)
    first, second = targets(strict_sshd, client_keys)[:2]
    try:
        for target in (first, second, first):
            result = await executor.run(target, ExecRequest("true"))
            assert result.status == "succeeded"
            assert executor.pooled_connections == 1
    finally:
        await executor.close()
    assert executor.connections_opened == 3
