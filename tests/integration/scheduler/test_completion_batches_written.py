"""Completions that trickle in share their recording transactions
(``Scheduler._gather_finished`` with ``gather_again``; the rule's own cases and controls are
in tests/unit/test_completion_batches.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, ExecResult, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import FINISH_FEW, Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets

RUNS = 40
#: Real seconds between two runs' ends: a few land in each of the writer's waits.
SPACING_S = 0.02


def staggered(_target: RunTarget, request: ExecRequest) -> FakeOutcome:
    """Run ``run-I`` lasts I spacings, on the real clock."""
    return FakeOutcome(duration_s=int(request.command.removeprefix("run-")) * SPACING_S)


@pytest.fixture
async def trickling(app: App, clock: FakeClock) -> AsyncIterator[Scheduler]:
    """A scheduler whose runs end one after the other, :data:`SPACING_S` apart."""
    the_scheduler = Scheduler(app, clock=clock, executors={"local": FakeExecutor(staggered)})
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()


async def test_completions_that_trickle_in_share_few_transactions(
    app: App, operator: Actor, trickling: Scheduler, clock: FakeClock
) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    for i in range(RUNS):
        jobs.add_job(app, operator, f"job-{i}", JobSpec("* * * * *", f"run-{i}"), target="box")
    batches: list[int] = []
    finish = trickling.runs.finish

    def counted(results: Sequence[tuple[int, ExecResult]]) -> list[int]:
        batches.append(len(results))
        return finish(results)

    trickling.runs.finish = counted  # type: ignore[method-assign]
    clock.advance(seconds=31)

    stats = await trickling.tick()
    await trickling.idle()

    assert stats.dispatched == RUNS
    assert sum(batches) == RUNS, batches
    # The first completion waits while others keep coming (five waits of 50 ms: about a
    # dozen runs end meanwhile); with one wait only it would take 2-4 along.
    assert 8 <= batches[0] < FINISH_FEW, batches
    assert len(batches) <= RUNS // 8, batches
