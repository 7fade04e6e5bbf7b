"""Pairing SSH targets against a real OpenSSH server on loopback."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import ConnectError, HostKeyMismatch, InvalidInput
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import AuditEvent, Target

pytestmark = pytest.mark.sshd


def add_ssh(
    app: App,
    actor: Actor,
    name: str,
    server: SshServer,
    *,
    host_key: str | None = None,
    timezone: str | None = None,
    verify: bool = True,
    trust_on_first_use: bool = False,
    allow_same_host: bool = False,
) -> targets.PairResult:
    return targets.add_target(
        app,
        actor,
        server.spec(name, host_key=host_key, timezone=timezone),
        verify=verify,
        trust_on_first_use=trust_on_first_use,
        allow_same_host=allow_same_host,
    )


def test_trust_on_first_use_pins_the_offered_host_key(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    assert result.trusted_on_first_use
    assert result.host_key_fingerprint == sshd.host_key_fingerprint
    assert result.target.paired


def test_an_explicit_host_key_pairs_without_trusting_on_first_use(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "pbx1", sshd, host_key=sshd.host_key_line)

    assert not result.trusted_on_first_use
    assert result.target.paired


def test_a_host_key_mismatch_fails_the_pair_and_leaves_the_target_unpaired(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd_other_host_key, host_key=sshd.host_key_line, verify=False)

    with pytest.raises(HostKeyMismatch):
        targets.pair_target(app, operator, "pbx1")

    the_target, _ = target_reads.show_target(app, operator, "pbx1")
    assert not the_target.paired
    with app.db.read() as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "target.pair")).one()
    assert not event.success
    assert "mismatch" in event.detail["error"]


def test_a_pinned_key_is_checked_again_at_re_pair(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)
    with app.db.session() as session:
        row = session.scalars(select(Target).where(Target.name == "pbx1")).one()
        row.port = sshd_other_host_key.port  # the host now answers with another key

    with pytest.raises(HostKeyMismatch):
        targets.pair_target(app, operator, "pbx1")


def test_without_a_host_key_or_trust_on_first_use_pairing_is_refused(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    with pytest.raises(InvalidInput, match="no pinned host key"):
        add_ssh(app, operator, "pbx1", sshd)


def test_a_closed_port_fails_the_pair_with_a_connect_error(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    targets.add_target(
        app,
        operator,
        TargetSpec(
            "gone",
            host="127.0.0.1",
            port=1,
            user=sshd.user,
            private_key=sshd.client_private_key.encode(),
            host_key=sshd.host_key_line,
        ),
        verify=False,
    )

    with pytest.raises(ConnectError):
        targets.pair_target(app, operator, "gone")


def test_pairing_extends_existing_bulk_jobs_before_the_pair_event(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("local1", TargetKind.LOCAL))
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "true"), bulk=True)

    result = add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    assert result.extended_jobs == ("reload",)
    with app.db.read() as session:
        actions = session.scalars(
            select(AuditEvent.action)
            .where(AuditEvent.target_name == "pbx1")
            .order_by(AuditEvent.id)
        ).all()
    assert actions == ["target.add", "job.extend", "target.pair"]


def test_the_private_key_is_stored_encrypted(app: App, operator: Actor, sshd: SshServer) -> None:
    add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    with app.db.read() as session:
        stored = session.scalars(select(Target.private_key_enc).where(Target.name == "pbx1")).one()
    assert stored is not None
    assert sshd.client_private_key.encode() not in stored
    assert app.master_key.decrypt(stored).reveal() == sshd.client_private_key.encode()


def test_a_target_repr_and_audit_never_show_the_private_key(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    body = sshd.client_private_key.splitlines()[1]
    assert body not in repr(result.target)
    with app.db.read() as session:
        details = [str(e.detail) for e in session.scalars(select(AuditEvent))]
    assert not any(body in d for d in details)


def test_a_target_whose_pairing_fails_at_add_is_kept_and_the_message_says_so(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    with pytest.raises(ConnectError, match=r"target gone was added but not paired: "):
        targets.add_target(
            app,
            operator,
            TargetSpec(
                "gone",
                host="127.0.0.1",
                port=1,
                user=sshd.user,
                private_key=sshd.client_private_key.encode(),
                host_key=sshd.host_key_line,
            ),
        )

    the_target, _ = target_reads.show_target(app, operator, "gone")
    assert not the_target.paired
