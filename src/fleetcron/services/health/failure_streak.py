"""An assignment's failure streak: its failed runs since its newest success, counted and
dated. The job page, a job's health (``fleetcron health --job``) and the health summary
read it through this one function, so that they agree.

Skipped and missed slots neither break nor extend a streak. A success ends its slot's
retry chain, so no failure shares the success's slot after it: "since the newest success"
is "in a later slot". The newest success is a seek of a partial index of the successes
(``ix_runs_assignment_succeeded``, migration 0024). The failures are read from it on
through the runs' unique (assignment, slot, attempt) index, comparing the status as an
expression no index serves (``unindexed``): a planner without statistics would otherwise
walk an index that starts with the status, through every run of that status in the table
(``tests/integration/web/test_job_fleet_plans.py``). They are counted up to
:data:`STREAK_COUNTED`, and the start is the first one's (one seek), so the cost depends on
neither the history nor the streak's length: 500 assignments failing once a minute for a
day are 720,000 failed runs, which an exact count and a walk back to the newest success
read on every health call (0.8 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, ScalarSelect, and_, func, literal, select
from sqlalchemy.orm import aliased

from fleetcron.core import statuses
from fleetcron.core.bounded import Bounded
from fleetcron.core.statuses import RunStatus
from fleetcron.store.planner import count_up_to, written_in
from fleetcron.store.run_newest import unindexed
from fleetcron.store.schema import Run, UTCDateTime

OK_RUN = aliased(Run, name="ok_run")
STREAK_RUN = aliased(Run, name="streak_run")

STREAK_COUNTED = 100
"""Failures in a row are counted up to this many; a longer streak reads "more than 100"
(:class:`~fleetcron.core.bounded.Bounded`), its start date still exact."""

NEVER = datetime(1970, 1, 1, tzinfo=UTC)
"""Before any slot: where the streak of an assignment that never succeeded starts."""

Since = Literal["slot", "start"]
"""What dates a streak: the slot of its first failure (the job page), or when that run
started (health: when the trouble began; a run that never started counts from its end)."""


@dataclass(frozen=True)
class Streak:
    """Two scalar subqueries correlated to the assignment they were built for.

    ``failures`` is the count read up to ``STREAK_COUNTED + 1``: turn it into what it says
    with :func:`counted`."""

    failures: ScalarSelect[int]
    since: ScalarSelect[Any]


def counted(failures: int | None) -> Bounded:
    """The streak length a statement's ``Streak.failures`` column says."""
    return Bounded.of(failures or 0, STREAK_COUNTED)


def newest_success(
    assignment_id: ColumnElement[int] | Any, field: str = "scheduled_for"
) -> ScalarSelect[Any]:
    """``field`` of the assignment's newest successful run (None: it never succeeded): a
    seek of ``ix_runs_assignment_succeeded``, whose predicate the statement repeats."""
    return (
        select(getattr(OK_RUN, field))
        .where(
            OK_RUN.assignment_id == assignment_id,
            written_in(OK_RUN.status, [RunStatus.SUCCEEDED.value]),
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
    slot ``ok_at`` (its :func:`newest_success`; None: every failure), counted up to
    :data:`STREAK_COUNTED` + 1, and since when (the first of them in slot order).

    ``ok_at`` is a column of the enclosing statement, computed there once per assignment
    (a materialized CTE): written inside the streak's subqueries, the newest success would
    be looked up again for every run they read, a cost that grows with the square of the
    streak (2.4 s for 100 targets' jobs failing for two hours)."""
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
        count_up_to(run, in_streak, STREAK_COUNTED),
        select(first)
        .where(in_streak)
        .order_by(run.scheduled_for, run.attempt)
        .limit(1)
        .correlate_except(run)
        .scalar_subquery(),
    )
