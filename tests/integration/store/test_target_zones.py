"""Each target's own local time on a real database (SQLite and PostgreSQL) and real sshd
servers: the zone detected at pairing over SSH (the machine's own, and a server whose
``timedatectl`` answers another zone), a zone set by an operator kept over detection, a
detection that finds nothing, and jobs in the ``target`` zone firing at each target's local
wall time through the run store."""

from __future__ import annotations

import stat
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.target_zones import DETECT_COMMAND, parse_detected_zone
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.scheduler.service import policy_from
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.schedule_file import apply_schedule, export_schedule, list_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.services.targets.edit import TargetChanges
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, AuditEvent, Run, Target


def this_machines_zone() -> str:
    """What the detection command finds here (the sshd fixture runs on this machine)."""
    out = subprocess.run(["sh", "-c", DETECT_COMMAND], capture_output=True, text=True).stdout
    zone, how = parse_detected_zone(out)
    assert zone is not None, how
    return zone


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


@pytest.fixture(scope="module")
def tokyo_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    """A real sshd whose sessions find a ``timedatectl`` that answers Asia/Tokyo (the
    machine's own files cannot be changed for a test: the session's PATH can)."""
    yield from _sshd_with_timedatectl(
        tmp_path_factory.mktemp("sshd-tokyo"), sshd_client_key, "echo Asia/Tokyo"
    )


@pytest.fixture(scope="module")
def nonsense_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    """A real sshd whose ``timedatectl`` answers something that is not a zone."""
    yield from _sshd_with_timedatectl(
        tmp_path_factory.mktemp("sshd-mars"), sshd_client_key, "echo Mars/Olympus_Mons"
    )


def _sshd_with_timedatectl(workdir: Path, client_key: ClientKey, body: str) -> Iterator[SshServer]:
    bindir = workdir / "bin"
    bindir.mkdir(parents=True)
    prog = bindir / "timedatectl"
    prog.write_text(f"#!/bin/sh\n{body}\n")
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    with running_sshd(
        workdir / "sshd",
        authorized_keys=[client_key.public_key_line],
        client_key=client_key,
        settings={"SetEnv": f"PATH={bindir}:/usr/local/bin:/usr/bin:/bin"},
    ) as server:
        yield server


def audit_of(app: App, action: str, name: str) -> dict[str, object]:
    with app.db.read() as session:
        event = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.action == action, AuditEvent.target_name == name)
            .order_by(AuditEvent.id.desc())
        ).first()
        assert event is not None
        return dict(event.detail)


# -- detection at pairing -----------------------------------------------------------------


@pytest.mark.sshd
def test_pairing_detects_the_servers_zone_over_ssh(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "pbx1", sshd)

    expected = this_machines_zone()
    assert result.timezone == expected
    assert result.target.timezone == expected and result.target.timezone_source == "detected"
    assert result.timezone_note.startswith("detected by ")
    assert audit_of(app, "target.pair", "pbx1")["timezone"] == {
        "zone": expected,
        "note": result.timezone_note,
    }


@pytest.mark.sshd
def test_a_server_answering_another_zone_gets_that_zone(
    app: App, operator: Actor, tokyo_sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "tokyo1", tokyo_sshd)

    assert (result.timezone, result.timezone_note) == ("Asia/Tokyo", "detected by timedatectl")


@pytest.mark.sshd
def test_a_detection_that_finds_no_zone_pairs_anyway_and_says_why(
    app: App, operator: Actor, nonsense_sshd: SshServer
) -> None:
    result = add_ssh(app, operator, "mars1", nonsense_sshd)

    assert result.target.paired
    assert result.timezone is None and result.target.timezone is None
    assert "timedatectl reported 'Mars/Olympus_Mons'" in result.timezone_note
    assert result.timezone_note.startswith("not detected: ")


@pytest.mark.sshd
def test_a_zone_set_by_an_operator_is_not_overwritten_by_a_later_detection(
    app: App, operator: Actor, tokyo_sshd: SshServer
) -> None:
    add_ssh(app, operator, "nyc1", tokyo_sshd, timezone="America/New_York")
    targets.unpair_target(app, operator, "nyc1")
    again = targets.pair_target(app, operator, "nyc1")

    assert (again.target.timezone, again.target.timezone_source) == (
        "America/New_York",
        "operator",
    )
    assert again.timezone_note == "set by an operator"


@pytest.mark.sshd
def test_clearing_the_operators_zone_lets_the_next_pairing_detect_again(
    app: App, operator: Actor, tokyo_sshd: SshServer
) -> None:
    add_ssh(app, operator, "box", tokyo_sshd, timezone="Europe/Berlin")
    targets.edit_target(app, operator, "box", TargetChanges(timezone=""))
    assert target_reads.show_target(app, operator, "box")[0].timezone is None

    again = targets.pair_target(app, operator, "box")

    assert (again.timezone, again.target.timezone_source) == ("Asia/Tokyo", "detected")


def test_a_local_target_gets_the_machines_own_zone(app: App, admin: Actor) -> None:
    result = targets.add_target(app, admin, TargetSpec("here", TargetKind.LOCAL))

    assert (result.timezone, result.target.timezone_source) == (this_machines_zone(), "detected")


def test_an_unknown_zone_is_refused_naming_the_value(app: App, admin: Actor) -> None:
    with pytest.raises(InvalidInput) as added:
        targets.add_target(
            app, admin, TargetSpec("here", TargetKind.LOCAL, timezone="Europe/Atlantis")
        )
    assert (added.value.field, added.value.value) == ("timezone", "Europe/Atlantis")
    assert "'Europe/Atlantis' is not a known time zone" in added.value.message
    with app.db.read() as session:
        assert session.scalars(select(Target)).all() == []

    targets.add_target(app, admin, TargetSpec("here", TargetKind.LOCAL))
    with pytest.raises(InvalidInput) as edited:
        targets.edit_target(app, admin, "here", TargetChanges(timezone="target"))
    assert (edited.value.field, edited.value.value) == ("timezone", "target")


# -- jobs in the target zone ---------------------------------------------------------------

ZONES = {"berlin": "Europe/Berlin", "newyork": "America/New_York", "tokyo": "Asia/Tokyo"}


@pytest.fixture
def three_zones(app: App, admin: Actor) -> None:
    for name, zone in ZONES.items():
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, timezone=zone))
    targets.add_target(app, admin, TargetSpec("nozone", TargetKind.LOCAL))
    targets.edit_target(app, admin, "nozone", TargetChanges(timezone=""))


def next_fires(app: App, job: str) -> dict[str, datetime | None]:
    with app.db.read() as session:
        rows = session.execute(
            select(Target.name, Assignment.next_fire_at)
            .join(Assignment.target)
            .join(Assignment.job)
            .where(Assignment.job.has(name=job))
        ).all()
    return {name: when for name, when in rows}


@pytest.mark.usefixtures("three_zones")
def test_a_target_local_job_fires_at_each_targets_wall_time_through_the_run_store(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    """02:00 local on each target on the night Europe springs forward (2026-03-29): one
    run per target at its own instant; the target without a zone uses the default (UTC).
    The same schedule in a fixed zone is the negative control: one instant for all."""
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    jobs.add_job(app, admin, "nightly", JobSpec("0 2 * * *", "echo local", "target"), bulk=True)
    jobs.add_job(
        app, admin, "fixed", JobSpec("0 2 * * *", "echo fixed", "Europe/Berlin"), bulk=True
    )
    expected = {
        "tokyo": datetime(2026, 3, 28, 17, 0, tzinfo=UTC),
        "berlin": datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST: 02:00 is skipped
        "nozone": datetime(2026, 3, 29, 2, 0, tzinfo=UTC),
        "newyork": datetime(2026, 3, 29, 6, 0, tzinfo=UTC),
    }
    assert next_fires(app, "nightly") == expected
    assert set(next_fires(app, "fixed").values()) == {datetime(2026, 3, 29, 1, 0, tzinfo=UTC)}

    store = RunStore(app.db, node="test", policy=policy_from(app), clock=clock)
    fired: dict[str, datetime | None] = {}
    while clock.now < datetime(2026, 3, 29, 7, 0, tzinfo=UTC):
        clock.advance(minutes=15)
        for dispatch in store.claim_due(clock.now).dispatches:
            if dispatch.job_name == "nightly":
                fired[dispatch.target_name] = dispatch.scheduled_for
    assert fired == expected
    with app.db.read() as session:
        runs = session.scalars(select(Run).where(Run.job_name == "nightly")).all()
    assert sorted((r.target_name, r.scheduled_for) for r in runs) == sorted(expected.items())
    # Advanced to the next night, in each zone (Berlin now on CEST: 00:00 UTC).
    after = next_fires(app, "nightly")
    assert after["berlin"] == datetime(2026, 3, 30, 0, 0, tzinfo=UTC)
    assert after["tokyo"] == datetime(2026, 3, 29, 17, 0, tzinfo=UTC)
    assert after["newyork"] == datetime(2026, 3, 30, 6, 0, tzinfo=UTC)


@pytest.mark.usefixtures("three_zones")
def test_changing_a_targets_zone_moves_its_target_local_fires_at_once(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    jobs.add_job(app, admin, "nightly", JobSpec("0 2 * * *", "echo local", "target"), bulk=True)
    jobs.add_job(
        app, admin, "fixed", JobSpec("0 2 * * *", "echo fixed", "Europe/Berlin"), bulk=True
    )
    fixed_before = next_fires(app, "fixed")

    result = targets.edit_target(app, admin, "tokyo", TargetChanges(timezone="Asia/Kolkata"))

    assert result.changed == ("timezone",)
    # 02:00 IST (UTC+05:30) on the 29th.
    assert next_fires(app, "nightly")["tokyo"] == datetime(2026, 3, 28, 20, 30, tzinfo=UTC)
    assert next_fires(app, "nightly")["berlin"] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert next_fires(app, "fixed") == fixed_before
    detail = audit_of(app, "target.edit", "tokyo")["timezone"]
    assert detail == {"old": "Asia/Tokyo", "new": "Asia/Kolkata", "assignments_moved": 1}


@pytest.mark.usefixtures("three_zones")
def test_job_show_gives_each_targets_next_fire_with_its_zone(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    jobs.add_job(app, admin, "nightly", JobSpec("0 2 * * *", "echo local", "target"), bulk=True)

    view = jobs.show_job(app, admin, "nightly")

    assert view.timezone == "target"
    shown = {a.target: (a.timezone, a.next_fire_local) for a in view.assignments}
    assert shown == {
        "berlin": ("Europe/Berlin", "2026-03-29T03:00:00+02:00"),
        "newyork": ("America/New_York", "2026-03-29T02:00:00-04:00"),
        "nozone": ("UTC", "2026-03-29T02:00:00+00:00"),
        "tokyo": ("Asia/Tokyo", "2026-03-29T02:00:00+09:00"),
    }


def test_a_job_zone_other_than_an_iana_name_or_target_is_refused(app: App, admin: Actor) -> None:
    with pytest.raises(InvalidInput) as raised:
        jobs.add_job(app, admin, "x", JobSpec("0 2 * * *", "true", "targets"), bulk=True)
    assert (raised.value.field, raised.value.value) == ("timezone", "targets")
    assert '"target"' in (raised.value.allowed or "")


def test_resuming_a_paused_target_continues_in_its_own_zone(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    targets.add_target(app, admin, TargetSpec("tokyo", TargetKind.LOCAL, timezone="Asia/Tokyo"))
    jobs.add_job(app, admin, "nightly", JobSpec("0 2 * * *", "echo local", "target"), bulk=True)
    targets.pause_target(app, admin, "tokyo")
    clock.advance(days=1)

    targets.resume_target(app, admin, "tokyo")

    # 2026-03-29 12:00 UTC is 21:00 in Tokyo: next is 02:00 JST on the 30th.
    assert next_fires(app, "nightly") == {"tokyo": datetime(2026, 3, 29, 17, 0, tzinfo=UTC)}


@pytest.mark.usefixtures("three_zones")
def test_a_schedule_file_declares_a_target_zone_job_and_exports_it_back(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    text = (
        "version: 1\n"
        "jobs:\n"
        "  - name: nightly\n"
        "    bulk: true\n"
        '    schedule: "0 2 * * *"\n'
        "    timezone: target\n"
        "    command: echo local\n"
    )

    apply_schedule(app, admin, text)

    assert next_fires(app, "nightly")["tokyo"] == datetime(2026, 3, 28, 17, 0, tzinfo=UTC)
    assert "timezone: target" in export_schedule(app, admin)
    listed = {e.target: e.timezone for e in list_schedule(app, admin) if e.job == "nightly"}
    assert listed == {**ZONES, "nozone": "UTC"}
    with pytest.raises(ScheduleFileError, match="timezone"):
        apply_schedule(app, admin, text.replace("timezone: target", "timezone: targets"))


@pytest.mark.sshd
def test_moving_a_target_to_another_server_reads_that_servers_zone(
    app: App, operator: Actor, sshd: SshServer, tokyo_sshd: SshServer
) -> None:
    add_ssh(app, operator, "moved", sshd)
    assert target_reads.show_target(app, operator, "moved")[0].timezone == this_machines_zone()

    result = targets.edit_target(
        app,
        operator,
        "moved",
        TargetChanges(port=tokyo_sshd.port, host_key=tokyo_sshd.host_key_line),
    )

    assert result.verified
    assert (result.target.timezone, result.timezone_note) == (
        "Asia/Tokyo",
        "detected by timedatectl",
    )


@pytest.mark.sshd
def test_moving_a_target_keeps_the_zone_an_operator_set(
    app: App, operator: Actor, sshd: SshServer, tokyo_sshd: SshServer
) -> None:
    add_ssh(app, operator, "moved", sshd, timezone="Europe/Berlin")

    result = targets.edit_target(
        app,
        operator,
        "moved",
        TargetChanges(port=tokyo_sshd.port, host_key=tokyo_sshd.host_key_line),
    )

    assert result.verified and result.timezone_note == ""
    assert (result.target.timezone, result.target.timezone_source) == ("Europe/Berlin", "operator")
