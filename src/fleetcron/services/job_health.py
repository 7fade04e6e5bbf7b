"""Health of one job on each of its targets (``fleetcron health --job``): last run, last
success, failures in a row and since when, late; one statement for all its targets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import aliased

from fleetcron.app import Actor, App
from fleetcron.errors import NotFound
from fleetcron.services.failure_streak import failure_streak, newest_success
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
    late: bool
    failing_since: datetime | None = None
    """The first failure of the current streak (None when the newest run succeeded)."""


def assignment_health(app: App, actor: Actor, job: str) -> list[AssignmentHealth]:
    """Per target of ``job``: last run, last success, failures in a row (and since when),
    late; one statement for all its targets."""
    actor.authorize("run.read")
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    with app.db.read() as session:
        if session.scalar(select(Job.id).where(Job.name == job)) is None:
            raise NotFound("job", job)
        success_at = newest_success(Assignment.id, "finished_at")
        streak = failure_streak(Assignment.id, since="start")
        per_assignment = (
            select(
                Assignment.id.label("assignment_id"),
                Assignment.enabled,
                Assignment.next_fire_at,
                Target.name.label("target"),
                Assignment.newest_finished_run_id.label("run_id"),
                success_at.label("success_at"),
                streak.failures.label("failures"),
                streak.since.label("since"),
            )
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Job.name == job)
            .subquery("per_assignment")
        )
        last = aliased(Run, name="last_run")
        rows = session.execute(
            select(per_assignment, last.status, last.scheduled_for)
            .outerjoin(last, last.id == per_assignment.c.run_id)
            .order_by(per_assignment.c.target)
        ).all()
    out = []
    for row in rows:
        late = bool(row.enabled and row.next_fire_at is not None and row.next_fire_at < now - grace)
        out.append(
            AssignmentHealth(
                job,
                row.target,
                row.enabled,
                row.next_fire_at,
                row.scheduled_for,
                row.status,
                row.success_at,
                row.failures,
                late,
                row.since if row.failures else None,
            )
        )
    return out
