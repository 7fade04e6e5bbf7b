"""The host probe of targets behind a jump host, against real OpenSSH: a bastion of the
test's own (so it can be stopped) that allows forwarding only, and the session's target sshd
behind it.

That a probe went through the bastion is read from the bastion's own log (its
``direct-tcpip`` channel to the target's port). Once the bastion is down, the targets
behind it record the state with the hop named, and one host incident opens: the bastion's.
The negative controls: the target is reachable directly all along (so "refused" proves it
was not connected to directly), and a target reached directly that is down opens its own
incident (so the count is not one because no target opens any).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fixtures.sshd import BASTION_SETTINGS, ClientKey, SshServer, forwarded_to, running_sshd
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind
from fleetcron.executors.ssh_probe import probe
from fleetcron.scheduler.probes import HostProber
from fleetcron.services.alerts.host_incidents import (
    behind_down,
    host_mutes,
    sync_host_incidents,
)
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Incident, Target

pytestmark = pytest.mark.sshd

BEHIND = ("t1", "t2", "t3")


@pytest.fixture
def own_bastion(tmp_path: Path, sshd_client_key: ClientKey) -> Iterator[SshServer]:
    with running_sshd(
        tmp_path / "bastion",
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
        settings=BASTION_SETTINGS,
    ) as server:
        yield server


def add_fleet(app: App, admin: Actor, sshd: SshServer, bastion: SshServer) -> None:
    targets.add_target(
        app, admin, bastion.spec("b1", kind=TargetKind.JUMP), trust_on_first_use=True
    )
    for name in BEHIND:
        targets.add_target(
            app,
            admin,
            sshd.spec(name, via="b1"),
            trust_on_first_use=True,
            allow_same_host=True,
        )


def probe_round(app: App, clock: FakeClock) -> int:
    """One probe round at ``clock.now`` with every target due, then the host incidents."""
    prober = HostProber(
        app,
        decrypt=lambda enc: app.master_key.decrypt(enc).reveal(),
        clock=lambda: clock.now,
        started_at=clock.now - timedelta(days=1),
    )
    probed = asyncio.run(prober.round(clock.now))
    with app.db.session() as session:
        sync_host_incidents(session, clock.now)
    return probed


def states(app: App) -> dict[str, tuple[str | None, str | None]]:
    with app.db.read() as session:
        return {
            name: (reach, error)
            for name, reach, error in session.execute(
                select(Target.name, Target.reach, Target.reach_error)
            )
        }


def open_host_incidents(app: App) -> list[str]:
    with app.db.read() as session:
        return sorted(
            i.target_name or ""
            for i in session.scalars(
                select(Incident).where(Incident.cause == "unreachable", Incident.status == "open")
            )
        )


def test_a_target_behind_a_working_bastion_is_probed_reachable_through_it(
    app: App, admin: Actor, clock: FakeClock, sshd: SshServer, own_bastion: SshServer
) -> None:
    add_fleet(app, admin, sshd, own_bastion)
    before = forwarded_to(own_bastion, sshd.port)
    assert probe_round(app, clock) == 4
    found = states(app)
    assert {name: found[name] for name in ("b1", *BEHIND)} == {
        name: ("reachable", None) for name in ("b1", *BEHIND)
    }
    # Each target's probe went through the bastion: one channel each.
    assert forwarded_to(own_bastion, sshd.port) == before + len(BEHIND)
    assert open_host_incidents(app) == []


def test_a_bastion_that_is_down_is_one_incident_and_the_targets_behind_name_it(
    app: App,
    admin: Actor,
    clock: FakeClock,
    sshd: SshServer,
    tmp_path: Path,
    sshd_client_key: ClientKey,
    free_tcp_port: int,
) -> None:
    with running_sshd(
        tmp_path / "bastion",
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
        settings=BASTION_SETTINGS,
    ) as bastion:
        add_fleet(app, admin, sshd, bastion)
    # The bastion is stopped; nothing listens on its port now.
    # Negative control of the target: reachable directly, so a failure is the chain's.
    direct = sshd.spec("direct")
    targets.add_target(app, admin, direct, trust_on_first_use=True, allow_same_host=True)
    with app.db.session() as session:
        # A target reached directly whose sshd is down: its own incident (control).
        gone = session.scalars(select(Target).where(Target.name == "direct")).one()
        gone.port = free_tcp_port

    probe_round(app, clock)
    found = states(app)
    for name in BEHIND:
        state, error = found[name]
        assert state == "refused", (name, error)
        assert error is not None and error.startswith("jump host b1: connection refused"), error
    assert found["b1"][0] == "refused"
    assert found["direct"][0] == "refused"
    # Exactly one per host that is down itself: the bastion's and the direct target's;
    # none for the three behind the bastion.
    assert open_host_incidents(app) == ["b1", "direct"]
    with app.db.read() as session:
        ids = dict(session.execute(select(Target.name, Target.id)).all())
        assert sorted(behind_down(session, {ids["b1"]}).values()) == [ids["b1"]] * len(BEHIND)
        # The job incidents of the targets behind the bastion are muted with its incident;
        # a target reached directly is muted by its own only.
        opened = list(session.scalars(select(Incident).where(Incident.status == "open")))
        behind = behind_down(session, {ids["b1"], ids["direct"]})
        muted = {m.target_id for m in host_mutes(opened, clock.now, behind)}
        assert muted == {ids[name] for name in ("b1", "direct", *BEHIND)}
        assert {m.target_id for m in host_mutes(opened, clock.now)} == {ids["b1"], ids["direct"]}


async def test_a_target_behind_a_down_bastion_is_never_probed_directly(
    sshd: SshServer, free_tcp_port: int
) -> None:
    """The probe's own contract: reachable directly, refused through a dead hop, which
    the error and the result name."""
    from dataclasses import replace

    from fleetcron.executors import SshTarget
    from fleetcron.executors.ssh_probe import probe_path

    plain = SshTarget(
        name="t42",
        host=sshd.host,
        port=sshd.port,
        user=sshd.user,
        private_key=sshd.client_private_key,
        host_key=sshd.host_key_line,
    )
    assert await probe(plain, 10) == ("reachable", None)
    dead = replace(plain, name="b1", port=free_tcp_port)
    found = await probe_path(replace(plain, via=(dead,)), 10)
    assert found.reach == "refused"
    assert found.hop == "b1"
    assert found.error is not None and found.error.startswith("jump host b1: connection refused")
    assert "t42" not in found.error
