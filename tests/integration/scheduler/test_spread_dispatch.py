"""A job's spread applied at dispatch by the real scheduler, on SQLite and PostgreSQL: each
target's start waits its own offset (so the fleet starts in the order of the offsets); the
claim deadline adds the wait (spread offset plus jitter) to the timeout, so the watchdog
budget the run is given after the wait is its whole budget; a run not started by the
schedule (run now) does not wait.

The fixture clock starts at 2026-03-02 09:00:30 UTC; the job fires once, at 09:01. Runs
execute on the fake executor, which records every request it was given.
"""

from __future__ import annotations

import time
from datetime import timedelta
from itertools import pairwise

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.ownership import CLOCK_RATE_TOLERANCE, START_LATENCY_S
from fleetcron.core.start_window import spread_offset, start_window
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import DEADLINE_MARGIN
from fleetcron.store.schema import Job, Run, Target

ONCE = "1 9 2 3 *"  # 09:01 on 2 March: one slot
NAMES = [f"box{i}" for i in range(4)]
SPREAD_S = 4
TIMEOUT_S = 30


def add_spread_job(app: App, actor: Actor, *, spread_s: int, jitter_s: int = 0) -> None:
    for name in NAMES:
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec(ONCE, "reload", timeout_s=TIMEOUT_S, spread_s=spread_s, jitter_s=jitter_s)
    jobs.add_job(app, actor, "reload", spec, bulk=True)


def delays(app: App, *, jitter_s: int, spread_s: int) -> dict[str, float]:
    with app.db.read() as session:
        job_id = session.scalars(select(Job.id)).one()
        ids = {name: tid for name, tid in session.execute(select(Target.name, Target.id))}
    return {
        name: start_window(job_id, tid, jitter_s=jitter_s, spread_s=spread_s).delay_s
        for name, tid in ids.items()
    }


# A loop delay (from a run's claim to its start, beyond its wait) the largest wait exceeds,
# so a wait counted twice shows (the checks allow the delay measured, not this).
LOOP_DELAY_S = 2.0


def full_budget() -> float:
    """The watchdog budget of a run that starts the moment it is claimed."""
    window = TIMEOUT_S + DEADLINE_MARGIN.total_seconds()
    return window * (1 - 2 * CLOCK_RATE_TOLERANCE) - START_LATENCY_S


async def fire(scheduler: Scheduler, clock: FakeClock) -> float:
    """Claim and run the slot; how long that took in real time (every run's claim and
    start happen within it)."""
    clock.advance(seconds=31)
    began = time.monotonic()
    await scheduler.tick()
    await scheduler.idle()
    return time.monotonic() - began


async def test_the_fleet_starts_in_the_order_of_its_spread_offsets(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_spread_job(app, operator, spread_s=SPREAD_S)
    wait = delays(app, jitter_s=0, spread_s=SPREAD_S)
    order = sorted(NAMES, key=lambda name: wait[name])
    # the offsets are far enough apart for the order to be the scheduler's, not the loop's
    gaps = [wait[b] - wait[a] for a, b in pairwise(order)]
    assert min(gaps) > 0.2, wait

    await fire(fake_scheduler, clock)

    assert [target.name for target, _ in fake.calls] == order


def deadlines(app: App) -> dict[str, timedelta]:
    """Each run's claim deadline after its claim (the fixture clock is the claim clock)."""
    with app.db.read() as session:
        return {
            run.target_name: run.deadline_at - run.started_at
            for run in session.scalars(select(Run))
            if run.deadline_at is not None and run.started_at is not None
        }


async def test_the_claim_deadline_adds_the_wait_so_the_run_keeps_its_whole_budget(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_spread_job(app, operator, spread_s=SPREAD_S, jitter_s=1)
    wait = delays(app, jitter_s=1, spread_s=SPREAD_S)
    assert min(wait.values()) > 0.3, wait
    # a wait counted twice (taken off the budget as well) would show on this target
    assert max(wait.values()) > LOOP_DELAY_S + 2 * CLOCK_RATE_TOLERANCE * SPREAD_S, wait

    took = await fire(fake_scheduler, clock)

    assert deadlines(app) == {
        name: timedelta(seconds=TIMEOUT_S + wait[name]) + DEADLINE_MARGIN for name in NAMES
    }
    budgets = {target.name: request.watchdog_s for target, request in fake.calls}
    assert set(budgets) == set(NAMES)
    for name, budget in budgets.items():
        assert budget is not None
        # the deadline's extra time is spent waiting: what is left is the whole budget,
        # less the clock-rate room on the wait itself and the loop's own delay (from the
        # claim to the start, beyond the wait: at most what the tick took besides it,
        # however loaded the machine)
        delay = took - wait[name]
        lowest = full_budget() - 2 * CLOCK_RATE_TOLERANCE * wait[name] - delay
        assert lowest < budget <= full_budget(), (name, budget, wait[name])


async def test_without_spread_or_jitter_the_deadline_is_timeout_and_margin(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    # negative control for the check above: nothing to wait, nothing added
    add_spread_job(app, operator, spread_s=0)

    took = await fire(fake_scheduler, clock)

    assert deadlines(app) == dict.fromkeys(NAMES, timedelta(seconds=TIMEOUT_S) + DEADLINE_MARGIN)
    budgets = [request.watchdog_s for _, request in fake.calls]
    assert len(budgets) == len(NAMES)
    assert all(b is not None and full_budget() - took <= b <= full_budget() for b in budgets), (
        budgets,
        took,
    )


async def test_a_run_now_starts_without_waiting_for_the_spread(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_spread_job(app, operator, spread_s=600)
    with app.db.read() as session:
        job_id = session.scalars(select(Job.id)).one()
        target_ids = list(session.scalars(select(Target.id)))
    assert max(spread_offset(job_id, t, 600) for t in target_ids) > 10

    runs.request_run(app, operator, "reload")
    await fake_scheduler.tick()
    await fake_scheduler.idle()

    assert sorted(target.name for target, _ in fake.calls) == NAMES


@pytest.mark.parametrize("interrupt_waiting", [True, False], ids=["fixed", "control-no-interrupt"])
async def test_runs_waiting_for_their_offset_do_not_start_once_the_scheduler_stops(
    app: App,
    operator: Actor,
    fake: FakeExecutor,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_waiting: bool,
) -> None:
    """SIGTERM means no new runs: a target whose spread offset falls inside the shutdown
    grace (0.5 s here) would otherwise start its command while the scheduler drains. The
    control, without interrupting the waiting runs, shows such a start happening."""
    for i in range(10):
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(f"node{i}", TargetKind.LOCAL))
    jobs.add_job(app, operator, "reload", JobSpec(ONCE, "reload", spread_s=1), bulk=True)
    wait = delays(app, jitter_s=0, spread_s=1)
    assert min(wait.values()) < 0.4 < max(wait.values()), wait  # some start inside the grace
    if not interrupt_waiting:

        async def keep_waiting(_self: Scheduler) -> None:
            return None

        monkeypatch.setattr(Scheduler, "_interrupt_waiting", keep_waiting)
    scheduler = Scheduler(app, clock=clock, executors={"local": fake})
    await scheduler.start()
    clock.advance(seconds=31)
    await scheduler.tick()

    await scheduler.shutdown()

    with app.db.read() as session:
        rows = list(session.scalars(select(Run)))
    assert len(rows) == 10
    if interrupt_waiting:
        assert fake.calls == []
        assert {r.status for r in rows} == {"interrupted"}
        assert all("before this run started" in (r.reason or "") for r in rows)
    else:
        assert fake.calls  # a command started after the stop
