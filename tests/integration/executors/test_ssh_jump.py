"""Jump hosts against real OpenSSH: a bastion sshd that allows forwarding only (every
command is refused there) in front of the session's target sshd.

That a run went through the bastion is read from the bastion's own log (its
``direct-tcpip`` channel to the target's port); the negative controls show a target that
is reachable directly is still not reached directly when its jump host refuses to
forward, or is down, and that the failure names the hop."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from fixtures.sshd import BASTION_SETTINGS, ClientKey, SshServer, forwarded_to, running_sshd
from fleetcron.errors import ConnectError
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from fleetcron.executors.ssh_jump import fetch_host_key_via, login_via, verify_via

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def closed_bastion(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    """A bastion that refuses to forward anything."""
    with running_sshd(
        tmp_path_factory.mktemp("bastion-closed"),
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
        settings={**BASTION_SETTINGS, "AllowTcpForwarding": "no"},
    ) as server:
        yield server


def target_for(server: SshServer) -> SshTarget:
    return SshTarget(
        name=f"test-{server.port}",
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=server.client_private_key,
        host_key=server.host_key_line,
    )


def jump(server: SshServer, name: str = "b1") -> SshTarget:
    return dataclasses.replace(target_for(server), name=name)


def behind(target: SshServer, bastion: SshServer, name: str = "t42") -> SshTarget:
    return dataclasses.replace(target_for(target), name=name, via=(jump(bastion),))


async def test_a_run_goes_through_the_bastion(sshd: SshServer, bastion: SshServer) -> None:
    before = forwarded_to(bastion, sshd.port)
    executor = SshExecutor(kill_grace_s=1.0)
    try:
        result = await executor.run(behind(sshd, bastion), ExecRequest("echo through"))
    finally:
        await executor.close()
    assert result.status == "succeeded", result.error
    assert result.stdout.head == "through\n"
    assert forwarded_to(bastion, sshd.port) == before + 1


async def test_targets_behind_one_bastion_share_its_connection(
    sshd: SshServer, bastion: SshServer
) -> None:
    executor = SshExecutor(kill_grace_s=1.0)
    one = behind(sshd, bastion, "t1")
    # Another spelling of the address is another pooled target connection.
    other = dataclasses.replace(behind(sshd, bastion, "t2"), host="localhost")
    try:
        for target in (one, other, one, other):
            result = await executor.run(target, ExecRequest("true"))
            assert result.status == "succeeded", result.error
        assert executor.pool.jumps.connections_opened == 1
        assert executor.pool.jumps.open_count(one.via) == 1
        assert executor.connections_opened == 2  # each target once (the bastion apart)
    finally:
        await executor.close()


async def test_a_bastion_that_does_not_forward_fails_the_run_and_never_goes_direct(
    sshd: SshServer, closed_bastion: SshServer
) -> None:
    """Negative control: the target itself is reachable directly, yet is not reached."""
    executor = SshExecutor(kill_grace_s=1.0, connect_attempts=1)
    try:
        direct = await executor.run(target_for(sshd), ExecRequest("true"))
        assert direct.status == "succeeded"
        result = await executor.run(behind(sshd, closed_bastion), ExecRequest("true"))
    finally:
        await executor.close()
    assert result.status == "connect_error"
    assert result.error is not None
    assert "target t42 (via b1)" in result.error


async def test_a_bastion_that_is_down_is_named_as_the_hop_that_fails(
    sshd: SshServer, free_port: int
) -> None:
    down = dataclasses.replace(target_for(sshd), name="b1", port=free_port)
    target = dataclasses.replace(target_for(sshd), name="t42", via=(down,))
    executor = SshExecutor(kill_grace_s=1.0, connect_attempts=1)
    try:
        result = await executor.run(target, ExecRequest("true"))
    finally:
        await executor.close()
    assert result.status == "connect_error"
    assert result.error is not None
    assert result.error.startswith("jump host b1: connection refused"), result.error
    assert "t42" not in result.error


async def test_pairing_checks_go_through_the_chain(sshd: SshServer, bastion: SshServer) -> None:
    target = behind(sshd, bastion)
    before = forwarded_to(bastion, sshd.port)
    assert await fetch_host_key_via(target.via, sshd.host, sshd.port, 10) == sshd.host_key_line
    assert await verify_via(target, 10) is None
    # A jump host is checked by logging in only: it runs no commands.
    await login_via(jump(bastion), 10)
    assert forwarded_to(bastion, sshd.port) == before + 2


async def test_a_target_with_a_jump_host_is_never_connected_to_directly(sshd: SshServer) -> None:
    from fleetcron.executors.ssh_connect import import_private_key, open_pinned

    target = behind(sshd, sshd)
    with pytest.raises(ConnectError, match="never connected to directly"):
        await open_pinned(target, import_private_key(target), 5)
