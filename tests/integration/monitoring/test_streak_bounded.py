"""A failure streak longer than it is counted: the job page, a job's health and the health
summary say "more than" and keep the exact start, on SQLite and PostgreSQL.

Failures in a row are counted up to ``STREAK_COUNTED`` (100); here it is lowered to 3 so
that a five-slot streak exceeds it. Runs are recorded through the store's write path with
their start a few seconds after each slot (``record_slot``). The fixture clock starts at
2026-03-02 09:00:30 UTC.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult, Status
from fleetcron.services.fleet import job_page as job_fleet
from fleetcron.services.fleet.job_page import TargetQuery
from fleetcron.services.health import assignments as job_health
from fleetcron.services.health import failure_streak
from fleetcron.services.health import report as health
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from integration.monitoring.test_health_by_cause import every_minute_on, record_slot

FAILED = ("failed", None, 7)  # exit 1, started 7 s after its slot
OK = ("succeeded", None, 0)


def streak_of(app: App, clock: FakeClock, failures: int) -> tuple[datetime, datetime]:
    """Job ``a`` on target ``box``: one success, then ``failures`` failed slots, each claimed
    a second into its minute. Returns the first failure's slot and start."""
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    every_minute_on(app, "box", "a")
    clock.advance(seconds=31)
    record_slot(app, clock, {"a": OK})
    clock.advance(minutes=1)
    first_tick = clock.now
    for _ in range(failures):
        record_slot(app, clock, {"a": FAILED})
        clock.advance(minutes=1)
    return first_tick.replace(second=0), first_tick + timedelta(seconds=7)


@pytest.fixture
def counted_up_to_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failure_streak, "STREAK_COUNTED", 3)


@pytest.mark.usefixtures("counted_up_to_3")
def test_a_streak_past_the_count_is_more_everywhere_and_keeps_its_start(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    first_slot, first_start = streak_of(app, clock, failures=5)

    [problem] = health.summary(app, viewer).problems
    [line] = health.summary(app, viewer).grouped
    [row] = job_fleet.job_targets(app, viewer, "a").items
    [assignment] = job_health.assignment_health(app, viewer, "a")

    assert (problem.failures, problem.failures_more, problem.since) == (3, True, first_start)
    assert problem.detail.endswith("; more than 3 failure(s) in a row")
    assert (line.failures, line.failures_more, line.since) == (3, True, first_start)
    assert (row.streak, row.streak_more, row.streak_since) == (3, True, first_slot)
    assert row.streak_text == "3+"
    assert (assignment.consecutive_failures, assignment.failures_more) == (3, True)
    assert (assignment.failing_since, assignment.failures_text) == (first_start, "3+")


@pytest.mark.usefixtures("counted_up_to_3")
def test_a_streak_at_the_count_is_exact(app: App, viewer: Actor, clock: FakeClock) -> None:
    """The control: three failures are three, not "more than"."""
    first_slot, first_start = streak_of(app, clock, failures=3)

    [problem] = health.summary(app, viewer).problems
    [row] = job_fleet.job_targets(app, viewer, "a").items
    [assignment] = job_health.assignment_health(app, viewer, "a")

    assert (problem.failures, problem.failures_more, problem.since) == (3, False, first_start)
    assert problem.detail.endswith("; 3 failure(s) in a row")
    assert (row.streak, row.streak_more, row.streak_text) == (3, False, "3")
    assert row.streak_since == first_slot
    assert (assignment.consecutive_failures, assignment.failures_more) == (3, False)


def record_by_target(app: App, clock: FakeClock, failing: set[str]) -> None:
    """Claim the slots due now; the runs on the ``failing`` targets fail, the rest succeed."""
    store = RunStore(app.db, node=app.node_name, clock=clock)
    results = []
    for dispatch in store.claim_due(clock.now).dispatches:
        failed = dispatch.target_name in failing
        status: Status = "failed" if failed else "succeeded"
        results.append(
            (
                dispatch.run_id,
                ExecResult(
                    status, int(failed), EMPTY_OUTPUT, EMPTY_OUTPUT, clock.now, clock.now, 0
                ),
            )
        )
    assert store.finish(results) == []


@pytest.mark.usefixtures("counted_up_to_3")
def test_sorting_by_streak_puts_more_than_the_count_before_the_count(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    """A bulk job fails five slots in a row on ``alpha`` (more than 3), the last three on
    ``bravo`` (exactly 3): sorted by streak (longest first), ``alpha`` leads although both
    read 3; reversed, it comes last."""
    for name in ("alpha", "bravo"):
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "a", JobSpec("* * * * *", "true"), bulk=True)
    clock.advance(seconds=31)
    for slot in range(5):
        record_by_target(app, clock, {"alpha", "bravo"} if slot >= 2 else {"alpha"})
        clock.advance(minutes=1)

    def order(sort: str) -> list[tuple[str, str]]:
        page = job_fleet.job_targets(app, viewer, "a", TargetQuery(sort=sort))
        return [(row.target, row.streak_text) for row in page.items]

    assert order("streak") == [("alpha", "3+"), ("bravo", "3")]
    assert order("-streak") == [("bravo", "3"), ("alpha", "3+")]
