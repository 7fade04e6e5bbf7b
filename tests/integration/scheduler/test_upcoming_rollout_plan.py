"""What `schedule upcoming` says a rollout will do, against what the real scheduler then
does with the slot, on SQLite and PostgreSQL.

The fixture clock starts at 2026-03-02 09:00:30 UTC. Runs execute on the fake executor,
which records each execution in order: the effects compared with the plan shown.
"""

from __future__ import annotations

from sqlalchemy import select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run, Target

ADMIN = Actor("admin", "admin")


def add_targets(app: App, zones: dict[str, str | None]) -> None:
    for name, zone in zones.items():
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
        with app.db.session() as session:
            session.execute(update(Target).where(Target.name == name).values(timezone=zone))


async def run_slot(scheduler: Scheduler, clock: FakeClock) -> None:
    clock.advance(seconds=31)  # 09:01:01, just after the slot
    for _ in range(4):
        await scheduler.tick()
        await scheduler.idle()


def rows(app: App, job: str) -> dict[str, Run]:
    with app.db.read() as session:
        found = session.scalars(select(Run).where(Run.job_name == job)).all()
        return {r.target_name: r for r in found}


async def test_zones_firing_at_one_instant_are_one_rollout_as_upcoming_shows(
    app: App, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    # An hourly job in each target's zone: Berlin, Paris and Tokyo are whole hours apart,
    # so 09:01 UTC is a fire in all three, one slot, and the Berlin canary gates them all.
    add_targets(app, {"berlin1": "Europe/Berlin", "paris1": "Europe/Paris", "tokyo1": "Asia/Tokyo"})
    spec = JobSpec("1 * * * *", "hourly", timezone="target", canary="berlin1")
    jobs.add_job(app, ADMIN, "hourly", spec, bulk=True)

    shown = upcoming_fires(app, ADMIN, UpcomingQuery(hours=0.1, job="hourly")).fires
    for_tokyo = upcoming_fires(app, ADMIN, UpcomingQuery(hours=0.1, target="tokyo1")).fires

    assert sorted(f.zone for f in shown) == ["Asia/Tokyo", "Europe/Berlin", "Europe/Paris"]
    assert {(f.state, f.rollout.describe() if f.rollout else "") for f in shown} == {
        ("fires", "1 canary first, 1 batch of up to 2")
    }
    # Asked about one target, the plan is still the whole slot's (the canary elsewhere).
    assert [(f.zone, f.active, f.state) for f in for_tokyo] == [("Asia/Tokyo", 1, "fires")]
    assert for_tokyo[0].rollout is not None
    assert for_tokyo[0].rollout.describe() == "1 canary first, 1 batch of up to 2"

    await run_slot(fake_scheduler, clock)

    names = [t.name for t, _ in fake.calls]
    assert names[0] == "berlin1" and sorted(names[1:]) == ["paris1", "tokyo1"]
    assert {n: str(r.status) for n, r in rows(app, "hourly").items()} == {
        "berlin1": "succeeded",
        "paris1": "succeeded",
        "tokyo1": "succeeded",
    }
    assert len({r.scheduled_for for r in rows(app, "hourly").values()}) == 1


async def test_a_paused_canary_halts_the_slot_as_upcoming_shows(
    app: App, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_targets(app, {"box0": None, "box1": None, "box2": None})
    spec = JobSpec("1 9 2 3 *", "once", timezone="UTC", canary="box0", max_failures="50%")
    jobs.add_job(app, ADMIN, "once", spec, bulk=True)
    targets.pause_target(app, ADMIN, "box0", "disk swap")

    [fire] = upcoming_fires(app, ADMIN, UpcomingQuery(hours=1, job="once")).fires

    assert (fire.state, fire.active, fire.paused) == ("halted", 2, 1)
    assert fire.rollout is not None
    assert fire.rollout.describe() == "halted: canary box0 is paused; nothing runs"

    await run_slot(fake_scheduler, clock)

    assert fake.calls == []
    found = rows(app, "once")
    assert found["box0"].status == RunStatus.SKIPPED
    for name in ("box1", "box2"):
        assert found[name].status == RunStatus.SKIPPED
        assert found[name].skip_kind == SkipKind.ROLLOUT_HALTED


async def test_with_the_canary_running_the_same_slot_runs_as_upcoming_shows(
    app: App, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    # Negative control of the test above: nothing paused, the plan says it fires and it does.
    add_targets(app, {"box0": None, "box1": None, "box2": None})
    spec = JobSpec("1 9 2 3 *", "once", timezone="UTC", canary="box0", max_failures="50%")
    jobs.add_job(app, ADMIN, "once", spec, bulk=True)

    [fire] = upcoming_fires(app, ADMIN, UpcomingQuery(hours=1, job="once")).fires

    assert fire.state == "fires"
    assert fire.rollout is not None
    assert fire.rollout.describe() == "1 canary first, 1 batch of up to 2, halt after 2 failed"

    await run_slot(fake_scheduler, clock)

    assert next(t.name for t, _ in fake.calls) == "box0"
    assert sorted(t.name for t, _ in fake.calls) == ["box0", "box1", "box2"]
