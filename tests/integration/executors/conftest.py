"""Targets and executors shared by the executor tests."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from fixtures.sshd import SshServer
from fleetcron.executors import SshExecutor, SshTarget


def target_for(
    server: SshServer, *, host_key: str | None = None, key: str | None = None
) -> SshTarget:
    """A target logging in to ``server``, optionally pinning another host key or client key."""
    return SshTarget(
        name=f"test-{server.port}",
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=key if key is not None else server.client_private_key,
        host_key=host_key if host_key is not None else server.host_key_line,
    )


@pytest.fixture
def target(sshd: SshServer) -> SshTarget:
    return target_for(sshd)


@pytest.fixture
async def executor() -> AsyncIterator[SshExecutor]:
    ssh = SshExecutor(kill_grace_s=1.0)
    try:
        yield ssh
    finally:
        await ssh.close()


TargetFactory = Callable[..., SshTarget]


@pytest.fixture
def make_target() -> TargetFactory:
    """``target_for`` as a fixture: ``make_target(server, host_key=..., key=...)``."""
    return target_for


@pytest.fixture
def free_port() -> Iterator[int]:
    """A loopback port nothing listens on, held bound (never listened) for the whole test:
    a connection to it is refused, and no other process (another worker's sshd) can take
    it meanwhile, as it could a port bound and released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
