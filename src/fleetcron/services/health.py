"""Health of the schedules: what failed, what is late or missing, what is stuck.

*Late or missing* needs no scan of the history: the scheduler advances an assignment's
indexed ``next_fire_at`` whenever it decides a slot (ran, missed, skipped). An enabled
assignment whose ``next_fire_at`` is older than the misfire grace therefore has a slot
nobody decided — the scheduler was down, or no node could prove ownership.

*Failing* is grouped by cause. A target none of whose runs reached it since its connection
errors began is **unreachable**: one line for the target, with the connection error and the
start of the outage, however many of its jobs fail. Every other failure (the command exited
non-zero or timed out, or the outcome is unknown: lost, interrupted, fenced) is one line per
job × target. ``HealthSummary.problems`` keeps the full job × target detail either way.

Cost: a fixed number of queries per call, none per assignment or per target. The failing
assignments, their newest run and their streak come from one statement whose correlated
subqueries each read a few entries of the ``runs`` slot index (``assignment_id,
scheduled_for, attempt``); the outages of the targets found come from one more that reads
``ix_runs_target_started``. The newest finished run is probed only for the assignments that
have a failed run at all (found through the status index), not for every assignment: the
cost grows with the failures kept in the history, not with the fleet (it used to be one
probe per assignment, 0.8-7.4 s for 250,000 assignments; ``bench/health_bench.py``,
``bench/pages_bench.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session, aliased

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.errors import NotFound
from fleetcron.store.schema import Assignment, Job, Run, Target

FAILED = statuses.FAILED
FINISHED = statuses.FINISHED
REACHED = statuses.REACHED
"""Outcomes that prove the connection to the target worked (the command ran)."""

JOBS_NAMED = 5
"""How many job names a text line of an unreachable target spells out."""


@dataclass(frozen=True)
class Problem:
    """One job × target that needs attention: the full detail.

    ``since``: for ``failing``, the first failure of the current streak (the newest run is
    at ``last_failure_at``); for ``late``, the undecided slot; for ``stuck``, the start.
    """

    kind: str  # failing | late | stuck
    job: str
    target: str
    since: datetime | None
    detail: str
    status: str | None = None
    error: str | None = None
    exit_code: int | None = None
    failures: int = 0
    last_failure_at: datetime | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class GroupedProblem:
    """One line of the grouped view.

    ``unreachable``: a target whose connection attempts have failed since ``since`` (the
    first connection error after the last run that reached it); ``job`` is None and
    ``jobs`` names the jobs that could not connect. Otherwise one job × target, as in
    :class:`Problem`.
    """

    kind: str  # unreachable | failing | stuck | late
    target: str
    job: str | None
    jobs: tuple[str, ...]
    since: datetime | None
    detail: str
    error: str | None = None
    failures: int = 0
    run_id: int | None = None


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


@dataclass
class HealthSummary:
    checked_at: datetime
    problems: list[Problem] = field(default_factory=list)
    grouped: list[GroupedProblem] = field(default_factory=list)
    failures_24h: int = 0
    runs_24h: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self, *, detail: bool = True) -> dict[str, Any]:
        """The summary for JSON; ``detail=False`` leaves out the job × target problems."""
        out = {**asdict(self), "ok": self.ok}
        if not detail:
            del out["problems"]
        return out


@dataclass(frozen=True)
class _Failing:
    """A current assignment whose newest finished run failed, with its streak."""

    assignment_id: int
    job: str
    target_id: int
    target: str
    run_id: int
    status: str
    error: str | None
    exit_code: int | None
    started_at: datetime | None
    finished_at: datetime | None
    failures: int
    streak_since: datetime | None
    reason: str | None = None


@dataclass(frozen=True)
class _Outage:
    """Connection errors on a target since the last run that reached it."""

    reached_at: datetime | None
    since: datetime
    attempts: int


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
    """Failing assignments, late or missing slots, runs running past their deadline: in
    full (``problems``) and grouped by cause (``grouped``)."""
    actor.authorize("run.read")
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    result = HealthSummary(checked_at=now)
    with app.db.read() as session:
        late: list[Problem] = []
        for row in session.execute(
            select(Job.name, Target.name, Assignment.next_fire_at)
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Assignment.enabled.is_(True), Assignment.next_fire_at < now - grace)
            .order_by(Assignment.next_fire_at)
        ):
            late.append(
                Problem("late", row[0], row[1], row[2], f"slot {row[2]:%Y-%m-%d %H:%M} not decided")
            )
        stuck = [
            Problem(
                "stuck",
                run.job_name,
                run.target_name,
                run.started_at,
                f"run {run.id} still running past its deadline",
                status=run.status,
                run_id=run.id,
            )
            for run in session.scalars(
                select(Run)
                .where(Run.status == RunStatus.RUNNING, Run.deadline_at < now)
                .order_by(Run.id)
            )
        ]
        failing = _failing(session)
        outages = _outages(
            session, sorted({f.target_id for f in failing if f.status == "connect_error"})
        )
        failing_problems = [_failing_problem(f) for f in failing]
        result.problems = [*late, *stuck, *failing_problems]
        result.grouped = [
            *group_failures(failing, outages),
            *(_one_line(p) for p in stuck),
            *(_one_line(p) for p in late),
        ]
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


def _failing(session: Session) -> list[_Failing]:
    """Current assignments whose newest finished run failed, with the length and the start
    of the failure streak (the failures after the newest success), in one statement."""
    # Runs of one assignment are ordered by (scheduled_for, attempt): unique per assignment
    # and exactly the slot index, so "newest" is a short backward index scan.
    newest = (
        select(Run.id)
        .where(Run.assignment_id == Assignment.id, Run.status.in_(FINISHED))
        .order_by(Run.scheduled_for.desc(), Run.attempt.desc())
        .limit(1)
        .correlate(Assignment)
        .scalar_subquery()
    )
    # Only an assignment with a failed run at all can be failing: the candidates come from
    # the status index (failed runs are a small part of the history), so the probe for the
    # newest finished run is made per candidate, not for every assignment of the fleet.
    candidates = select(Run.assignment_id).where(
        _rare(session, Run.status.in_(FAILED)), Run.assignment_id.is_not(None)
    )
    latest = (
        select(Assignment.id.label("assignment_id"), newest.label("run_id"))
        .where(Assignment.id.in_(candidates))
        .subquery("latest")
    )
    last = aliased(Run, name="last_run")
    ok = aliased(Run, name="ok_run")
    last_success = (
        select(ok.scheduled_for)
        .where(ok.assignment_id == latest.c.assignment_id, ok.status == RunStatus.SUCCEEDED)
        .order_by(ok.scheduled_for.desc(), ok.attempt.desc())
        .limit(1)
        .correlate(latest)
        .scalar_subquery()
    )
    failed = (
        select(latest.c.assignment_id, latest.c.run_id, last_success.label("ok_at"))
        .join(last, last.id == latest.c.run_id)
        .where(last.status.in_(FAILED))
        .cte("failing")
    )
    # The streak: failed runs after the newest success. A success ends its slot's retry
    # chain, so no failure shares the success's scheduled_for after it.
    streak_run = aliased(Run, name="streak_run")
    streaks = (
        select(
            failed.c.assignment_id,
            func.count(streak_run.id).label("failures"),
            func.min(func.coalesce(streak_run.started_at, streak_run.finished_at)).label("since"),
        )
        .join(
            streak_run,
            and_(
                streak_run.assignment_id == failed.c.assignment_id,
                streak_run.status.in_(FAILED),
                or_(failed.c.ok_at.is_(None), streak_run.scheduled_for > failed.c.ok_at),
            ),
        )
        .group_by(failed.c.assignment_id)
        .subquery("streaks")
    )
    rows = session.execute(
        select(
            failed.c.assignment_id,
            Job.name,
            Target.id,
            Target.name,
            last.id,
            last.status,
            last.error,
            last.exit_code,
            last.started_at,
            last.finished_at,
            streaks.c.failures,
            streaks.c.since,
            last.reason,
        )
        .select_from(failed)
        .join(last, last.id == failed.c.run_id)
        .join(Assignment, Assignment.id == failed.c.assignment_id)
        .join(Job, Job.id == Assignment.job_id)
        .join(Target, Target.id == Assignment.target_id)
        .join(streaks, streaks.c.assignment_id == failed.c.assignment_id)
        .order_by(Job.name, Target.name)
    ).all()
    return [_Failing(*row) for row in rows]


def _rare(session: Session, condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """``condition``, marked for SQLite's planner as true for few rows. SQLite keeps no
    distribution of a column's values, so it takes the six failed statuses for most of the
    runs and scans the table instead of reading the status index; ``unlikely()`` is a no-op
    that corrects the estimate. PostgreSQL has the histogram."""
    if session.get_bind().dialect.name == "sqlite":
        return func.unlikely(condition)
    return condition


def _outages(session: Session, target_ids: Sequence[int]) -> dict[int, _Outage]:
    """Per target, the connection errors since the newest run that reached it (by start
    time across all its jobs); targets reached after their last connection error have none."""
    if not target_ids:
        return {}
    reached = aliased(Run, name="reached_run")
    reached_at = (
        select(reached.started_at)
        .where(
            reached.target_id == Target.id,
            reached.status.in_(REACHED),
            reached.started_at.is_not(None),
        )
        .order_by(reached.started_at.desc())
        .limit(1)
        .correlate(Target)
        .scalar_subquery()
    )
    # Materialized: else PostgreSQL and SQLite inline it and run the reached_at lookup once
    # per connection error joined, for the join filter and again for the grouping.
    last_reached = (
        select(Target.id.label("target_id"), reached_at.label("reached_at"))
        .where(Target.id.in_(target_ids))
        .cte("last_reached")
        .prefix_with("MATERIALIZED", dialect="postgresql")
        .prefix_with("MATERIALIZED", dialect="sqlite")
    )
    attempt = aliased(Run, name="attempt_run")
    rows = session.execute(
        select(
            last_reached.c.target_id,
            last_reached.c.reached_at,
            func.min(attempt.started_at),
            func.count(attempt.id),
        )
        .join(
            attempt,
            and_(
                attempt.target_id == last_reached.c.target_id,
                attempt.status == "connect_error",
                attempt.started_at.is_not(None),
                or_(
                    last_reached.c.reached_at.is_(None),
                    attempt.started_at > last_reached.c.reached_at,
                ),
            ),
        )
        .group_by(last_reached.c.target_id, last_reached.c.reached_at)
    ).all()
    return {row[0]: _Outage(row[1], row[2], row[3]) for row in rows}


def _in_outage(failing: _Failing, outage: _Outage | None) -> bool:
    """Whether this failure is part of its target's outage: a connection error that no run
    reaching the target has followed."""
    if failing.status != "connect_error" or outage is None:
        return False
    started = failing.started_at or failing.finished_at
    return outage.reached_at is None or (started is not None and started > outage.reached_at)


def group_failures(
    failing: Iterable[_Failing], outages: dict[int, _Outage]
) -> list[GroupedProblem]:
    """One ``unreachable`` line per target in an outage, then one ``failing`` line per
    other failing job × target."""
    by_target: dict[int, list[_Failing]] = {}
    others: list[GroupedProblem] = []
    for f in failing:
        if _in_outage(f, outages.get(f.target_id)):
            by_target.setdefault(f.target_id, []).append(f)
        else:
            others.append(_one_line(_failing_problem(f)))
    lines = []
    for target_id, members in by_target.items():
        outage = outages[target_id]
        newest = max(members, key=lambda f: f.run_id)  # its error is the one shown
        jobs = tuple(sorted(f.job for f in members))
        named = ", ".join(jobs[:JOBS_NAMED]) + (
            f" and {len(jobs) - JOBS_NAMED} more" if len(jobs) > JOBS_NAMED else ""
        )
        lines.append(
            GroupedProblem(
                "unreachable",
                newest.target,
                None,
                jobs,
                outage.since,
                f"{newest.error or 'cannot connect'}; {len(jobs)} job(s) cannot connect "
                f"({named}); {outage.attempts} failed connection(s)",
                error=newest.error,
                failures=outage.attempts,
                run_id=newest.run_id,
            )
        )
    lines.sort(key=lambda line: line.target)
    return [*lines, *others]


def _failing_problem(f: _Failing) -> Problem:
    exit_text = f" (exit {f.exit_code})" if f.exit_code is not None else ""
    # lost, interrupted and fenced runs carry no error, only why fleetcron closed them
    explanation = f.error or f.reason
    error_text = f": {explanation}" if explanation else ""
    return Problem(
        "failing",
        f.job,
        f.target,
        f.streak_since,
        f"last run {f.status}{exit_text}{error_text}; {f.failures} failure(s) in a row",
        status=f.status,
        error=f.error,
        exit_code=f.exit_code,
        failures=f.failures,
        last_failure_at=f.finished_at,
        run_id=f.run_id,
    )


def _one_line(p: Problem) -> GroupedProblem:
    return GroupedProblem(
        p.kind, p.target, p.job, (p.job,), p.since, p.detail, p.error, p.failures, p.run_id
    )


def assignment_health(app: App, actor: Actor, job: str) -> list[AssignmentHealth]:
    """Per target of ``job``: last run, last success, failures in a row (and since when),
    late; one statement for all its targets."""
    actor.authorize("run.read")
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    with app.db.read() as session:
        if session.scalar(select(Job.id).where(Job.name == job)) is None:
            raise NotFound("job", job)
        ok = aliased(Run, name="ok_run")
        success = (
            select(ok.scheduled_for, ok.finished_at)
            .where(ok.assignment_id == Assignment.id, ok.status == RunStatus.SUCCEEDED)
            .order_by(ok.scheduled_for.desc(), ok.attempt.desc())
            .limit(1)
            .correlate(Assignment)
        )
        newest = (
            select(Run.id)
            .where(Run.assignment_id == Assignment.id, Run.status.in_(FINISHED))
            .order_by(Run.scheduled_for.desc(), Run.attempt.desc())
            .limit(1)
            .correlate(Assignment)
            .scalar_subquery()
        )
        streak_run = aliased(Run, name="streak_run")
        ok_at = success.with_only_columns(ok.scheduled_for).scalar_subquery()
        in_streak = and_(
            streak_run.assignment_id == Assignment.id,
            streak_run.status.in_(FAILED),
            or_(ok_at.is_(None), streak_run.scheduled_for > ok_at),
        )
        per_assignment = (
            select(
                Assignment.id.label("assignment_id"),
                Assignment.enabled,
                Assignment.next_fire_at,
                Target.name.label("target"),
                newest.label("run_id"),
                success.with_only_columns(ok.finished_at).scalar_subquery().label("success_at"),
                select(func.count(streak_run.id))
                .where(in_streak)
                .correlate(Assignment)
                .scalar_subquery()
                .label("failures"),
                select(func.min(func.coalesce(streak_run.started_at, streak_run.finished_at)))
                .where(in_streak)
                .correlate(Assignment)
                .scalar_subquery()
                .label("since"),
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
