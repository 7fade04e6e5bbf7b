"""How the targets of jobs stand, read in set-based statements: the *state* a run's status
puts a target in (:func:`state_of`), every assignment with its newest run in one statement
(:func:`with_newest`), the per-job counts, and the checks of the ranges a page asks for.
Shared by the job page (:mod:`~fleetcron.services.job_fleet`), the fleet grid
(:mod:`~fleetcron.services.fleet_grid`), the slots of a job
(:mod:`~fleetcron.services.job_slots`) and the selections of a targeted run
(:mod:`~fleetcron.services.fleet_selection`).

The newest run is read backwards through the runs' ``(assignment_id, scheduled_for,
attempt)`` unique index, so the cost grows with the targets, not with the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, select, true, type_coerce
from sqlalchemy.orm import Session

from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.errors import InvalidInput
from fleetcron.store.schema import Assignment, Job, Run, Target

#: The classes of a target's newest run, in the order "worst first" sorts them. ``waiting``:
#: not started yet (``statuses.WAITING``: queued, or pending its turn in a rollout).
STATES: tuple[str, ...] = ("failed", "running", "waiting", "missed", "skipped", "never", "ok")


PAGE_MAX = 1000


FAILED_VALUES = [s.value for s in statuses.FAILED]


def state_of(status: RunStatus | str | None) -> str:
    """The class of a run's status as the job page shows it."""
    if status is None:
        return "never"
    status = RunStatus(status)
    if status is RunStatus.SUCCEEDED:
        return "ok"
    if status in statuses.FAILED:
        return "failed"
    if status in statuses.WAITING:
        return "waiting"
    if status is RunStatus.RUNNING:
        return "running"
    if status is RunStatus.CANCELLED:
        return "skipped"  # stopped by an operator: did not run to an outcome, not a failure
    return status.value  # missed, skipped


@dataclass(frozen=True)
class JobCounts:
    """How a job's targets stand: by their newest run, and how many are paused (a paused
    target is also counted by its newest run)."""

    total: int = 0
    ok: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    missed: int = 0
    skipped: int = 0
    never: int = 0
    paused: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "ok": self.ok,
            "failed": self.failed,
            "running": self.running,
            "waiting": self.waiting,
            "missed": self.missed,
            "skipped": self.skipped,
            "never": self.never,
            "paused": self.paused,
        }


def newest_run(condition: ColumnElement[bool] | None = None) -> Any:
    """The newest run of the enclosing assignment (optionally among those matching
    ``condition``), read backwards through the unique (assignment, slot, attempt) index."""
    query = select(Run.id if condition is None else Run.scheduled_for).where(
        Run.assignment_id == Assignment.id
    )
    if condition is not None:
        query = query.where(condition)
    return (
        query.order_by(Run.scheduled_for.desc(), Run.attempt.desc())
        .limit(1)
        .correlate(Assignment)
        .scalar_subquery()
    )


def unindexed(status: Any) -> Any:
    """``status`` as an expression no index serves (``status || ''``), on every database.

    The reads below go through one assignment's runs by the (assignment, slot, attempt)
    index and stop at the first match; given a bare ``status = ...`` term, a planner without
    statistics may pick an index that starts with the status instead and walk every run of
    that status in the table (seconds, at a few hundred thousand runs)."""
    return type_coerce(status, String()).concat("")


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidInput(
            f"{name}: {value} is out of range; allowed: {low} to {high}",
            field=name,
            value=str(value),
            allowed=f"{low} to {high}",
        )


#: A run status (its string) -> the state it puts a target in.
STATE_OF: dict[str | None, str] = {None: "never", **{s.value: state_of(s) for s in RunStatus}}


def with_newest(
    session: Session,
    columns: Sequence[Any],
    where: ColumnElement[bool],
    *,
    jobs: bool = False,
    raw_times: bool = False,
) -> list[Any]:
    """``columns`` (labelled; of assignments, their targets and, with ``jobs``, their jobs)
    of the assignments matching ``where``, each with its newest run: ``last_id``,
    ``status`` (the plain string: no enum conversion for thousands of rows),
    ``scheduled_for`` and ``duration_ms``; one statement, one index seek per assignment.

    PostgreSQL reads the newest run in a LATERAL join (joined on a correlated subquery, its
    planner would hash the whole runs table); SQLite, which has no LATERAL, joins the runs
    on the newest id found by a correlated subquery, one primary-key lookup each.
    ``raw_times``: ``scheduled_for`` as the driver gives it (text on SQLite), unconverted."""
    newest_order = (Run.scheduled_for.desc(), Run.attempt.desc())
    slot = type_coerce(Run.scheduled_for, String()) if raw_times else Run.scheduled_for
    if session.get_bind().dialect.name == "postgresql":
        newest = (
            select(
                Run.id.label("last_id"),
                type_coerce(Run.status, String()).label("status"),
                slot.label("scheduled_for"),
                Run.duration_ms,
            )
            .where(Run.assignment_id == Assignment.id)
            .order_by(*newest_order)
            .limit(1)
            .lateral("newest")
        )
        query = select(*columns, newest).select_from(Assignment)
        query = query.join(Target, Target.id == Assignment.target_id)
        if jobs:
            query = query.join(Job, Job.id == Assignment.job_id)
        query = query.outerjoin(newest, true()).where(where)
        return list(session.execute(query))
    inner_q = select(*columns, newest_run().label("last_id")).select_from(Assignment)
    inner_q = inner_q.join(Target, Target.id == Assignment.target_id)
    if jobs:
        inner_q = inner_q.join(Job, Job.id == Assignment.job_id)
    inner = inner_q.where(where).subquery()
    query = select(
        inner,
        type_coerce(Run.status, String()).label("status"),
        slot.label("scheduled_for"),
        Run.duration_ms,
    ).outerjoin(Run, Run.id == inner.c.last_id)
    return list(session.execute(query))


#: Ids per ``IN (...)`` list (SQLite allows 32,766 parameters; stay well below).
CHUNK = 900
