"""Versions of a job's definition on a real database (SQLite and PostgreSQL): every
change writes one in its own transaction, runs record the version they ran, a revert
writes a new version and is audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs import versions
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.schedule_file import apply_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import AuditEvent, Job, JobVersion, Run

NIGHTLY = JobSpec(schedule="0 2 * * *", command="/usr/sbin/fwconsole reload")


def local_target(app: App, name: str = "pbx1") -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))


def audit(app: App, action: str) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
            )
        )


def test_adding_a_job_writes_version_one_with_its_whole_definition(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    [first] = versions.list_versions(app, operator, "reload")

    assert (first.version, first.actor, first.source, first.summary) == (
        1,
        "olivia",
        "cli",
        "created",
    )
    assert first.current
    assert first.definition["schedule"] == "0 2 * * *"
    assert first.definition["target"] == "pbx1"
    assert audit(app, "job.add")[-1].detail["version"] == 1


def test_each_edit_writes_the_next_version_and_names_what_changed(
    app: App, operator: Actor, clock: FakeClock
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")
    clock.advance(hours=1)
    jobs.edit_job(app, operator, "reload", schedule="0 3 * * *")
    jobs.edit_job(app, Actor("admin", "admin"), "reload", command="echo one\necho two")

    newest, middle, _ = versions.list_versions(app, operator, "reload")

    assert (middle.version, middle.changed, middle.summary) == (
        2,
        ["schedule"],
        "schedule: 0 2 * * * -> 0 3 * * *",
    )
    assert (newest.version, newest.actor, newest.changed) == (3, "admin", ["command"])
    assert newest.current and not middle.current
    with app.db.read() as session:
        assert session.scalar(select(Job.version).where(Job.name == "reload")) == 3


def test_an_edit_that_changes_nothing_and_a_pause_write_no_version(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    jobs.edit_job(app, operator, "reload", schedule="0 2 * * *")
    jobs.set_enabled(app, operator, "reload", False)

    assert [v.version for v in versions.list_versions(app, operator, "reload")] == [1]


def test_a_refused_edit_writes_no_version(app: App, operator: Actor) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    with pytest.raises(InvalidInput):
        jobs.edit_job(app, operator, "reload", schedule="0 2 * * *", timeout_s=0)

    assert [v.version for v in versions.list_versions(app, operator, "reload")] == [1]


def test_diff_lists_the_changed_fields_with_a_line_diff_of_the_command(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "echo one\necho two"), target="pbx1")
    jobs.edit_job(app, operator, "reload", command="echo one\necho three", notes="why")

    changes = versions.diff_versions(app, operator, "reload", 1, 2)

    assert [c.field for c in changes] == ["command", "notes"]
    assert "-echo two" in changes[0].lines and "+echo three" in changes[0].lines
    assert (changes[1].old, changes[1].new) == ("", "why")
    assert versions.diff_versions(app, operator, "reload", 2) == []


def test_diff_of_a_version_that_does_not_exist_names_the_versions_there_are(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    with pytest.raises(InvalidInput) as raised:
        versions.diff_versions(app, operator, "reload", 1, 7)

    assert (raised.value.field, raised.value.value, raised.value.allowed) == ("v2", 7, "1 to 1")


def test_revert_gives_back_the_old_definition_as_a_new_audited_version(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")
    jobs.edit_job(app, operator, "reload", schedule="0 3 * * *", command="/bin/false")

    version, changes = versions.revert_job(app, operator, "reload", 1)

    assert version == 3
    assert {c.field for c in changes} == {"schedule", "command"}
    shown = jobs.show_job(app, operator, "reload")
    assert (shown.schedule, shown.command) == ("0 2 * * *", "/usr/sbin/fwconsole reload")
    newest = versions.list_versions(app, operator, "reload")[0]
    assert (newest.version, newest.summary) == (3, "revert to version 1")
    assert versions.diff_versions(app, operator, "reload", 1, 3) == []
    [event] = audit(app, "job.revert")
    assert event.success and event.actor == "olivia"
    assert (event.detail["reverted_to"], event.detail["version"]) == (1, 3)


def test_a_viewer_may_not_revert_and_the_refusal_is_audited(
    app: App, operator: Actor, viewer: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")
    jobs.edit_job(app, operator, "reload", schedule="0 3 * * *")

    with pytest.raises(PermissionDenied):
        versions.revert_job(app, viewer, "reload", 1)

    assert jobs.show_job(app, operator, "reload").schedule == "0 3 * * *"
    [event] = audit(app, "job.revert")
    assert not event.success and event.actor == "victor"


def test_reverting_to_the_current_definition_is_refused_naming_the_version(
    app: App, operator: Actor
) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    with pytest.raises(InvalidInput) as raised:
        versions.revert_job(app, operator, "reload", 1)

    assert (raised.value.field, raised.value.value) == ("to", 1)
    assert [v.version for v in versions.list_versions(app, operator, "reload")] == [1]


def test_a_revert_that_the_edit_refuses_leaves_job_and_history_unchanged(
    app: App, operator: Actor
) -> None:
    """One transaction: the version and the change commit together or not at all."""
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")
    jobs.edit_job(app, operator, "reload", command="/bin/other")
    jobs.add_job(app, operator, "copy", NIGHTLY, target="pbx1")  # now version 1's command

    with pytest.raises(Conflict):
        versions.revert_job(app, operator, "reload", 1)

    assert jobs.show_job(app, operator, "reload").command == "/bin/other"
    assert [v.version for v in versions.list_versions(app, operator, "reload")] == [2, 1]


def test_apply_records_its_changes_as_versions_from_apply(app: App, admin: Actor) -> None:
    local_target(app)
    text = (
        "version: 1\njobs:\n  - name: nightly\n    target: pbx1\n"
        "    schedule: '0 2 * * *'\n    command: /bin/a\n"
    )
    apply_schedule(app, admin, text)
    apply_schedule(app, admin, text.replace("/bin/a", "/bin/b"))
    apply_schedule(app, admin, text.replace("/bin/a", "/bin/b"))  # no change: no version

    newest, first = versions.list_versions(app, admin, "nightly")

    assert (first.source, newest.source) == ("apply", "apply")
    assert newest.changed == ["command"]
    assert newest.summary == "apply schedule.yaml"


def test_a_run_records_the_version_it_ran(app: App, operator: Actor, clock: FakeClock) -> None:
    local_target(app)
    jobs.add_job(app, operator, "tick", JobSpec("* * * * *", "true"), target="pbx1")
    store = RunStore(app.db, node="test", clock=clock)
    clock.advance(minutes=1)
    store.claim_due(clock.now)
    jobs.edit_job(app, operator, "tick", command="echo changed")
    clock.advance(minutes=1)
    store.claim_due(clock.now)

    with app.db.read() as session:
        ran = [
            (r.command, r.job_version)
            for r in session.scalars(select(Run).order_by(Run.scheduled_for))
        ]

    assert ran == [("true", 1), ("echo changed", 2)]


def test_the_history_of_a_removed_job_can_still_be_read(app: App, operator: Actor) -> None:
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")
    jobs.edit_job(app, operator, "reload", notes="last words")
    jobs.remove_job(app, operator, "reload")

    history = versions.list_versions(app, operator, "reload")

    assert [v.version for v in history] == [2, 1]
    assert not any(v.current for v in history)
    with pytest.raises(NotFound):
        versions.revert_job(app, operator, "reload", 1)
    with pytest.raises(NotFound):
        versions.list_versions(app, operator, "never-was")


def test_versions_are_unique_per_job_in_the_database(app: App, operator: Actor) -> None:
    """The unique constraint, not the code, stops two writers from taking one number."""
    local_target(app)
    jobs.add_job(app, operator, "reload", NIGHTLY, target="pbx1")

    with pytest.raises(Conflict), app.db.session() as session:
        job = session.scalar(select(Job).where(Job.name == "reload"))
        assert job is not None
        session.add(
            JobVersion(
                job_id=job.id,
                job_created_at=job.created_at,
                job_name="reload",
                version=1,
                definition={},
                changed=[],
                source="cli",
                actor="x",
                at=app.now() + timedelta(seconds=1),
                summary="",
            )
        )


def test_a_job_added_after_a_removed_one_starts_its_own_history_under_a_new_id(
    app: App, operator: Actor, clock: FakeClock
) -> None:
    """A removed job's history stays its own, and its id is not handed out again (SQLite
    tables are AUTOINCREMENT since migration 0020; PostgreSQL sequences never reuse)."""
    local_target(app)
    jobs.add_job(app, operator, "old", NIGHTLY, target="pbx1")
    jobs.edit_job(app, operator, "old", notes="v2")
    old_id = jobs.show_job(app, operator, "old").id
    jobs.remove_job(app, operator, "old")
    clock.advance(seconds=1)

    jobs.add_job(app, operator, "newer", NIGHTLY, target="pbx1")

    new = versions.list_versions(app, operator, "newer")
    assert [(v.version, v.summary) for v in new] == [(1, "created")]
    assert [v.version for v in versions.list_versions(app, operator, "old")] == [2, 1]
    assert jobs.show_job(app, operator, "newer").id > old_id
