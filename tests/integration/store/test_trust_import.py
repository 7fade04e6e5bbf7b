"""Pinning many targets from a known_hosts file or ssh-keyscan output, and the trust list."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import select

from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind
from fleetcron.errors import PermissionDenied
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.trust import (
    ABSENT,
    ALREADY,
    CONFLICT,
    NOT_TRUSTED,
    PINNED,
    import_trust,
    trust_states,
)
from fleetcron.store.schema import AuditEvent

pytestmark = pytest.mark.sshd


def keyscan(server: SshServer) -> str:
    """What ``ssh-keyscan`` prints for the server: real OpenSSH output, several key lines
    would be one per type."""
    return subprocess.run(
        ["ssh-keyscan", "-p", str(server.port), "-t", "ed25519", server.host],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def test_keyscan_output_pins_the_targets_without_a_key_and_reports_the_rest(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    targets.add_target(app, operator, sshd.spec("fresh"), verify=False)
    targets.add_target(
        app,
        operator,
        sshd.spec("same", host_key=sshd.host_key_line),
        verify=False,
        allow_same_host=True,
    )
    # A different key already pinned for this address: never replaced by an import.
    targets.add_target(
        app,
        operator,
        sshd.spec("other", host_key=sshd_other_host_key.host_key_line),
        verify=False,
        allow_same_host=True,
    )
    targets.add_target(app, operator, sshd_other_host_key.spec("elsewhere"), verify=False)

    report = import_trust(app, operator, keyscan(sshd))

    outcome = {o.name: o.outcome for o in report.outcomes}
    assert outcome == {"fresh": PINNED, "same": ALREADY, "other": CONFLICT, "elsewhere": ABSENT}
    conflict = next(o for o in report.outcomes if o.name == "other")
    assert conflict.fingerprint == sshd.host_key_fingerprint
    assert conflict.pinned == sshd_other_host_key.host_key_fingerprint
    states = {s.name: s for s in trust_states(app, operator)}
    assert states["fresh"].state == PINNED
    assert states["fresh"].fingerprint == sshd.host_key_fingerprint
    assert states["other"].fingerprint == sshd_other_host_key.host_key_fingerprint
    assert states["elsewhere"].state == NOT_TRUSTED
    with app.db.read() as session:
        pins = session.scalars(
            select(AuditEvent.target_name).where(AuditEvent.action == "target.pin_imported")
        ).all()
    assert pins == ["fresh"]
    # The pinned key is the server's: pairing now succeeds without trust on first use.
    assert targets.pair_target(app, operator, "fresh").target.paired


def test_a_dry_run_pins_nothing(app: App, operator: Actor, sshd: SshServer) -> None:
    targets.add_target(app, operator, sshd.spec("fresh"), verify=False)
    report = import_trust(app, operator, keyscan(sshd), dry_run=True)
    assert [o.outcome for o in report.outcomes] == [PINNED]
    assert [s.state for s in trust_states(app, operator)] == [NOT_TRUSTED]


def test_a_viewer_may_list_but_not_import(app: App, sshd: SshServer, operator: Actor) -> None:
    targets.add_target(app, operator, sshd.spec("fresh", kind=TargetKind.JUMP), verify=False)
    viewer = Actor("val", "viewer")
    assert [s.kind for s in trust_states(app, viewer)] == [TargetKind.JUMP]
    with pytest.raises(PermissionDenied):
        import_trust(app, viewer, keyscan(sshd))
    assert [s.state for s in trust_states(app, viewer)] == [NOT_TRUSTED]
