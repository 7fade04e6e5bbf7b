"""Targets behind a jump host, through the services, against real OpenSSH: a bastion
that allows forwarding only, and the session's target sshd behind it."""

from __future__ import annotations

import pytest

from fixtures.sshd import SshServer, forwarded_to
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.fields import TargetChanges

pytestmark = pytest.mark.sshd


def add_pair(app: App, actor: Actor, sshd: SshServer, bastion: SshServer) -> None:
    targets.add_target(
        app, actor, bastion.spec("b1", kind=TargetKind.JUMP), trust_on_first_use=True
    )
    targets.add_target(app, actor, sshd.spec("t42", via="b1"), trust_on_first_use=True)


def test_a_target_is_paired_through_its_jump_host(
    app: App, operator: Actor, sshd: SshServer, bastion: SshServer
) -> None:
    before = forwarded_to(bastion, sshd.port)
    add_pair(app, operator, sshd, bastion)
    # The host key fetch and the login (with the zone probe) went through the bastion.
    assert forwarded_to(bastion, sshd.port) >= before + 2


def test_a_bulk_job_skips_the_jump_host(
    app: App, operator: Actor, sshd: SshServer, bastion: SshServer
) -> None:
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "true"), bulk=True)
    add_pair(app, operator, sshd, bastion)
    with app.db.read() as session:
        assert not targets.get_target(session, "b1").assignments
        assert [a.job.name for a in targets.get_target(session, "t42").assignments] == ["reload"]


def test_via_must_name_an_existing_jump_host(
    app: App, operator: Actor, sshd: SshServer, bastion: SshServer
) -> None:
    with pytest.raises(InvalidInput, match="via: there is no target named nope"):
        targets.add_target(app, operator, sshd.spec("t1", via="nope"), verify=False)
    targets.add_target(app, operator, sshd.spec("plain"), verify=False)
    with pytest.raises(InvalidInput, match="via: target plain is of kind ssh, not jump"):
        targets.add_target(app, operator, sshd.spec("t1", via="plain"), verify=False)


def test_a_jump_loop_is_refused_and_nothing_is_saved(
    app: App, operator: Actor, bastion: SshServer
) -> None:
    targets.add_target(app, operator, bastion.spec("b1", kind=TargetKind.JUMP), verify=False)
    targets.add_target(
        app, operator, bastion.spec("b2", kind=TargetKind.JUMP, via="b1"), verify=False
    )
    with pytest.raises(InvalidInput, match="a jump loop: b1 -> b2 -> b1"):
        targets.edit_target(app, operator, "b1", TargetChanges(via="b2"), verify=False)
    with app.db.read() as session:
        assert targets.get_target(session, "b1").via_id is None


def test_a_jump_host_in_use_is_not_unpaired_or_removed(
    app: App, admin: Actor, sshd: SshServer, bastion: SshServer
) -> None:
    add_pair(app, admin, sshd, bastion)
    with pytest.raises(Conflict, match="jump host b1 is still used by 1 target\\(s\\): t42"):
        targets.unpair_target(app, admin, "b1")
    with pytest.raises(Conflict, match="still used by 1 target"):
        targets.remove_target(app, admin, "b1")
    targets.edit_target(app, admin, "t42", TargetChanges(via=""), verify=False)
    targets.unpair_target(app, admin, "b1")  # control: unused now, so it may go
