"""Calendars declared in a schedule file (``calendars:``), on SQLite and PostgreSQL: applied
in the jobs' transaction, so a job may name a calendar declared next to it; exported and
applied again unchanged; a bad calendar refused at its line with nothing saved; each
calendar audited as the CLI's are."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.cli.apply_cmd import describe_plan
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import PermissionDenied
from fleetcron.services import schedule_file
from fleetcron.services.calendars.sets import CalendarSpec, add_calendar, show_calendar
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, CalendarRow, Job

FILE = """version: 1
calendars:
  - name: holidays
    description: public holidays
    dates: [2027-01-01, "2027-12-25"]
  - name: business-days
    weekdays: mon-fri
    except: holidays
jobs:
  - name: close-books
    target: web1
    schedule: "0 2 * * *"
    command: /usr/local/bin/close-books
    run_only_on: "business-days:last"
    never_on: holidays
"""


@pytest.fixture
def fleet(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL))


def counts(app: App) -> tuple[int, int]:
    """How many calendars and jobs there are."""
    with app.db.read() as session:
        calendars = session.scalar(select(func.count()).select_from(CalendarRow)) or 0
        jobs = session.scalar(select(func.count()).select_from(Job)) or 0
        return calendars, jobs


def test_a_job_names_a_calendar_declared_in_the_same_file(
    app: App, operator: Actor, fleet: None
) -> None:
    plan = schedule_file.apply_schedule(app, operator, FILE, dry_run=True).plan
    assert describe_plan(plan)[:2] == [
        "+ calendar holidays (2 dates)",
        "+ calendar business-days (0 dates, mon,tue,wed,thu,fri less holidays)",
    ]
    assert counts(app) == (0, 0)  # a dry run writes nothing

    assert schedule_file.apply_schedule(app, operator, FILE).applied

    holidays = show_calendar(app, operator, "holidays")
    assert (holidays.description, holidays.dates) == (
        "public holidays",
        [date(2027, 1, 1), date(2027, 12, 25)],
    )
    business = show_calendar(app, operator, "business-days")
    assert (business.weekdays, business.except_name) == ("mon,tue,wed,thu,fri", "holidays")
    assert business.used_by == ["job close-books"]
    with app.db.read() as session:
        events = session.execute(
            select(AuditEvent.actor, AuditEvent.action, AuditEvent.success)
            .where(AuditEvent.action.like("calendar.%"))
            .order_by(AuditEvent.id)
        ).all()
    assert [tuple(e) for e in events] == [
        ("olivia", "calendar.add", True),
        ("olivia", "calendar.add", True),
    ]


def test_export_writes_the_calendars_back_and_applying_it_changes_nothing(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)

    exported = schedule_file.export_schedule(app, operator)

    assert "calendars:\n  - name: business-days\n    weekdays: mon,tue,wed,thu,fri\n" in exported
    assert "    dates: ['2027-01-01', '2027-12-25']\n" in exported
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty
    assert schedule_file.apply_schedule(app, operator, FILE).plan.empty


def test_a_changed_calendar_is_planned_applied_and_audited_as_a_change(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)
    changed = FILE.replace('"2027-12-25"]', '"2027-12-25", "2027-12-26"]')

    plan = schedule_file.apply_schedule(app, operator, changed).plan

    assert describe_plan(plan) == ["~ calendar holidays (dates)"]
    assert show_calendar(app, operator, "holidays").count == 3
    with app.db.read() as session:
        last = session.scalars(select(AuditEvent).order_by(AuditEvent.id.desc())).first()
        change = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "calendar.change")
        ).one()
    assert last is not None and last.action == "schedule.apply"
    assert change.detail["changed"] == ["dates"]
    assert (change.detail["via"], change.detail["file"]) == ("schedule.apply", "schedule.yaml")


@pytest.mark.parametrize(
    ("broken", "where"),
    [
        (
            ('"2027-12-25"]', '"2027-12-32"]'),
            "schedule.yaml:5: calendars[0].dates[1]: a string '2027-12-32' is not a date "
            "YYYY-MM-DD",
        ),
        (
            ("weekdays: mon-fri", "weekdays: mon-fry"),
            "schedule.yaml:7: calendars[1].weekdays: ",
        ),
        (
            ("except: holidays", "except: holydays"),
            "schedule.yaml:8: calendars[1].except: there is no calendar 'holydays'",
        ),
        (
            ("name: business-days", "name: Business Days"),
            "schedule.yaml:6: calendars[1].name: 'Business Days' is not a calendar name",
        ),
    ],
)
def test_a_bad_calendar_is_refused_at_its_line_with_nothing_saved(
    app: App, operator: Actor, fleet: None, broken: tuple[str, str], where: str
) -> None:
    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, FILE.replace(*broken))

    assert caught.value.problems[0].render("schedule.yaml").startswith(where)
    assert counts(app) == (0, 0)


def test_an_except_loop_is_refused(app: App, admin: Actor, operator: Actor, fleet: None) -> None:
    add_calendar(app, admin, CalendarSpec("a", weekdays="sat,sun"))
    add_calendar(app, admin, CalendarSpec("b", weekdays="sun", except_name="a"))
    text = "version: 1\ncalendars:\n  - name: a\n    weekdays: sat,sun\n    except: b\njobs: []\n"

    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, text)

    assert str(caught.value) == (
        "schedule.yaml:5: calendars[0].except: 'b' leads back to 'a': a loop"
    )
    assert show_calendar(app, operator, "a").except_name is None


def test_a_viewer_may_plan_calendars_but_not_apply_them(
    app: App, viewer: Actor, fleet: None
) -> None:
    text = "version: 1\ncalendars:\n  - name: h\n    dates: [2027-01-01]\njobs: []\n"
    assert len(schedule_file.apply_schedule(app, viewer, text, dry_run=True).plan.calendars) == 1

    with pytest.raises(PermissionDenied):
        schedule_file.apply_schedule(app, viewer, text)
    assert counts(app) == (0, 0)
