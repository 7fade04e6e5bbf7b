"""Host trust by a host CA (``@cert-authority`` semantics) against real OpenSSH: host
certificates made with ``ssh-keygen -s`` in the fixtures; an unsigned host key, a wrong
principal, an expired certificate and a revoked key are refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import ClientKey, SshServer, new_ca, running_sshd, sign_host_key
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetSpec
from fleetcron.errors import HostKeyMismatch, InvalidInput
from fleetcron.executors import SshTarget
from fleetcron.executors.ssh_connect import verify_target
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.trust import CA_TRUSTED, trust_states

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return new_ca(tmp_path_factory.mktemp("host-ca"))


def certified_sshd(
    workdir: Path, client: ClientKey, ca: tuple[Path, str], **signing: str
) -> Iterator[SshServer]:
    with running_sshd(
        workdir,
        authorized_keys=[client.public_key_line],
        client_key=client,
        certify_host=lambda pub: sign_host_key(ca[0], pub, **signing),
    ) as server:
        yield server


@pytest.fixture(scope="module")
def signed(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey, ca: tuple[Path, str]
) -> Iterator[SshServer]:
    yield from certified_sshd(
        tmp_path_factory.mktemp("signed"), sshd_client_key, ca, principals="127.0.0.1"
    )


@pytest.fixture(scope="module")
def wrong_principal(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey, ca: tuple[Path, str]
) -> Iterator[SshServer]:
    yield from certified_sshd(
        tmp_path_factory.mktemp("wrong"), sshd_client_key, ca, principals="pbx9.example"
    )


@pytest.fixture(scope="module")
def expired(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey, ca: tuple[Path, str]
) -> Iterator[SshServer]:
    yield from certified_sshd(
        tmp_path_factory.mktemp("expired"),
        sshd_client_key,
        ca,
        principals="127.0.0.1",
        validity="-2h:-1h",
    )


def by_ca(server: SshServer, host_ca: str) -> SshTarget:
    return SshTarget(
        name="t1",
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=server.client_private_key,
        host_key="",
        host_ca=host_ca,
    )


def check(target: SshTarget) -> None:
    asyncio.run(verify_target(target, 10))


def test_a_host_certificate_from_the_ca_is_trusted(signed: SshServer, ca: tuple[Path, str]) -> None:
    check(by_ca(signed, ca[1]))


def test_an_unsigned_host_key_is_refused_under_ca_trust(
    sshd: SshServer, ca: tuple[Path, str]
) -> None:
    with pytest.raises(HostKeyMismatch, match="presented no valid certificate from its host CA"):
        check(by_ca(sshd, ca[1]))


def test_a_certificate_for_another_principal_is_refused(
    wrong_principal: SshServer, ca: tuple[Path, str]
) -> None:
    with pytest.raises(HostKeyMismatch, match=r"for the name 127\.0\.0\.1"):
        check(by_ca(wrong_principal, ca[1]))


def test_an_expired_certificate_is_refused(expired: SshServer, ca: tuple[Path, str]) -> None:
    with pytest.raises(HostKeyMismatch, match="host not trusted"):
        check(by_ca(expired, ca[1]))


def test_a_revoked_host_key_is_refused_though_its_certificate_is_valid(
    signed: SshServer, ca: tuple[Path, str]
) -> None:
    with pytest.raises(HostKeyMismatch, match="host not trusted"):
        check(by_ca(signed, f"{ca[1]}\n@revoked {signed.host_key_line}"))


def test_another_ca_is_not_trusted(signed: SshServer, tmp_path: Path) -> None:
    _, other = new_ca(tmp_path, "other_ca")
    with pytest.raises(HostKeyMismatch, match="host not trusted"):
        check(by_ca(signed, other))


def test_a_target_trusted_by_its_ca_is_paired_without_a_pinned_key(
    app: App, operator: Actor, signed: SshServer, ca: tuple[Path, str]
) -> None:
    spec = TargetSpec(
        "pbx1",
        host=signed.host,
        port=signed.port,
        user=signed.user,
        private_key=signed.client_private_key.encode(),
        host_ca=f"@cert-authority * {ca[1]} the-ca",
    )
    result = targets.add_target(app, operator, spec)

    assert result.target.paired
    assert result.target.host_key is None
    assert result.target.host_ca == ca[1]
    [state] = trust_states(app, operator)
    assert state.state == CA_TRUSTED


def test_a_ca_line_that_is_not_a_key_is_refused_naming_the_field(
    app: App, operator: Actor, signed: SshServer
) -> None:
    spec = TargetSpec(
        "pbx1",
        host=signed.host,
        port=signed.port,
        user=signed.user,
        private_key=signed.client_private_key.encode(),
        host_ca="ssh-ed25519 not-a-key",
    )
    with pytest.raises(InvalidInput) as info:
        targets.add_target(app, operator, spec)
    assert info.value.field == "host_ca"
    assert trust_states(app, operator) == []
