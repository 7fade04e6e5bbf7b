"""Logging in with an OpenSSH user certificate against a real sshd that trusts only the
user CA (``TrustedUserCAKeys``, no authorized keys): certificates made with
``ssh-keygen -s``; an expired one and one for another user are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.sshd import ClientKey, SshServer, user_cert_for
from fleetcron.errors import AuthError
from fleetcron.executors import SshTarget
from fleetcron.executors.ssh_connect import verify_target

pytestmark = pytest.mark.sshd


def target(server: SshServer, cert: str) -> SshTarget:
    return SshTarget(
        name="t1",
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=server.client_private_key,
        host_key=server.host_key_line,
        client_cert=cert,
    )


async def test_a_user_certificate_logs_in_where_the_bare_key_is_refused(
    ca_only_sshd: SshServer, sshd_client_key: ClientKey, user_ca: tuple[Path, str], tmp_path: Path
) -> None:
    cert = user_cert_for(
        sshd_client_key, user_ca, tmp_path, principals=ca_only_sshd.user, validity="-5m:+1h"
    )
    assert await verify_target(target(ca_only_sshd, cert), 10) is None
    # Control: the same key without its certificate is refused.
    with pytest.raises(AuthError, match="the server refused the key"):
        await verify_target(target(ca_only_sshd, ""), 10)


async def test_an_expired_certificate_is_refused_before_connecting(
    ca_only_sshd: SshServer, sshd_client_key: ClientKey, user_ca: tuple[Path, str], tmp_path: Path
) -> None:
    cert = user_cert_for(
        sshd_client_key, user_ca, tmp_path, principals=ca_only_sshd.user, validity="-2h:-1h"
    )
    with pytest.raises(AuthError, match=r"user certificate of target t1 .* expired at"):
        await verify_target(target(ca_only_sshd, cert), 10)


async def test_a_certificate_for_another_user_is_refused_by_the_server(
    ca_only_sshd: SshServer, sshd_client_key: ClientKey, user_ca: tuple[Path, str], tmp_path: Path
) -> None:
    cert = user_cert_for(
        sshd_client_key, user_ca, tmp_path, principals="someone-else", validity="-5m:+1h"
    )
    with pytest.raises(AuthError, match="the server refused the key"):
        await verify_target(target(ca_only_sshd, cert), 10)
