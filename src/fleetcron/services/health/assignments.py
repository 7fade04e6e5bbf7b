"""Health of one job on each of its targets (``fleetcron health --job``): last run, last
success, failures in a row and since when, late; one statement for all its targets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session, aliased

from fleetcron.app import Actor, App
from fleetcron.core.bounded import Bounded
from fleetcron.errors import NotFound
from fleetcron.services.health.failure_streak import counted, failure_streak, newest_success
from fleetcron.services.projects.scope import place
from fleetcron.store.planner import materialized
from fleetcron.store.schema import Assignment, Job, Run, Target


@dataclass(frozen=True)
class AssignmentHealth:
    job: str
    target: str
    enabled: bool
    next_fire_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_success_at: datetime | None
    consecutive_failures: int
    """Failed runs since the newest success, counted up to ``STREAK_COUNTED``."""
    late: bool
    failing_since: datetime | None = None
    """The first failure of the current streak (None when the newest run succeeded)."""
    failures_more: bool = False
    """The streak is longer than ``consecutive_failures`` (which is then the cap)."""

    @property
    def failures_text(self) -> str:
        """``12`` or ``100+``."""
        return Bounded(self.consecutive_failures, self.failures_more).short


def assignment_health(app: App, actor: Actor, job: str) -> list[AssignmentHealth]:
    """Per target of ``job``: last run, last success, failures in a row (and since when),
    late; one statement for all its targets."""
    actor.authorize_in("run.read")
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    with app.db.read() as session:
        pid = place(session, actor)
        if session.scalar(select(Job.id).where(Job.name == job, Job.project_id == pid)) is None:
            raise NotFound("job", job)
        rows = _rows(session, job, pid)
    return [_health(job, row, late_before=now - grace) for row in rows]


def _rows(session: Session, job: str, pid: int) -> Sequence[Row[Any]]:
    """Each target of the job with its newest run, newest success and failure streak."""
    # The newest success is read once per assignment, in the CTE (failure_streak.py).
    assigned = materialized(
        select(
            Assignment.id.label("assignment_id"),
            Assignment.enabled,
            Assignment.next_fire_at,
            Target.name.label("target"),
            Assignment.newest_finished_run_id.label("run_id"),
            newest_success(Assignment.id, "finished_at").label("success_at"),
            newest_success(Assignment.id).label("ok_at"),
        )
        .join(Job, Job.id == Assignment.job_id)
        .join(Target, Target.id == Assignment.target_id)
        .where(Job.name == job, Job.project_id == pid)
        .cte("assigned")
    )
    streak = failure_streak(assigned.c.assignment_id, assigned.c.ok_at, since="start")
    last = aliased(Run, name="last_run")
    return session.execute(
        select(
            assigned,
            streak.failures.label("failures"),
            streak.since.label("since"),
            last.status,
            last.scheduled_for,
        )
        .outerjoin(last, last.id == assigned.c.run_id)
        .order_by(assigned.c.target)
    ).all()


def _health(job: str, row: Any, *, late_before: datetime) -> AssignmentHealth:
    failures = counted(row.failures)
    late = bool(row.enabled and row.next_fire_at is not None and row.next_fire_at < late_before)
    return AssignmentHealth(
        job,
        row.target,
        row.enabled,
        row.next_fire_at,
        row.scheduled_for,
        row.status,
        row.success_at,
        failures.n,
        late,
        row.since if failures.n else None,
        failures.more,
    )
