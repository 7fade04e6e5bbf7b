"""The time-policy job options in schedule files: ``on_blackout``, ``run_only_on`` and
``never_on`` are applied, exported and applied again unchanged; a calendar the
installation does not have is reported at its line, naming the key, with nothing applied.
(The windows and calendars themselves are made with the CLI, API or page.)"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services import schedule_file
from fleetcron.services.calendars.sets import CalendarSpec, add_calendar
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

FILE = """version: 1
jobs:
  - name: close-books
    target: web1
    schedule: "0 2 * * *"
    command: /usr/local/bin/close-books
    on_blackout: defer
    run_only_on: "business-days:last"
    never_on: holidays
"""


@pytest.fixture
def fleet(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL))
    add_calendar(app, admin, CalendarSpec("holidays", dates=["2026-12-24"]))
    add_calendar(
        app, admin, CalendarSpec("business-days", weekdays="mon-fri", except_name="holidays")
    )


def test_the_options_are_applied_exported_and_applied_again_unchanged(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)
    with app.db.read() as session:
        job = session.scalars(select(Job)).one()
        assert (job.on_blackout, job.run_only_on, job.never_on) == (
            "defer",
            "business-days:last",
            "holidays",
        )

    exported = schedule_file.export_schedule(app, operator)
    assert "    on_blackout: defer\n" in exported
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty


def test_an_unknown_calendar_is_reported_at_its_line_and_nothing_is_applied(
    app: App, operator: Actor, fleet: None
) -> None:
    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(
            app, operator, FILE.replace("never_on: holidays", "never_on: holydays")
        )

    assert str(caught.value).startswith(
        "schedule.yaml:9: jobs[0].never_on: there is no calendar 'holydays'"
    )
    with app.db.read() as session:
        assert session.scalar(select(Job)) is None
