"""A job's DST policy on a real database (SQLite and PostgreSQL): the run store fires what
the policy says around Warsaw's transitions of 2027, the upcoming view and the job page's
service preview them, and bad input (an unknown choice, a choice in a zone without DST) is
refused naming the field with nothing saved, from the service and from a schedule file.

Europe/Warsaw 2027: 2027-03-28 02:00 CET -> 03:00 CEST; 2027-10-31 03:00 CEST -> 02:00 CET.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.scheduler.service import policy_from
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.upcoming import UpcomingQuery, dst_preview_of, upcoming_fires
from fleetcron.services.schedule_file import apply_schedule, export_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Job, Run

WARSAW = "Europe/Warsaw"


@pytest.fixture
def box(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL, timezone=WARSAW))


def add(
    app: App,
    admin: Actor,
    name: str,
    schedule: str,
    *,
    dst_gap: str = "cronie",
    dst_fold: str = "cronie",
) -> None:
    spec = JobSpec(schedule, f"echo {name}", WARSAW, dst_gap=dst_gap, dst_fold=dst_fold)
    jobs.add_job(app, admin, name, spec, bulk=True)


def fired_between(app: App, clock: FakeClock, until: datetime) -> dict[str, list[datetime]]:
    """Drive the run store every 15 minutes until ``until``: each job's slots fired."""
    store = RunStore(app.db, node="test", policy=policy_from(app), clock=clock)
    while clock.now < until:
        clock.advance(minutes=15)
        store.claim_due(clock.now)
    with app.db.read() as session:
        runs = session.execute(select(Run.job_name, Run.scheduled_for)).all()
    found: dict[str, list[datetime]] = {}
    for job, at in sorted(runs, key=lambda r: r[1]):
        found.setdefault(job, []).append(at.replace(tzinfo=UTC) if at.tzinfo is None else at)
    return found


@pytest.mark.usefixtures("box")
def test_the_run_store_fires_each_gap_choice(app: App, admin: Actor, clock: FakeClock) -> None:
    clock.now = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
    add(app, admin, "cron-rule", "30 2 * * *")
    add(app, admin, "skipping", "30 2 * * *", dst_gap="skip")
    add(app, admin, "hourly-at-end", "30 * * * *", dst_gap="run_at_gap_end")

    fired = fired_between(app, clock, datetime(2027, 3, 29, 1, 0, tzinfo=UTC))

    # 02:30 does not exist on the 28th: cron's rule runs it at 03:00 CEST (01:00 UTC).
    assert fired["cron-rule"] == [
        datetime(2027, 3, 28, 1, 0, tzinfo=UTC),
        datetime(2027, 3, 29, 0, 30, tzinfo=UTC),
    ]
    assert fired["skipping"] == [datetime(2027, 3, 29, 0, 30, tzinfo=UTC)]
    night = [f for f in fired["hourly-at-end"] if datetime(2027, 3, 28, 0, tzinfo=UTC) <= f]
    # 00:30 CET, 01:30 CET, then 02:30 (skipped) runs at 03:00 CEST, then 03:30 CEST.
    assert night[:4] == [
        datetime(2027, 3, 28, 0, 30, tzinfo=UTC),
        datetime(2027, 3, 28, 1, 0, tzinfo=UTC),
        datetime(2027, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2027, 3, 28, 2, 30, tzinfo=UTC),
    ]


@pytest.mark.usefixtures("box")
def test_the_run_store_fires_each_fold_choice(app: App, admin: Actor, clock: FakeClock) -> None:
    clock.now = datetime(2027, 10, 30, 12, 0, tzinfo=UTC)
    add(app, admin, "cron-rule", "30 2 * * *")
    add(app, admin, "second-pass", "30 2 * * *", dst_fold="last")
    add(app, admin, "both-passes", "30 2 * * *", dst_fold="both")

    fired = fired_between(app, clock, datetime(2027, 10, 31, 6, 0, tzinfo=UTC))

    assert fired["cron-rule"] == [datetime(2027, 10, 31, 0, 30, tzinfo=UTC)]  # 02:30 CEST
    assert fired["second-pass"] == [datetime(2027, 10, 31, 1, 30, tzinfo=UTC)]  # 02:30 CET
    assert fired["both-passes"] == [
        datetime(2027, 10, 31, 0, 30, tzinfo=UTC),
        datetime(2027, 10, 31, 1, 30, tzinfo=UTC),
    ]


@pytest.mark.usefixtures("box")
def test_the_upcoming_view_and_the_job_page_preview_the_transitions(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2027, 3, 20, 12, 0, tzinfo=UTC)
    add(app, admin, "nightly", "30 2 * * *")
    add(app, admin, "skipping", "30 2 * * *", dst_gap="skip", dst_fold="last")

    texts = [n.text for n in upcoming_fires(app, admin, UpcomingQuery(job="nightly")).dst]
    assert texts == [
        "Europe/Warsaw, 2027-03-28: 02:30 does not exist → runs at 03:00",
        "Europe/Warsaw, 2027-10-31: 02:30 happens twice → runs once, on the first pass (+02:00)",
    ]
    assert [n.text for n in dst_preview_of(app, admin, "skipping")] == [
        "Europe/Warsaw, 2027-03-28: 02:30 does not exist → skipped",
        "Europe/Warsaw, 2027-10-31: 02:30 happens twice → runs once, on the second pass (+01:00)",
    ]
    # Every job at once: one line per job and transition that changes a scheduled time.
    everything = upcoming_fires(app, admin, UpcomingQuery())
    assert sorted({n.job for n in everything.dst}) == ["nightly", "skipping"]


def test_a_dst_choice_in_a_zone_without_dst_is_refused_and_nothing_saved(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2027, 3, 20, 12, 0, tzinfo=UTC)
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL, timezone=WARSAW))
    spec = JobSpec("30 2 * * *", "echo x", "Asia/Tokyo", dst_gap="skip")
    with pytest.raises(InvalidInput) as refused:
        jobs.add_job(app, admin, "tokyo", spec, bulk=True)
    assert (refused.value.field, refused.value.value) == ("dst_gap", "skip")
    assert "Asia/Tokyo has no DST transition" in refused.value.message
    with pytest.raises(InvalidInput) as unknown:
        jobs.add_job(
            app, admin, "odd", JobSpec("30 2 * * *", "echo x", WARSAW, dst_fold="twice"), bulk=True
        )
    assert unknown.value.field == "dst_fold"
    assert "first, both, last" in unknown.value.message
    with app.db.read() as session:
        assert session.scalars(select(Job.name)).all() == []
    # In a zone with DST it is taken; moving that job to a zone without DST is refused,
    # and the job keeps its zone.
    add(app, admin, "warsaw", "30 2 * * *", dst_gap="skip")
    with pytest.raises(InvalidInput) as moved:
        jobs.edit_job(app, admin, "warsaw", timezone="UTC")
    assert moved.value.field == "dst_gap"
    assert jobs.show_job(app, admin, "warsaw").timezone == WARSAW
    # Each target's own zone: taken (the choice acts where the targets have DST).
    jobs.add_job(
        app, admin, "local", JobSpec("30 2 * * *", "echo l", "target", dst_fold="last"), bulk=True
    )
    assert jobs.show_job(app, admin, "local").dst_fold == "last"


@pytest.mark.usefixtures("box")
def test_a_schedule_file_sets_the_choices_and_names_a_bad_one(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2027, 3, 20, 12, 0, tzinfo=UTC)
    text = (
        "version: 1\n"
        "jobs:\n"
        "  - name: nightly\n"
        "    bulk: true\n"
        '    schedule: "30 2 * * *"\n'
        f"    timezone: {WARSAW}\n"
        "    command: echo nightly\n"
        "    dst_gap: skip\n"
        "    dst_fold: last\n"
    )
    apply_schedule(app, admin, text)
    view = jobs.show_job(app, admin, "nightly")
    assert (view.dst_gap, view.dst_fold) == ("skip", "last")
    assert "dst_gap: skip" in export_schedule(app, admin)

    with pytest.raises(ScheduleFileError, match="dst_gap"):
        apply_schedule(app, admin, text.replace(f"timezone: {WARSAW}", "timezone: UTC"))
    with pytest.raises(ScheduleFileError, match="dst_fold"):
        apply_schedule(app, admin, text.replace("dst_fold: last", "dst_fold: twice"))
    assert jobs.show_job(app, admin, "nightly").timezone == WARSAW


@pytest.mark.usefixtures("box")
def test_changing_the_policy_moves_the_next_fire_at_once(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    clock.now = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
    add(app, admin, "nightly", "30 2 * * *")

    def next_fire() -> datetime | None:
        return jobs.show_job(app, admin, "nightly").assignments[0].next_fire_at

    assert next_fire() == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 03:00 CEST
    jobs.edit_job(app, admin, "nightly", dst_gap="skip")
    assert next_fire() == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)
    jobs.edit_job(app, admin, "nightly", dst_gap="cronie")
    assert next_fire() == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
