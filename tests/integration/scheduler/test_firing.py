"""The scheduler fires each slot once, records everything, and skips with a reason.

The fixture clock starts at 2026-03-02 09:00:30 UTC (a Monday); tests move it by hand.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler import service
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.runs.views import show_run
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run

EVERY_MINUTE = "* * * * *"


def runs_of(app: App, job: str) -> list[Run]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(Run).where(Run.job_name == job).order_by(Run.scheduled_for, Run.attempt)
            )
        )


@pytest.fixture
def local(app: App, operator: Actor) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    return "box"


def add(app: App, actor: Actor, name: str, command: str, **options: object) -> None:
    spec = JobSpec(schedule=str(options.pop("schedule", EVERY_MINUTE)), command=command, **options)  # type: ignore[arg-type]
    jobs.add_job(app, actor, name, spec, target="box")


async def test_a_due_slot_runs_once_and_records_its_output(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "hello", "echo out; echo err >&2; exit 3")
    clock.advance(seconds=31)  # 09:01:01

    stats = await scheduler.tick()
    await scheduler.idle()

    assert stats.dispatched == 1
    [run] = runs_of(app, "hello")
    assert run.status == "failed"
    assert run.exit_code == 3
    assert (run.stdout_head, run.stderr_head) == ("out\n", "err\n")
    assert run.scheduled_for == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    assert run.trigger == "schedule"
    assert run.node == app.node_name
    assert run.duration_ms is not None


async def test_ticking_again_in_the_same_minute_does_not_fire_twice(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "hello", "true")
    clock.advance(seconds=31)
    await scheduler.tick()
    clock.advance(seconds=20)

    stats = await scheduler.tick()
    await scheduler.idle()

    assert stats.dispatched == 0
    assert len(runs_of(app, "hello")) == 1


async def test_the_command_gets_its_run_identity_in_the_environment(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    show = 'echo "$FLEETCRON_JOB $FLEETCRON_TARGET $FLEETCRON_SCHEDULED_FOR $FLEETCRON_RUN_ID"'
    add(app, operator, "env", show)
    clock.advance(seconds=31)

    await scheduler.tick()
    await scheduler.idle()

    [run] = runs_of(app, "env")
    assert run.stdout_head == f"env box 2026-03-02T09:01:00+00:00 {run.id}\n"


async def test_slots_missed_while_down_are_recorded_and_only_the_current_one_runs(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "minutely", "true")
    clock.advance(minutes=5, seconds=1)  # 09:05:31: slots 09:01 .. 09:05 are due

    stats = await scheduler.tick()
    await scheduler.idle()

    assert (stats.dispatched, stats.missed) == (1, 4)
    records = runs_of(app, "minutely")
    assert [(r.scheduled_for.minute, r.status) for r in records] == [
        (1, "missed"),
        (2, "missed"),
        (3, "missed"),
        (4, "missed"),
        (5, "succeeded"),
    ]
    assert all("not running" in (r.reason or "") for r in records[:4])


async def test_a_long_downtime_records_a_summary_after_the_cap(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "minutely", "true")
    clock.advance(hours=2)  # 120 slots due; only the newest is within the grace window

    await scheduler.tick()
    await scheduler.idle()

    records = runs_of(app, "minutely")
    assert [r.status for r in records] == ["missed"] * 11 + ["succeeded"]
    assert "109 more slots missed" in (records[10].reason or "")


async def test_catchup_latest_runs_the_newest_missed_slot_once(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "nightly", "true", schedule="0 2 * * *", catchup="latest")
    clock.now = datetime(2026, 3, 4, 9, 0, tzinfo=UTC)  # missed 03-03 02:00 and 03-04 02:00

    await scheduler.tick()
    await scheduler.idle()

    records = runs_of(app, "nightly")
    assert [(r.scheduled_for.day, r.status, r.trigger) for r in records] == [
        (3, "missed", "schedule"),
        (4, "succeeded", "catch-up"),
    ]


async def test_overlap_forbid_skips_a_slot_while_the_previous_run_goes_on(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "slow", "sleep 30", overlap="forbid")
    clock.advance(seconds=31)
    await scheduler.tick()
    clock.advance(minutes=1)

    await scheduler.tick()

    records = runs_of(app, "slow")
    assert [r.status for r in records] == ["running", "skipped"]
    assert records[1].reason == "overlap: the previous run is still going"


async def test_overlap_allow_runs_the_next_slot_alongside(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "slow", "sleep 30")
    clock.advance(seconds=31)
    await scheduler.tick()
    clock.advance(minutes=1)

    await scheduler.tick()

    assert [r.status for r in runs_of(app, "slow")] == ["running", "running"]


async def test_a_run_past_its_timeout_is_killed_and_recorded(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "stuck", "sleep 60", timeout_s=1)
    clock.advance(seconds=31)

    await scheduler.tick()
    await scheduler.idle()

    [run] = runs_of(app, "stuck")
    assert run.status == "timed_out"
    assert run.exit_code is None


async def test_a_failure_is_retried_with_backoff_as_its_own_attempt(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "flaky", "exit 1", retries=2, retry_on=("failed",), retry_backoff_s=1)
    clock.advance(seconds=31)

    await scheduler.tick()
    await scheduler.idle()

    records = runs_of(app, "flaky")
    assert [(r.attempt, r.trigger, r.status) for r in records] == [
        (1, "schedule", "failed"),
        (2, "retry", "failed"),
        (3, "retry", "failed"),
    ]
    assert len({r.scheduled_for for r in records}) == 1


async def test_a_disabled_assignment_does_not_fire_and_records_nothing(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "paused", "true")
    jobs.set_enabled(app, operator, "paused", False)
    clock.advance(minutes=3)

    await scheduler.tick()

    assert runs_of(app, "paused") == []


async def test_a_manual_run_is_queued_and_started_on_the_next_tick(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "report", "echo manual", schedule="0 0 1 1 *")
    [run_id] = runs.request_run(app, operator, "report")
    assert show_run(app, operator, run_id).status == "queued"

    await scheduler.tick()
    await scheduler.idle()

    run = show_run(app, operator, run_id)
    assert (run.status, run.trigger, run.actor, run.stdout_head) == (
        "succeeded",
        "manual",
        "olivia",
        "manual\n",
    )


async def test_runs_left_running_by_a_crash_are_closed_as_lost_on_start(
    app: App, operator: Actor, local: str, clock: FakeClock
) -> None:
    add(app, operator, "hello", "sleep 30")
    first = Scheduler(app, clock=clock)
    await first.start()
    clock.advance(seconds=31)
    await first.tick()
    for task in first.running.values():
        task.cancel()  # the process "dies": nothing records the outcome
    await asyncio.gather(*first.running.values(), return_exceptions=True)

    clock.advance(seconds=30 * 60)
    second = Scheduler(app, clock=clock)
    await second.start()
    await second.shutdown()

    [run] = runs_of(app, "hello")
    assert run.status == "lost"


async def test_stopping_interrupts_runs_that_outlive_the_grace_period(
    app: App, operator: Actor, local: str, clock: FakeClock
) -> None:
    add(app, operator, "long", "sleep 60")
    sched = Scheduler(app, clock=clock)
    await sched.start()
    clock.advance(seconds=31)
    await sched.tick()

    await sched.shutdown()

    [run] = runs_of(app, "long")
    assert run.status == "interrupted"
    assert "stopped" in (run.reason or "")


async def test_a_completion_never_overwrites_a_run_closed_meanwhile(
    app: App,
    operator: Actor,
    local: str,
    fake: FakeExecutor,
    fake_scheduler: Scheduler,
    clock: FakeClock,
) -> None:
    # About recording, not executing: the run "lasts" 0.2 s on the event loop, and the
    # database update below happens before the loop runs again.
    fake.script = {"sleep 1": FakeOutcome(duration_s=0.2)}
    add(app, operator, "slowish", "sleep 1")
    clock.advance(seconds=31)
    await fake_scheduler.tick()
    with app.db.session() as session:
        session.execute(update(Run).values(status="lost"))

    await fake_scheduler.idle()

    [run] = runs_of(app, "slowish")
    assert run.status == "lost"
    assert [request.command for _, request in fake.calls] == ["sleep 1"]


async def test_a_job_in_another_time_zone_fires_at_its_local_time(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
    add(app, operator, "berlin", "true", schedule="0 10 * * *", timezone="Europe/Berlin")
    clock.now = datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)  # 10:00:05 in Berlin (CET)

    await scheduler.tick()
    await scheduler.idle()

    [run] = runs_of(app, "berlin")
    assert run.scheduled_for == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert run.status == "succeeded"
    assert clock.now - run.scheduled_for < timedelta(seconds=60)


async def test_a_target_kind_without_an_executor_is_not_started_naming_the_kind(
    app: App, operator: Actor, local: str, clock: FakeClock
) -> None:
    fake = FakeExecutor(clock=clock)
    sched = Scheduler(app, clock=clock, executors={"ssh": fake})
    await sched.start()
    add(app, operator, "hello", "true")
    clock.advance(seconds=31)

    await sched.tick()
    await sched.idle()
    await sched.shutdown()

    [run] = runs_of(app, "hello")
    assert run.status == "connect_error"
    assert "of kind 'local', which this scheduler has no executor for (ssh)" in (run.error or "")
    assert fake.calls == [] and fake.closed


@pytest.mark.parametrize("check_every_s", [0.0, 3600.0], ids=["checked", "control-start-only"])
async def test_runs_a_crash_left_inside_their_deadline_are_closed_when_it_passes(
    app: App,
    operator: Actor,
    local: str,
    fake: FakeExecutor,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    check_every_s: float,
) -> None:
    """A restart within a run's deadline (systemd's Restart=on-failure) finds the crashed
    run still inside it; once the deadline passes, the running scheduler records it lost,
    so an ``overlap: forbid`` job fires again. The control checks only at the start, as
    before: the run stays ``running`` and every later slot is skipped for overlap."""
    monkeypatch.setattr(service, "LOST_CHECK_S", check_every_s)
    fake.script = {"sleep 30": FakeOutcome(duration_s=30)}
    add(app, operator, "slow", "sleep 30", timeout_s=60, overlap="forbid")
    first = Scheduler(app, clock=clock, executors={"local": fake})
    await first.start()
    clock.advance(seconds=31)  # 09:01:01
    await first.tick()
    for task in first.running.values():
        task.cancel()  # the process "dies": nothing records the outcome
    await asyncio.gather(*first.running.values(), return_exceptions=True)

    # The slot fired after the restart runs its 30 s on the fake clock, not in real time.
    on_the_clock = FakeExecutor(fake.script, clock=clock, sleep=clock.sleep)
    second = Scheduler(app, clock=clock, executors={"local": on_the_clock})
    await second.start()  # at once: the run's deadline is still ahead
    assert [r.status for r in runs_of(app, "slow")] == ["running"]
    clock.advance(seconds=10 * 60)  # 09:11:01, long past the deadline
    stats = await second.tick()
    await second.idle()
    await second.shutdown()

    statuses = [(r.scheduled_for.minute, r.status) for r in runs_of(app, "slow")]
    if check_every_s == 0.0:
        assert stats.dispatched == 1
        assert statuses[0] == (1, "lost")
        assert statuses[-1] == (11, "succeeded")
    else:
        assert stats.dispatched == 0
        assert statuses[0] == (1, "running")
        assert statuses[-1] == (11, "skipped")
