"""A job in the ``target`` zone, run by the real scheduler (real local processes) with a
hand-moved clock: each target's run starts at 02:00 on that target's own clock, across
Europe's spring-forward night; a job in a fixed zone runs everywhere at one instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run

ZONES = {"berlin": "Europe/Berlin", "newyork": "America/New_York", "tokyo": "Asia/Tokyo"}
#: Prints the run's slot and target as the command sees them.
COMMAND = 'echo "$FLEETCRON_TARGET $FLEETCRON_SCHEDULED_FOR"'


async def test_each_target_runs_at_two_oclock_on_its_own_clock(
    app: App, admin: Actor, scheduler: Scheduler, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, 30, tzinfo=UTC)
    for name, zone in ZONES.items():
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, timezone=zone))
    jobs.add_job(app, admin, "nightly", JobSpec("0 2 * * *", COMMAND, "target"), bulk=True)
    jobs.add_job(
        app, admin, "fixed", JobSpec("0 2 * * *", COMMAND + " fixed", "Europe/Berlin"), bulk=True
    )

    # Through the night, ten minutes at a time, as a scheduler that ticks would see it.
    while clock.now < datetime(2026, 3, 29, 7, 0, tzinfo=UTC):
        clock.advance(minutes=10)
        await scheduler.tick()
        await scheduler.idle()

    with app.db.read() as session:
        done = session.scalars(select(Run).order_by(Run.scheduled_for, Run.target_name)).all()
    nightly = {r.target_name: r for r in done if r.job_name == "nightly"}
    expected = {
        "tokyo": datetime(2026, 3, 28, 17, 0, tzinfo=UTC),  # 02:00 JST
        "berlin": datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST: 02:00 is skipped
        "newyork": datetime(2026, 3, 29, 6, 0, tzinfo=UTC),  # 02:00 EDT
    }
    assert {t: r.scheduled_for for t, r in nightly.items()} == expected
    for target, run in nightly.items():
        assert run.status == "succeeded", (target, run.status, run.stderr_head)
        assert run.stdout_head is not None and run.stdout_head.startswith(f"{target} 2026-")
        # Started on the tick after its slot: within the ten minutes the clock moved.
        assert run.started_at is not None
        assert timedelta(0) <= run.started_at - expected[target] < timedelta(minutes=10)
    # The negative control: the fixed zone runs every target at the same instant.
    fixed = {r.target_name: r.scheduled_for for r in done if r.job_name == "fixed"}
    assert fixed == {t: datetime(2026, 3, 29, 1, 0, tzinfo=UTC) for t in ZONES}
