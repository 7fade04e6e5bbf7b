"""Health of the schedules: what failed, what is late or missing, what is stuck.

*Late or missing* needs no scan of the history: the scheduler advances an assignment's
indexed ``next_fire_at`` whenever it decides a slot (ran, missed, skipped). An enabled
assignment whose ``next_fire_at`` is older than the misfire grace therefore has a slot
nobody decided — the scheduler was down, or no node could prove ownership.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.errors import NotFound
from fleetcron.services.context import Actor, App
from fleetcron.store.schema import Assignment, Job, Run, Target

FAILED = ("failed", "timed_out", "connect_error", "lost", "fenced", "interrupted")
FINISHED = ("succeeded", *FAILED)


@dataclass(frozen=True)
class Problem:
    kind: str  # failing | late | stuck
    job: str
    target: str
    since: datetime | None
    detail: str


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


@dataclass
class HealthSummary:
    checked_at: datetime
    problems: list[Problem] = field(default_factory=list)
    failures_24h: int = 0
    runs_24h: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def late_count(session: Session, now: datetime, grace: timedelta) -> int:
    return (
        session.scalar(
            select(func.count(Assignment.id)).where(
                Assignment.enabled.is_(True), Assignment.next_fire_at < now - grace
            )
        )
        or 0
    )


def summary(app: App, actor: Actor) -> HealthSummary:
    """Failing assignments, late or missing slots, runs running past their deadline."""
    actor.authorize("run.read")
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    result = HealthSummary(checked_at=now)
    with app.db.read() as session:
        for row in session.execute(
            select(Job.name, Target.name, Assignment.next_fire_at)
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Assignment.enabled.is_(True), Assignment.next_fire_at < now - grace)
            .order_by(Assignment.next_fire_at)
        ):
            result.problems.append(
                Problem("late", row[0], row[1], row[2], f"slot {row[2]:%Y-%m-%d %H:%M} not decided")
            )
        for run in session.scalars(
            select(Run).where(Run.status == "running", Run.deadline_at < now).order_by(Run.id)
        ):
            result.problems.append(
                Problem(
                    "stuck",
                    run.job_name,
                    run.target_name,
                    run.started_at,
                    f"run {run.id} still running past its deadline",
                )
            )
        for job, target, status, at, failures in _failing(session):
            result.problems.append(
                Problem(
                    "failing", job, target, at, f"last run {status}; {failures} failure(s) in a row"
                )
            )
        day_ago = now - timedelta(hours=24)
        result.runs_24h = {
            status: count
            for status, count in session.execute(
                select(Run.status, func.count(Run.id))
                .where(Run.scheduled_for >= day_ago)
                .group_by(Run.status)
            )
        }
        result.failures_24h = sum(result.runs_24h.get(s, 0) for s in FAILED)
    return result


def _latest_finished(session: Session) -> Any:
    """Per current assignment, its finished runs numbered newest first."""
    return (
        select(
            Run.assignment_id,
            Run.status,
            Run.finished_at,
            func.row_number()
            .over(
                partition_by=Run.assignment_id, order_by=(Run.scheduled_for.desc(), Run.id.desc())
            )
            .label("n"),
        )
        .where(Run.status.in_(FINISHED), Run.assignment_id.in_(select(Assignment.id)))
        .subquery()
    )


def _failing(session: Session) -> list[tuple[str, str, str, datetime | None, int]]:
    """(job, target, last status, since, failures in a row) of assignments whose newest
    finished run failed."""
    ranked = _latest_finished(session)
    latest = session.execute(
        select(ranked.c.assignment_id, ranked.c.status, ranked.c.finished_at).where(
            ranked.c.n == 1, ranked.c.status.in_(FAILED)
        )
    ).all()
    out = []
    for assignment_id, status, finished_at in latest:
        streak = _failure_streak(session, assignment_id)
        names = session.execute(
            select(Job.name, Target.name)
            .join(Assignment, Assignment.job_id == Job.id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Assignment.id == assignment_id)
        ).one()
        out.append((names[0], names[1], status, finished_at, streak))
    return out


def _failure_streak(session: Session, assignment_id: int, cap: int = 100) -> int:
    statuses = session.scalars(
        select(Run.status)
        .where(Run.assignment_id == assignment_id, Run.status.in_(FINISHED))
        .order_by(Run.scheduled_for.desc(), Run.id.desc())
        .limit(cap)
    )
    streak = 0
    for status in statuses:
        if status == "succeeded":
            break
        streak += 1
    return streak


def assignment_health(app: App, actor: Actor, job: str) -> list[AssignmentHealth]:
    """Per target of ``job``: last run, last success, failures in a row, late."""
    actor.authorize("run.read")
    with app.db.read() as session:
        if session.scalar(select(Job.id).where(Job.name == job)) is None:
            raise NotFound("job", job)
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    out = []
    with app.db.read() as session:
        rows = session.execute(
            select(Assignment, Target.name)
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Job.name == job)
            .order_by(Target.name)
        ).all()
        for assignment, target in rows:
            last = session.execute(
                select(Run.status, Run.scheduled_for)
                .where(Run.assignment_id == assignment.id, Run.status.in_(FINISHED))
                .order_by(Run.scheduled_for.desc(), Run.id.desc())
                .limit(1)
            ).first()
            success = session.scalar(
                select(func.max(Run.finished_at)).where(
                    Run.assignment_id == assignment.id, Run.status == "succeeded"
                )
            )
            late = bool(
                assignment.enabled
                and assignment.next_fire_at is not None
                and assignment.next_fire_at < now - grace
            )
            out.append(
                AssignmentHealth(
                    job,
                    target,
                    assignment.enabled,
                    assignment.next_fire_at,
                    last[1] if last else None,
                    last[0] if last else None,
                    success,
                    _failure_streak(session, assignment.id),
                    late,
                )
            )
    return out
