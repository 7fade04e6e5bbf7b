"""`target detect-zone` on a real database and a real sshd: the zone is read again from the
server, shown without being written, recorded only when applied (audited), and an
operator's zone is kept by a sweep over every target."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.app import Actor, App
from fleetcron.errors import InvalidInput
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.zones import detect_zones
from fleetcron.store.schema import AuditEvent, Target


@pytest.fixture(scope="module")
def movable_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[tuple[SshServer, Path]]:
    """A real sshd whose ``timedatectl`` answers what the file it returns holds."""
    workdir = tmp_path_factory.mktemp("sshd-movable")
    answer = workdir / "zone"
    answer.write_text("Asia/Tokyo\n")
    bindir = workdir / "bin"
    bindir.mkdir()
    prog = bindir / "timedatectl"
    prog.write_text(f"#!/bin/sh\ncat {answer}\n")
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    with running_sshd(
        workdir / "sshd",
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
        settings={"SetEnv": f"PATH={bindir}:/usr/local/bin:/usr/bin:/bin"},
    ) as server:
        yield server, answer


def add_ssh(
    app: App,
    actor: Actor,
    name: str,
    server: SshServer,
    *,
    host_key: str | None = None,
    timezone: str | None = None,
    verify: bool = True,
    trust_on_first_use: bool = True,
    allow_same_host: bool = True,
) -> None:
    targets.add_target(
        app,
        actor,
        server.spec(name, host_key=host_key, timezone=timezone),
        verify=verify,
        trust_on_first_use=trust_on_first_use,
        allow_same_host=allow_same_host,
    )


def zone_of(app: App, name: str) -> tuple[str | None, str | None]:
    with app.db.read() as session:
        target = session.scalars(select(Target).where(Target.name == name)).one()
        return target.timezone, target.timezone_source


def zone_events(app: App) -> list[dict[str, object]]:
    with app.db.read() as session:
        return [
            dict(e.detail)
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action == "target.zone_detect")
            ).all()
        ]


@pytest.mark.sshd
def test_a_moved_zone_is_shown_then_recorded_only_with_apply(
    app: App, operator: Actor, movable_sshd: tuple[SshServer, Path]
) -> None:
    server, answer = movable_sshd
    answer.write_text("Asia/Tokyo\n")
    add_ssh(app, operator, "pbx1", server)
    assert zone_of(app, "pbx1") == ("Asia/Tokyo", "detected")
    # Control: the same read reports no change while the server says the same zone.
    [same] = detect_zones(app, operator, ["pbx1"])
    assert (same.result, same.detected, same.how) == ("unchanged", "Asia/Tokyo", "timedatectl")

    answer.write_text("Europe/Warsaw\n")
    [seen] = detect_zones(app, operator, ["pbx1"])

    assert (seen.zone, seen.detected, seen.result) == (
        "Asia/Tokyo",
        "Europe/Warsaw",
        "would change",
    )
    assert zone_of(app, "pbx1") == ("Asia/Tokyo", "detected")  # nothing written
    assert zone_events(app) == []

    [applied] = detect_zones(app, operator, ["pbx1"], apply=True)

    assert (applied.result, applied.zone) == ("changed", "Europe/Warsaw")
    assert zone_of(app, "pbx1") == ("Europe/Warsaw", "detected")
    [event] = zone_events(app)
    assert (event["old"], event["new"], event["how"]) == (
        "Asia/Tokyo",
        "Europe/Warsaw",
        "timedatectl",
    )


@pytest.mark.sshd
def test_a_sweep_keeps_an_operators_zone_and_naming_the_target_replaces_it(
    app: App, operator: Actor, movable_sshd: tuple[SshServer, Path]
) -> None:
    server, answer = movable_sshd
    answer.write_text("Europe/Warsaw\n")
    add_ssh(app, operator, "nyc1", server, timezone="America/New_York")

    [swept] = detect_zones(app, operator, every=True, apply=True)

    assert (swept.result, swept.detected) == ("kept", "Europe/Warsaw")
    assert zone_of(app, "nyc1") == ("America/New_York", "operator")
    [named] = detect_zones(app, operator, ["nyc1"], apply=True)
    assert named.result == "changed"
    assert zone_of(app, "nyc1") == ("Europe/Warsaw", "detected")


def test_neither_names_nor_all_is_refused_naming_the_field(app: App, operator: Actor) -> None:
    with pytest.raises(InvalidInput) as refused:
        detect_zones(app, operator)
    assert refused.value.field == "target"
