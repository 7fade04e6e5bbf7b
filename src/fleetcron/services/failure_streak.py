"""An assignment's failure streak: its failed runs since its newest success, counted and
dated. The job page, a job's health (``fleetcron health --job``) and the health summary
read it through this one function, so that they agree.

Skipped and missed slots neither break nor extend a streak. A success ends its slot's
retry chain, so no failure shares the success's slot after it: "since the newest success"
is "in a later slot". Both reads go through the runs' unique (assignment, slot, attempt)
index, backwards from the newest slot, and compare the status as an expression no index
serves (``unindexed``): a planner without statistics would otherwise walk an index that
starts with the status, through every run of that status in the table
(``tests/integration/web/test_job_fleet_plans.py``). The cost grows with the streak, not
with the history before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, ScalarSelect, and_, func, literal, select
from sqlalchemy.orm import aliased

from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.store.run_newest import unindexed
from fleetcron.store.schema import Run, UTCDateTime

OK_RUN = aliased(Run, name="ok_run")
STREAK_RUN = aliased(Run, name="streak_run")

NEVER = datetime(1970, 1, 1, tzinfo=UTC)
"""Before any slot: where the streak of an assignment that never succeeded starts."""

Since = Literal["slot", "start"]
"""What dates a streak: the slot of its first failure (the job page), or when that run
started (health: when the trouble began; a run that never started counts from its end)."""


@dataclass(frozen=True)
class Streak:
    """Two scalar subqueries correlated to the assignment they were built for."""

    failures: ScalarSelect[int]
    since: ScalarSelect[Any]


def newest_success(
    assignment_id: ColumnElement[int] | Any, field: str = "scheduled_for"
) -> ScalarSelect[Any]:
    """``field`` of the assignment's newest successful run (None: it never succeeded)."""
    return (
        select(getattr(OK_RUN, field))
        .where(
            OK_RUN.assignment_id == assignment_id,
            unindexed(OK_RUN.status) == RunStatus.SUCCEEDED.value,
        )
        .order_by(OK_RUN.scheduled_for.desc(), OK_RUN.attempt.desc())
        .limit(1)
        .correlate_except(OK_RUN)
        .scalar_subquery()
    )


def failure_streak(
    assignment_id: ColumnElement[int] | Any, ok_at: ColumnElement[Any] | Any, *, since: Since
) -> Streak:
    """The streak of the assignment whose id is ``assignment_id``: its failures after the
    slot ``ok_at`` (its :func:`newest_success`; None: every failure), and since when.

    Both are columns of the enclosing statement, ``ok_at`` computed there once per
    assignment (a materialized CTE): written inside the streak's subqueries, the newest
    success would be looked up again for every run they count, a cost that grows with the
    square of the streak (2.4 s for 100 targets' jobs failing for two hours)."""
    run = STREAK_RUN
    in_streak = and_(
        run.assignment_id == assignment_id,
        unindexed(run.status).in_(statuses.FAILED_VALUES),
        # Not "ok_at IS NULL OR ...": an OR keeps the planners from seeking the slot index
        # from the newest success on, and they read the whole history instead.
        run.scheduled_for > func.coalesce(ok_at, literal(NEVER, UTCDateTime())),
    )
    first = run.scheduled_for if since == "slot" else func.coalesce(run.started_at, run.finished_at)
    return Streak(
        select(func.count(run.id)).where(in_streak).correlate_except(run).scalar_subquery(),
        select(func.min(first)).where(in_streak).correlate_except(run).scalar_subquery(),
    )
