"""Pairing helpers against a real sshd: fetch and fingerprint its key, verify a target."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.sshd import ClientKey, SshServer, generate_client_key
from fleetcron.errors import AuthError, ConnectError, HostKeyMismatch
from fleetcron.executors import SshTarget, fetch_host_key, fingerprint, verify_target

pytestmark = pytest.mark.sshd

TargetFactory = Callable[..., SshTarget]


@pytest.fixture(scope="module")
def stranger_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return generate_client_key(tmp_path_factory.mktemp("stranger-pairing"))


async def test_fetch_host_key_returns_the_key_the_server_presents(sshd: SshServer) -> None:
    assert await fetch_host_key(sshd.host, sshd.port) == sshd.host_key_line


async def test_fetch_host_key_on_a_closed_port_raises_a_connect_error(free_port: int) -> None:
    with pytest.raises(ConnectError, match="connection refused"):
        await fetch_host_key("127.0.0.1", free_port)


def test_the_fingerprint_matches_ssh_keygen(sshd: SshServer, tmp_path: Path) -> None:
    pub = tmp_path / "host.pub"
    pub.write_text(sshd.host_key_line + "\n")
    keygen = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert fingerprint(sshd.host_key_line) == keygen


async def test_verify_target_accepts_a_correctly_paired_target(
    sshd: SshServer, make_target: TargetFactory
) -> None:
    assert await verify_target(make_target(sshd)) is None


async def test_verify_target_raises_on_a_host_key_mismatch(
    sshd: SshServer, sshd_other_host_key: SshServer, make_target: TargetFactory
) -> None:
    impostor = make_target(sshd_other_host_key, host_key=sshd.host_key_line)
    with pytest.raises(HostKeyMismatch) as info:
        await verify_target(impostor)
    assert sshd_other_host_key.host_key_fingerprint in info.value.message


async def test_verify_target_raises_when_the_key_is_refused(
    sshd: SshServer, stranger_key: ClientKey, make_target: TargetFactory
) -> None:
    with pytest.raises(AuthError, match=f"authentication failed for user {sshd.user}"):
        await verify_target(make_target(sshd, key=stranger_key.private_key))


async def test_verify_target_raises_for_a_private_key_that_does_not_parse(
    sshd: SshServer, make_target: TargetFactory
) -> None:
    with pytest.raises(AuthError, match="cannot be used"):
        await verify_target(make_target(sshd, key="not a key"))
