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
from typing import Any, Literal

from sqlalchemy import ColumnElement, ScalarSelect, and_, func, or_, select
from sqlalchemy.orm import aliased

from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.store.run_newest import unindexed
from fleetcron.store.schema import Run

OK_RUN = aliased(Run, name="ok_run")
STREAK_RUN = aliased(Run, name="streak_run")

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


def failure_streak(assignment_id: ColumnElement[int] | Any, *, since: Since) -> Streak:
    """The streak of the assignment whose id is ``assignment_id`` (a column of the
    enclosing statement): its failures since its newest success, and since when."""
    ok_at = newest_success(assignment_id)
    run = STREAK_RUN
    in_streak = and_(
        run.assignment_id == assignment_id,
        unindexed(run.status).in_(statuses.FAILED_VALUES),
        or_(ok_at.is_(None), run.scheduled_for > ok_at),
    )
    first = run.scheduled_for if since == "slot" else func.coalesce(run.started_at, run.finished_at)
    return Streak(
        select(func.count(run.id)).where(in_streak).correlate_except(run).scalar_subquery(),
        select(func.min(first)).where(in_streak).correlate_except(run).scalar_subquery(),
    )
