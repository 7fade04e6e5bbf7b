"""Bulk and individual jobs on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict, CronError, InvalidInput, NotFound, PermissionDenied
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import Assignment, AuditEvent, Job

NIGHTLY = JobSpec(
    schedule="0 2 * * *", command="/usr/sbin/fwconsole reload", notes="nightly reload"
)
BACKUP = JobSpec(schedule="30 3 * * *", command="/usr/local/bin/backup --all")


def add_local_targets(app: App, actor: Actor, *names: str, labels: tuple[str, ...] = ()) -> None:
    """Local targets are added by an admin (``target.local``), whoever manages the jobs."""
    for name in names:
        targets.add_target(
            app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL, labels=labels)
        )


def enabled_by_target(app: App, actor: Actor, job: str) -> dict[str, bool]:
    return {a.target: a.enabled for a in jobs.show_job(app, actor, job).assignments}


def test_a_bulk_job_created_with_one_target_unchecked_is_enabled_on_the_others(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2", "pbx3")

    view = jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, disabled_on=["pbx2"])

    assert (view.enabled, view.total) == (2, 3)
    assert enabled_by_target(app, operator, "reload") == {"pbx1": True, "pbx2": False, "pbx3": True}


def test_a_bulk_job_extends_to_a_target_paired_later(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    add_local_targets(app, operator, "pbx2")

    assert enabled_by_target(app, operator, "reload") == {"pbx1": True, "pbx2": True}


def test_a_bulk_job_with_a_selector_covers_only_matching_targets(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "prod1", labels=("env=prod", "role=pbx"))
    add_local_targets(app, operator, "dev1", labels=("env=dev", "role=pbx"))

    view = jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, selector="env=prod,role=pbx")

    assert (view.enabled, view.total) == (1, 1)
    assert list(enabled_by_target(app, operator, "reload")) == ["prod1"]


def test_a_target_gaining_a_matching_label_gets_the_bulk_job(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "dev1", labels=("env=dev",))
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, selector="env=prod")

    targets.label_target(app, operator, "dev1", ["env=prod"])

    assert enabled_by_target(app, operator, "reload") == {"dev1": True}


def test_a_target_losing_its_matching_label_leaves_the_bulk_job(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "prod1", labels=("env=prod",))
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, selector="env=prod")

    targets.label_target(app, operator, "prod1", ["env="])

    assert enabled_by_target(app, operator, "reload") == {}


def test_disabling_a_bulk_job_on_one_target_leaves_the_others_running(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2", "pbx3")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    view = jobs.set_enabled(app, operator, "reload", False, target="pbx2")

    assert (view.enabled, view.total) == (2, 3)
    assert enabled_by_target(app, operator, "reload") == {"pbx1": True, "pbx2": False, "pbx3": True}


def test_enabling_on_one_target_restores_it(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, disabled_on=["pbx1"])

    view = jobs.set_enabled(app, operator, "reload", True, target="pbx1")

    assert (view.enabled, view.total) == (2, 2)


def test_editing_a_bulk_job_changes_it_on_every_target_and_moves_next_fire(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    jobs.edit_job(app, operator, "reload", schedule="30 4 * * *", command="echo new")

    view = jobs.show_job(app, operator, "reload")
    assert (view.schedule, view.command) == ("30 4 * * *", "echo new")
    # The fixture clock stands at 2026-03-02 09:00:30 UTC.
    expected = datetime(2026, 3, 3, 4, 30, tzinfo=UTC)
    assert [a.next_fire_at for a in view.assignments] == [expected, expected]


def test_deleting_a_bulk_job_removes_every_assignment(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2", "pbx3")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    removed = jobs.remove_job(app, operator, "reload")

    assert removed == 3
    with app.db.read() as session:
        assert session.scalar(select(func.count(Assignment.id))) == 0
        assert session.scalar(select(func.count(Job.id))) == 0


def test_an_individual_job_is_not_listed_among_bulk_jobs(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "backup", BACKUP, target="pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    assert [v.name for v in jobs.list_jobs(app, operator, origin="bulk")] == ["reload"]
    assert [v.name for v in jobs.list_jobs(app, operator, origin="individual")] == ["backup"]
    assert [v.name for v in jobs.list_jobs(app, operator, target="pbx1")] == ["backup", "reload"]


def test_an_individual_job_does_not_extend_to_new_targets(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "backup", NIGHTLY, target="pbx1")

    add_local_targets(app, operator, "pbx2")

    assert enabled_by_target(app, operator, "backup") == {"pbx1": True}


def test_unpairing_a_target_stops_its_jobs_and_repairing_restores_them(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)
    jobs.add_job(app, operator, "backup", BACKUP, target="pbx1")

    removed = targets.unpair_target(app, operator, "pbx1")

    assert removed == 2
    assert enabled_by_target(app, operator, "reload") == {"pbx2": True}
    assert enabled_by_target(app, operator, "backup") == {}

    result = targets.pair_target(app, operator, "pbx1")

    assert set(result.extended_jobs) == {"reload", "backup"}
    assert enabled_by_target(app, operator, "backup") == {"pbx1": True}


def test_re_pairing_a_paired_target_keeps_its_id_and_assignments(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, disabled_on=["pbx1"])
    before, _ = target_reads.show_target(app, operator, "pbx1")

    result = targets.pair_target(app, operator, "pbx1")

    assert result.target.id == before.id
    assert result.extended_jobs == ()
    assert enabled_by_target(app, operator, "reload") == {"pbx1": False}


def test_a_duplicate_job_name_is_refused(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    with pytest.raises(Conflict, match="job reload already exists"):
        jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)


def test_a_bad_schedule_is_refused_and_names_the_field(app: App, operator: Actor) -> None:
    with pytest.raises(CronError, match="minute: 60 is out of range 0-59"):
        jobs.add_job(app, operator, "bad", JobSpec("60 * * * *", "true"), bulk=True)


def test_an_unknown_time_zone_is_refused(app: App, operator: Actor) -> None:
    with pytest.raises(InvalidInput) as caught:
        jobs.add_job(
            app, operator, "bad", JobSpec("0 2 * * *", "true", timezone="Mars/Olympus"), bulk=True
        )
    assert caught.value.field == "timezone"


def test_a_command_longer_than_the_limit_is_refused(app: App, operator: Actor) -> None:
    with pytest.raises(InvalidInput, match="513 characters long; at most 512"):
        jobs.add_job(app, operator, "long", JobSpec("0 2 * * *", "x" * 513), bulk=True)


def test_a_bad_selector_is_refused(app: App, operator: Actor) -> None:
    with pytest.raises(InvalidInput) as caught:
        jobs.add_job(app, operator, "sel", NIGHTLY, bulk=True, selector="env")
    assert caught.value.field == "selector"


def test_an_individual_job_on_an_unknown_target_is_refused(app: App, operator: Actor) -> None:
    with pytest.raises(NotFound, match="target nowhere does not exist"):
        jobs.add_job(app, operator, "backup", NIGHTLY, target="nowhere")


def test_a_viewer_cannot_add_jobs(app: App, viewer: Actor) -> None:
    with pytest.raises(PermissionDenied, match="needs the operator role"):
        jobs.add_job(app, viewer, "reload", NIGHTLY, bulk=True)


def test_every_write_and_every_refusal_is_audited(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)
    with pytest.raises(Conflict):
        jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    with app.db.read() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "job.add").order_by(AuditEvent.id)
        ).all()
    assert [(e.actor, e.success) for e in events] == [("olivia", True), ("olivia", False)]
    assert events[0].detail["schedule"] == "0 2 * * *"
    assert events[0].detail["command"] == "/usr/sbin/fwconsole reload"
    assert events[1].detail["error"] == "job reload already exists"


def test_a_failed_write_leaves_nothing_behind(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")

    with pytest.raises(NotFound):
        jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True, disabled_on=["ghost"])

    with app.db.read() as session:
        assert session.scalar(select(func.count(Job.id))) == 0
        assert session.scalar(select(func.count(Assignment.id))) == 0


def test_disabling_at_creation_a_target_the_selector_does_not_match_is_refused(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "prod1", labels=("env=prod",))
    add_local_targets(app, operator, "dev1", labels=("env=dev",))

    with pytest.raises(InvalidInput, match="dev1 would not run this job") as caught:
        jobs.add_job(
            app, operator, "reload", NIGHTLY, bulk=True, selector="env=prod", disabled_on=["dev1"]
        )
    assert caught.value.field == "disabled_on"


def test_the_same_command_on_the_same_target_from_two_jobs_is_refused_naming_both(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1", "pbx2")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    with pytest.raises(Conflict, match="jobs reload-again and reload would both run") as caught:
        jobs.add_job(
            app,
            operator,
            "reload-again",
            JobSpec("0 5 * * *", " /usr/sbin/fwconsole reload"),
            target="pbx2",
        )
    assert "on 1 target(s): pbx2;" in caught.value.message


def test_a_duplicate_over_many_targets_names_a_few_and_counts_the_rest(
    app: App, operator: Actor
) -> None:
    names = [f"pbx{n:02d}" for n in range(25)]
    add_local_targets(app, operator, *names)
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    with pytest.raises(Conflict) as caught:
        jobs.add_job(app, operator, "reload-again", NIGHTLY, bulk=True)

    message = caught.value.message
    assert f"on 25 target(s): {', '.join(names[:10])} and 15 more;" in message
    assert "pbx10" not in message  # the message stays one short line at any fleet size


def test_a_duplicate_allowed_on_one_of_the_jobs_is_accepted(app: App, operator: Actor) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)

    view = jobs.add_job(
        app,
        operator,
        "reload-again",
        JobSpec("0 5 * * *", NIGHTLY.command, allow_duplicate=True),
        target="pbx1",
    )

    assert view.allow_duplicate


def test_editing_a_command_into_a_duplicate_is_refused_and_changes_nothing(
    app: App, operator: Actor
) -> None:
    add_local_targets(app, operator, "pbx1")
    jobs.add_job(app, operator, "reload", NIGHTLY, bulk=True)
    jobs.add_job(app, operator, "other", JobSpec("0 5 * * *", "uptime"), target="pbx1")

    with pytest.raises(Conflict, match="duplicate registration"):
        jobs.edit_job(app, operator, "other", command=NIGHTLY.command)

    assert jobs.show_job(app, operator, "other").command == "uptime"
