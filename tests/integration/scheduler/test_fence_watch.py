"""The self-fencing watcher (``Scheduler._watch_fence``): asleep while nothing runs, it
asks ``may_execute`` every ``FENCE_CHECK_S`` once a run is in flight and cancels the run
when the node may no longer execute (the cluster scenarios kill real commands this way:
tests/integration/cluster/test_claim_wait.py)."""

from __future__ import annotations

import asyncio

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import FENCE_CHECK_S, Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from waiting import eventually_async


def long(_target: RunTarget, _request: ExecRequest) -> FakeOutcome:
    """A run that lasts far longer than the test."""
    return FakeOutcome(duration_s=60)


async def test_an_idle_scheduler_asks_nothing_and_a_started_run_is_watched_and_fenced(
    app: App, operator: Actor, clock: FakeClock
) -> None:
    asked: list[bool] = []
    holds = [True]

    def may_execute() -> bool:
        asked.append(holds[0])
        return holds[0]

    scheduler = Scheduler(
        app, clock=clock, executors={"local": FakeExecutor(long)}, may_execute=may_execute
    )
    await scheduler.start()
    try:
        # Ten of the watcher's intervals with nothing in flight: polling would ask ten times.
        await asyncio.sleep(10 * FENCE_CHECK_S)
        assert asked == [], "the watcher woke with nothing to watch"

        targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
        jobs.add_job(app, operator, "long", JobSpec("* * * * *", "run"), target="box")
        clock.advance(seconds=31)
        assert (await scheduler.tick()).dispatched == 1
        await eventually_async(lambda: asked, 10, "the watcher to check the run in flight")

        holds[0] = False  # the lease was not renewed in time
        await eventually_async(lambda: not scheduler.running, 10, "the run to be fenced")
        assert scheduler.self_fenced == 1
    finally:
        await scheduler.shutdown()
