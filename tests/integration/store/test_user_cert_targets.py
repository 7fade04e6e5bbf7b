"""Targets logging in with an OpenSSH user certificate, through the services, against an
sshd that trusts only the user CA: stored encrypted, checked before it is stored (expired,
another key), and its expiry shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.sshd import ClientKey, SshServer, generate_client_key, user_cert_for
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.fields import TargetChanges
from fleetcron.services.targets.trust import trust_states
from fleetcron.store.schema import Target

pytestmark = pytest.mark.sshd

#: Valid both at the app's test clock (March 2026) and at the real time sshd checks.
VALID = "20260101:20280101"


def spec(server: SshServer, cert: str) -> TargetSpec:
    return TargetSpec(
        "pbx1",
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=server.client_private_key.encode(),
        host_key=server.host_key_line,
        client_cert=cert.encode(),
    )


def test_a_target_with_a_user_certificate_is_paired_and_the_certificate_kept_encrypted(
    app: App,
    operator: Actor,
    ca_only_sshd: SshServer,
    sshd_client_key: ClientKey,
    user_ca: tuple[Path, str],
    tmp_path: Path,
) -> None:
    cert = user_cert_for(
        sshd_client_key, user_ca, tmp_path, principals=ca_only_sshd.user, validity=VALID
    )
    result = targets.add_target(app, operator, spec(ca_only_sshd, cert))

    assert result.target.paired
    expires = result.target.client_cert_expires_at
    assert expires is not None
    with app.db.read() as session:
        stored = session.scalars(select(Target.client_cert_enc)).one()
    assert stored is not None and cert.split()[1].encode() not in stored
    [state] = trust_states(app, operator)
    assert state.client_cert_expires_at == expires


def test_without_its_certificate_the_same_key_does_not_pair(
    app: App, operator: Actor, ca_only_sshd: SshServer
) -> None:
    """Control for the test above: the server accepts the certificate, not the key."""
    with pytest.raises(Exception, match=r"refused the key|could not reach or authenticate"):
        targets.add_target(
            app, operator, ca_only_sshd.spec("pbx1", host_key=ca_only_sshd.host_key_line)
        )


def test_an_expired_certificate_is_refused_naming_the_field_and_nothing_is_saved(
    app: App,
    operator: Actor,
    ca_only_sshd: SshServer,
    sshd_client_key: ClientKey,
    user_ca: tuple[Path, str],
    tmp_path: Path,
) -> None:
    cert = user_cert_for(
        sshd_client_key,
        user_ca,
        tmp_path,
        principals=ca_only_sshd.user,
        validity="20250101:20250102",
    )
    with pytest.raises(InvalidInput, match=r"client_cert: the certificate .* expired at") as info:
        targets.add_target(app, operator, spec(ca_only_sshd, cert))
    assert info.value.field == "client_cert"
    assert trust_states(app, operator) == []


def test_a_certificate_for_another_key_is_refused(
    app: App, operator: Actor, ca_only_sshd: SshServer, user_ca: tuple[Path, str], tmp_path: Path
) -> None:
    stranger = generate_client_key(tmp_path, "stranger")
    cert = user_cert_for(stranger, user_ca, tmp_path, principals=ca_only_sshd.user, validity=VALID)
    with pytest.raises(InvalidInput, match="for another key than the target's private key"):
        targets.add_target(app, operator, spec(ca_only_sshd, cert))


def test_a_renewed_certificate_is_checked_and_saved_by_an_edit(
    app: App,
    operator: Actor,
    ca_only_sshd: SshServer,
    sshd_client_key: ClientKey,
    user_ca: tuple[Path, str],
    tmp_path: Path,
) -> None:
    first = user_cert_for(
        sshd_client_key, user_ca, tmp_path, principals=ca_only_sshd.user, validity=VALID
    )
    targets.add_target(app, operator, spec(ca_only_sshd, first))
    renewed = user_cert_for(
        sshd_client_key,
        user_ca,
        tmp_path,
        principals=ca_only_sshd.user,
        validity="20260101:20290101",
    )
    result = targets.edit_target(app, operator, "pbx1", TargetChanges(client_cert=renewed.encode()))
    assert result.verified
    assert "client_cert" in result.changed and "client_cert_expires_at" in result.changed
