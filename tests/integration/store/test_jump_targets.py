"""Targets behind a jump host, through the services, against real OpenSSH: a bastion
that allows forwarding only, and the session's target sshd behind it."""

from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import replace

import pytest

from fixtures.app import FakeClock
from fixtures.sshd import SshServer, forwarded_to
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.executors.base import ExecRequest, ExecResult
from fleetcron.executors.kinds import standard_executors
from fleetcron.scheduler.run_request import run_target
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import pairing
from fleetcron.services.targets.fields import TargetChanges
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import DEFAULT_PROJECT_ID

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
        assert not targets.get_target(session, "b1", DEFAULT_PROJECT_ID).assignments
        assert [
            a.job.name for a in targets.get_target(session, "t42", DEFAULT_PROJECT_ID).assignments
        ] == ["reload"]


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
        assert targets.get_target(session, "b1", DEFAULT_PROJECT_ID).via_id is None


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


def test_a_claimed_run_goes_through_the_jump_host_chain(
    app: App, admin: Actor, clock: FakeClock, sshd: SshServer, bastion: SshServer
) -> None:
    """The run store hands the scheduler the chain (b0 -> b1) and the standard SSH
    executor runs the command through both bastions, never directly."""
    targets.add_target(
        app, admin, bastion.spec("b0", kind=TargetKind.JUMP), trust_on_first_use=True
    )
    targets.add_target(
        app,
        admin,
        bastion.spec("b1", kind=TargetKind.JUMP, via="b0"),
        trust_on_first_use=True,
        allow_same_host=True,
    )
    targets.add_target(app, admin, sshd.spec("t42", via="b1"), trust_on_first_use=True)
    jobs.add_job(app, admin, "hello", JobSpec("* * * * *", "echo hi"), target="t42")
    store = RunStore(app.db, node="test", clock=clock)
    clock.advance(minutes=1)
    [dispatch] = store.claim_due(clock.now).dispatches
    assert [hop.name for hop in dispatch.via] == ["b0", "b1"]

    before_target = forwarded_to(bastion, sshd.port)
    before_bastion = forwarded_to(bastion, bastion.port)

    async def run() -> ExecResult:
        table = standard_executors(
            app.settings, clock, lambda enc: app.master_key.decrypt(enc).reveal()
        )
        ssh = table[TargetKind.SSH]
        try:
            return await ssh.run(run_target(dispatch), ExecRequest("echo hi"))
        finally:
            await ssh.close()

    result = asyncio.run(run())
    assert result.status == "succeeded", result.error
    assert result.stdout.head == "hi\n"
    # b0 forwarded to b1 (the same sshd here), and b1 to the target.
    assert forwarded_to(bastion, bastion.port) == before_bastion + 1
    assert forwarded_to(bastion, sshd.port) == before_target + 1


@pytest.mark.parametrize("second_hop", ["private", "public"])
def test_refusing_private_hosts_checks_every_hop_of_the_chain(
    app: App,
    admin: Actor,
    sshd: SshServer,
    bastion: SshServer,
    monkeypatch: pytest.MonkeyPatch,
    second_hop: str,
) -> None:
    """``ssh_refuse_private_hosts`` checks each hop of b1 -> b2 -> t42, not only the one
    reached directly. Loopback stands for both networks here: b2's host is written
    ``localhost`` and the resolver the check asks says that name is private and
    127.0.0.1 public. The control (b2 public too) pairs through the real chain, so the
    refusal is b2's address, not the setting refusing everything; b1, the first hop, is
    public in both, so a check of the first hop only would let the private b2 pass."""
    addresses = {
        "127.0.0.1": "93.184.216.34",
        "localhost": "10.20.0.7" if second_hop == "private" else "93.184.216.35",
    }
    monkeypatch.setattr(
        pairing, "resolve_host", lambda host: [ipaddress.ip_address(addresses[host])]
    )
    targets.add_target(
        app, admin, bastion.spec("b1", kind=TargetKind.JUMP), trust_on_first_use=True
    )
    b2 = replace(bastion.spec("b2", kind=TargetKind.JUMP, via="b1"), host="localhost")
    targets.add_target(app, admin, b2, trust_on_first_use=True, allow_same_host=True)
    targets.add_target(app, admin, sshd.spec("t42", via="b2"), verify=False)
    app.settings = app.settings.model_copy(update={"ssh_refuse_private_hosts": True})
    before = forwarded_to(bastion, sshd.port)

    if second_hop == "public":
        targets.pair_target(app, admin, "t42", trust_on_first_use=True)
        assert forwarded_to(bastion, sshd.port) > before
        return
    with pytest.raises(InvalidInput) as refused:
        targets.pair_target(app, admin, "t42", trust_on_first_use=True)
    assert refused.value.field == "via" and refused.value.value == "b2"
    assert "jump host b2 on the way to t42: host: localhost is a non-public address" in str(
        refused.value
    )
    assert forwarded_to(bastion, sshd.port) == before  # refused before any connection
    with app.db.read() as session:
        t42 = targets.get_target(session, "t42", DEFAULT_PROJECT_ID)
        assert not t42.paired and t42.host_key is None
