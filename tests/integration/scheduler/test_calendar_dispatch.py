"""Calendars in the real scheduler, on SQLite and PostgreSQL (fake executor, a hand-moved
clock starting at Monday 2026-03-02 09:00:30 UTC): a date a job's calendars refuse is no
fire time, so nothing is recorded for it (no skip, no miss), and the next allowed date's
first fire time is where the assignment moves on to."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.calendars.sets import CalendarSpec, add_calendar
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, Run


@pytest.fixture
def minutely(app: App, admin: Actor) -> str:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    add_calendar(app, admin, CalendarSpec("closures", dates=["2026-03-02", "2026-03-03"]))
    jobs.add_job(app, admin, "sync", JobSpec(schedule="* * * * *", command="true"), target="box")
    return "sync"


def state(app: App) -> tuple[list[str], datetime | None]:
    with app.db.read() as session:
        statuses = list(session.scalars(select(Run.status).order_by(Run.id)))
        next_fire = session.scalars(select(Assignment.next_fire_at)).one()
    return [str(s) for s in statuses], next_fire


async def three_minutes(scheduler: Scheduler, clock: FakeClock) -> None:
    for _ in range(3):
        clock.advance(minutes=1)
        await scheduler.tick()
        await scheduler.idle()


async def test_dates_a_calendar_refuses_are_no_fire_times(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, admin: Actor, minutely: str
) -> None:
    jobs.edit_job(app, admin, minutely, never_on="closures")

    await three_minutes(fake_scheduler, clock)

    statuses, next_fire = state(app)
    assert statuses == []  # neither skipped nor missed: not fire times at all
    assert next_fire == datetime(2026, 3, 4, 0, 0, tzinfo=UTC)


async def test_without_the_calendar_the_same_minutes_run(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, minutely: str
) -> None:
    """Negative control: the job without never_on runs each minute."""
    await three_minutes(fake_scheduler, clock)

    assert state(app)[0] == ["succeeded"] * 3


async def test_run_only_on_the_last_date_of_the_month_waits_for_it(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, admin: Actor, minutely: str
) -> None:
    add_calendar(app, admin, CalendarSpec("weekdays", weekdays="mon-fri"))
    jobs.edit_job(app, admin, minutely, schedule="0 2 * * *", run_only_on="weekdays:last")

    await three_minutes(fake_scheduler, clock)

    # March 2026 ends on a Tuesday: its last weekday is the 31st.
    assert state(app) == ([], datetime(2026, 3, 31, 2, 0, tzinfo=UTC))


def test_schedule_upcoming_leaves_out_the_refused_dates(
    app: App, admin: Actor, minutely: str
) -> None:
    jobs.edit_job(app, admin, minutely, schedule="0 2 * * *")
    before = upcoming_fires(app, admin, UpcomingQuery(hours=72, job=minutely))
    jobs.edit_job(app, admin, minutely, never_on="closures")
    after = upcoming_fires(app, admin, UpcomingQuery(hours=72, job=minutely))

    # Control first: without the calendar the 3rd's 02:00 is among the fires.
    assert [f.at.day for f in before.fires] == [3, 4, 5]
    assert [f.at.day for f in after.fires] == [4, 5]
