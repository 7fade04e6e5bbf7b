"""Blackout windows declared in a schedule file (``blackouts:``), on SQLite and PostgreSQL:
applied in the jobs' transaction (a window may cover a job declared in the same file),
exported and applied again unchanged, changed by name, a bad window refused at its line
with nothing saved, each window audited as the CLI's are."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.cli.apply_cmd import describe_plan
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import PermissionDenied
from fleetcron.services import schedule_file
from fleetcron.services.blackouts.windows import list_blackouts
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Blackout, Job

FILE = """version: 1
jobs:
  - name: close-books
    target: web1
    schedule: "0 2 * * *"
    command: /usr/local/bin/close-books
blackouts:
  - name: patch-night
    reason: monthly patching
    selector: rack=r1
    zone: Europe/Warsaw
    weekly: sat 22:00
    duration: 2h
    until: "2027-03-31 00:00"
  - name: year-end
    reason: books closed
    job: close-books
    start: 2026-12-31 18:00
    end: 2027-01-01 06:00
"""


@pytest.fixture
def fleet(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r1"]))


def counts(app: App) -> tuple[int, int]:
    """How many windows and jobs there are."""
    with app.db.read() as session:
        windows = session.scalar(select(func.count()).select_from(Blackout)) or 0
        jobs = session.scalar(select(func.count()).select_from(Job)) or 0
        return windows, jobs


def test_a_window_covers_a_job_declared_in_the_same_file(
    app: App, operator: Actor, fleet: None
) -> None:
    plan = schedule_file.apply_schedule(app, operator, FILE, dry_run=True).plan
    assert describe_plan(plan)[-3:-1] == [
        "+ blackout window patch-night",
        "+ blackout window year-end",
    ]
    assert counts(app) == (0, 0)

    schedule_file.apply_schedule(app, operator, FILE)

    views = {view.name: view for view in list_blackouts(app, operator)}
    assert views["year-end"].job == "close-books"
    assert (views["year-end"].start, views["year-end"].end) == (
        "2026-12-31T18:00:00",
        "2027-01-01T06:00:00",
    )
    patch = views["patch-night"]
    assert (patch.kind, patch.cron, patch.duration_s, patch.selector) == (
        "cron",
        "0 22 * * 6",
        7200,
        "rack=r1",
    )
    assert patch.until == datetime(2027, 3, 30, 22, 0, tzinfo=UTC)  # Warsaw midnight, CEST
    with app.db.read() as session:
        events = session.execute(
            select(AuditEvent.actor, AuditEvent.action, AuditEvent.detail["via"].as_string())
            .where(AuditEvent.action.like("blackout.%"))
            .order_by(AuditEvent.id)
        ).all()
    assert [tuple(e) for e in events] == [
        ("olivia", "blackout.add", "schedule.apply"),
        ("olivia", "blackout.add", "schedule.apply"),
    ]


def test_export_writes_the_windows_back_and_applying_it_changes_nothing(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)

    exported = schedule_file.export_schedule(app, operator)

    assert "blackouts:\n  - name: patch-night\n" in exported
    assert '    cron: "0 22 * * 6"\n    duration: 2h\n' in exported
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty
    assert schedule_file.apply_schedule(app, operator, FILE).plan.empty


def test_a_changed_window_is_changed_in_place_and_audited(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)
    before = {view.name: view.id for view in list_blackouts(app, operator)}

    plan = schedule_file.apply_schedule(
        app, operator, FILE.replace("duration: 2h", "duration: 3h")
    ).plan

    assert describe_plan(plan) == ["~ blackout window patch-night (duration_s)"]
    after = {view.name: (view.id, view.duration_s) for view in list_blackouts(app, operator)}
    assert after["patch-night"] == (before["patch-night"], 10_800)
    assert counts(app) == (2, 1)


@pytest.mark.parametrize(
    ("broken", "where"),
    [
        (
            ("zone: Europe/Warsaw", "zone: Europe/Warsav"),
            "schedule.yaml:11: blackouts[0].zone: 'Europe/Warsav' is not a known time zone",
        ),
        (
            ("duration: 2h", "duration: 2 hours"),
            "schedule.yaml:13: blackouts[0].duration: '2 hours' is not a duration",
        ),
        (
            ("end: 2027-01-01 06:00", "end: 2026-12-31 06:00"),
            "schedule.yaml:19: blackouts[1].end: 2026-12-31T06:00:00 is not after the start",
        ),
        (
            ("job: close-books", "job: close-book"),
            "schedule.yaml:17: blackouts[1].job: job close-book does not exist",
        ),
        (
            ("    reason: books closed\n", ""),
            "schedule.yaml:15: blackouts[1]: missing required key reason",
        ),
    ],
)
def test_a_bad_window_is_refused_at_its_line_with_nothing_saved(
    app: App, operator: Actor, fleet: None, broken: tuple[str, str], where: str
) -> None:
    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, FILE.replace(*broken))

    assert caught.value.problems[0].render("schedule.yaml").startswith(where)
    assert counts(app) == (0, 0)


def test_a_viewer_may_plan_windows_but_not_apply_them(app: App, viewer: Actor, fleet: None) -> None:
    assert len(schedule_file.apply_schedule(app, viewer, FILE, dry_run=True).plan.blackouts) == 2

    with pytest.raises(PermissionDenied):
        schedule_file.apply_schedule(app, viewer, FILE)
    assert counts(app) == (0, 0)
