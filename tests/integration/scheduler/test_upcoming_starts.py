"""The upcoming view's start of each target against the real scheduler's actual start, on
SQLite and PostgreSQL, for a bulk job (spread and jitter over four targets) and an
individual job with a spread: both read one rule (``core/start_window.py``).

The fixture clock starts at 2026-03-02 09:00:30 UTC; both jobs fire once, at 09:01. The
fake executor's script notes the loop time of each start; the claim deadline records the
wait the scheduler gave each run exactly (timeout + wait + margin).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import DEADLINE_MARGIN
from fleetcron.store.schema import Run

SLOT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
ONCE = "1 9 2 3 *"
TIMEOUT_S = 30
BULK = [f"box{i}" for i in range(4)]
# How late the event loop may start a run once the tick that launched it is done (the
# tick's own time, however long a loaded machine makes it, is measured and allowed too).
LOOP_DELAY_S = 2.0


def shown_starts(app: App, actor: Actor, job: str, names: list[str]) -> dict[str, float]:
    """Seconds after the slot at which the upcoming view says each target starts."""
    shown: dict[str, float] = {}
    for name in names:
        (fire,) = upcoming_fires(app, actor, UpcomingQuery(hours=1, job=job, target=name)).fires
        assert fire.at == SLOT
        assert fire.first_start_s == fire.last_start_s  # one target: one moment
        shown[name] = fire.first_start_s
    return shown


def applied_waits(app: App, job: str) -> dict[str, float]:
    """The wait the scheduler gave each run, read back from its claim deadline."""
    with app.db.read() as session:
        found = session.scalars(select(Run).where(Run.job_name == job)).all()
    waits = {}
    for run in found:
        assert run.deadline_at is not None and run.started_at is not None
        extra = run.deadline_at - run.started_at - DEADLINE_MARGIN
        waits[run.target_name] = round((extra - timedelta(seconds=TIMEOUT_S)).total_seconds(), 3)
    return waits


async def test_upcoming_starts_are_the_schedulers_actual_starts_for_bulk_and_individual_jobs(
    app: App, operator: Actor, fake: FakeExecutor, clock: FakeClock
) -> None:
    admin = Actor("admin", "admin")
    for name in BULK:
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, labels=["role=web"]))
    targets.add_target(app, admin, TargetSpec("solo", TargetKind.LOCAL))
    bulk = JobSpec(ONCE, "reload", timeout_s=TIMEOUT_S, spread_s=3, jitter_s=1)
    jobs.add_job(app, operator, "reload", bulk, bulk=True, selector="role=web")
    single = JobSpec(ONCE, "backup", timeout_s=TIMEOUT_S, spread_s=4)
    jobs.add_job(app, operator, "backup", single, target="solo")

    expected = {
        "reload": shown_starts(app, operator, "reload", BULK),
        "backup": shown_starts(app, operator, "backup", ["solo"]),
    }
    # Negative control: the rule the upcoming view once had (no spread for an individual
    # job) would show 0 here, which the comparison below would catch.
    assert expected["backup"]["solo"] > 0.3, expected
    (whole,) = upcoming_fires(app, operator, UpcomingQuery(hours=1, job="reload")).fires
    assert (whole.first_start_s, whole.last_start_s) == (
        min(expected["reload"].values()),
        max(expected["reload"].values()),
    )

    loop = asyncio.get_running_loop()
    started: dict[str, float] = {}

    def note(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        started[target.name] = loop.time()
        return FakeOutcome(exit_code=0)

    fake.script = note
    scheduler = Scheduler(app, clock=clock, executors={"local": fake})
    await scheduler.start()
    try:
        clock.advance(seconds=30)  # the slot itself: the waits are measured from it
        fired_at = loop.time()
        await scheduler.tick()
        ticked = loop.time() - fired_at  # the runs' waits begin within the tick
        await scheduler.idle()
    finally:
        await scheduler.shutdown()

    for job, starts in expected.items():
        assert applied_waits(app, job) == {n: round(s, 3) for n, s in starts.items()}
        for name, start_s in starts.items():
            real = started[name] - fired_at
            late = ticked + LOOP_DELAY_S
            assert start_s <= real + 0.05 < start_s + late, (job, name, real, start_s, ticked)
