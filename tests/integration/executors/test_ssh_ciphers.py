"""The cipher an SSH connection negotiates with a real sshd: AES-GCM when the server
allows it (asyncssh's ChaCha20-Poly1305 costs six times its CPU a packet), any of the
other ciphers offered when the server allows only those, and a run that ends
``connect_error`` when the server allows none of them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from fleetcron.executors.ssh_connect import CIPHERS, import_private_key, open_pinned

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def restricted(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[dict[str, SshServer]]:
    """Two servers by the one cipher each allows: ChaCha20-Poly1305 (offered, not first)
    and AES-128-CBC (never offered)."""
    allowed = {"chacha": "chacha20-poly1305@openssh.com", "cbc": "aes128-cbc"}
    with contextlib.ExitStack() as servers:
        yield {
            name: servers.enter_context(
                running_sshd(
                    tmp_path_factory.mktemp(f"sshd-{name}"),
                    authorized_keys=[sshd_client_key.public_key_line],
                    client_key=sshd_client_key,
                    settings={"Ciphers": cipher},
                )
            )
            for name, cipher in allowed.items()
        }


async def negotiated(target: SshTarget) -> tuple[str, str]:
    """The ciphers (to the server, from it) of a connection as the executor opens it."""
    conn, _ = await open_pinned(target, import_private_key(target), 10)
    ciphers = (conn.get_extra_info("send_cipher"), conn.get_extra_info("recv_cipher"))
    conn.close()
    await conn.wait_closed()
    return ciphers


async def test_a_server_allowing_aes_gcm_is_spoken_to_in_aes_gcm(
    sshd: SshServer, make_target: Callable[..., SshTarget]
) -> None:
    aes = "aes128-gcm@openssh.com"
    assert await negotiated(make_target(sshd)) == (aes, aes)


async def test_a_server_allowing_only_chacha20_is_still_reached_and_runs_commands(
    restricted: dict[str, SshServer], make_target: Callable[..., SshTarget]
) -> None:
    target = make_target(restricted["chacha"])
    assert await negotiated(target) == (
        "chacha20-poly1305@openssh.com",
        "chacha20-poly1305@openssh.com",
    )
    executor = SshExecutor()
    try:
        result = await executor.run(target, ExecRequest("echo reached"))
    finally:
        await executor.close()
    assert (result.status, result.stdout.head) == ("succeeded", "reached\n")


async def test_control_a_run_on_a_server_allowing_no_offered_cipher_ends_connect_error(
    restricted: dict[str, SshServer], make_target: Callable[..., SshTarget]
) -> None:
    """sshd closes the connection when no cipher matches; asyncssh reports either the
    mismatch or the lost connection, whichever it reads first (a lost handshake is retried
    as a dropped one, until the run's budget): either way nothing runs."""
    server = restricted["cbc"]
    assert "aes128-cbc" not in CIPHERS
    executor = SshExecutor(connect_backoff_s=0.05)
    try:
        result = await executor.run(make_target(server), ExecRequest("true", timeout_s=1))
    finally:
        await executor.close()
    assert result.status == "connect_error", result
    assert f"127.0.0.1:{server.port}" in (result.error or ""), result.error
    assert executor.connections_opened == 0
