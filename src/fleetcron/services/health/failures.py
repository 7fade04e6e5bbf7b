"""The failing assignments behind health (:mod:`fleetcron.services.health.report`): which they
are and whether each is part of its target's outage (one chain of CTEs), their counts per
job (one grouped statement), the ones listed (picked with a LIMIT), and for those only the
failure streak and the outage, made into lines.

A target none of whose runs reached it since its connection errors began is
*unreachable*: its failing assignments make one line. Every other failure is one line per
job × target. Every statement here reads a fixed number of index entries per failing
assignment, none per assignment of the fleet: each assignment carries its newest finished
run and that run's status (kept with every run write, ``store/run_newest.py``), so the
failing ones come from the index on that status; the newest run that reached a target
comes from ``ix_runs_target_started``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Integer,
    ScalarSelect,
    and_,
    case,
    distinct,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import Session, aliased

from fleetcron.core import statuses
from fleetcron.core.bounded import Bounded, named_few
from fleetcron.core.permissions import DEFAULT_PROJECT
from fleetcron.core.statuses import RunStatus
from fleetcron.services.health.failure_streak import NEVER, counted, failure_streak, newest_success
from fleetcron.services.health.scope import EVERY, Scope
from fleetcron.store.planner import count_up_to, materialized, written_in
from fleetcron.store.run_newest import unindexed
from fleetcron.store.schema import Assignment, Job, Project, Run, Target, UTCDateTime

FAILED = statuses.FAILED
FINISHED = statuses.FINISHED
REACHED = statuses.REACHED
"""Outcomes that prove the connection to the target worked (the command ran)."""

JOBS_NAMED = 5
"""How many job names a text line of an unreachable target spells out."""

ATTEMPTS_COUNTED = 1000
"""How many failed connections of one outage are counted; past it a line says "more than
1,000" (counting a day's 72,000 of a target with 50 minute-jobs took 10-20 ms a target)."""


# The runs each statement reads, under their own names. Aliased once: building an alias
# and adapting its columns costs more than a call's statements on a warm cache.
LAST_RUN = aliased(Run, name="last_run")
REACHED_RUN = aliased(Run, name="reached_run")
ATTEMPT_RUN = aliased(Run, name="attempt_run")
TARGET_PROJECT = aliased(Project, name="target_project")


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
    failures_more: bool = False
    """There were more than ``failures`` (counted up to ``STREAK_COUNTED``)."""
    silenced: bool = False
    """A silence in force mutes this job on this target (it is still a problem)."""
    project: str = DEFAULT_PROJECT
    """The job's project: job and target names are unique per project only."""


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
    failures_more: bool = False
    """There were more than ``failures`` (a streak counts up to ``STREAK_COUNTED``, an
    outage's connection errors up to ``ATTEMPTS_COUNTED``)."""
    silenced: bool = False
    """A silence in force mutes every job × target of the line (it is still a problem)."""
    project: str = DEFAULT_PROJECT
    """The project of its jobs (of the target, for an unreachable target's line)."""


@dataclass(frozen=True)
class Failing:
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
    failures: Bounded
    streak_since: datetime | None
    reason: str | None = None
    project: str = DEFAULT_PROJECT
    target_project: str = DEFAULT_PROJECT


@dataclass(frozen=True)
class Outage:
    """Connection errors on a target since the last run that reached it: ``attempts`` of
    them, counted up to :data:`ATTEMPTS_COUNTED` (``Bounded.more``: there were more)."""

    reached_at: datetime | None
    since: datetime
    attempts: Bounded


@dataclass
class JobTally:
    """One job's failing assignments, and how many of them are in their target's outage."""

    failing: int = 0
    unreachable: int = 0


#: a job as health names it: its project's name and its own
JobKey = tuple[str, str]


@dataclass(frozen=True)
class FailingCounts:
    """Failing assignments per job (by project and name), and the targets in an outage."""

    by_job: dict[JobKey, JobTally]
    unreachable_targets: int


def reached(run: Any) -> ColumnElement[bool]:
    """``run`` reached its target: the predicate of ``ix_runs_target_reached``."""
    return written_in(run.status, [s.value for s in REACHED])


def connect_error(run: Any) -> ColumnElement[bool]:
    """``run`` could not connect: the predicate of ``ix_runs_target_connect_error``."""
    return written_in(run.status, [RunStatus.CONNECT_ERROR.value])


def last_reached_at() -> ScalarSelect[datetime | None]:
    """When the newest run that reached the correlated ``Target`` started (any job): a
    seek of ``ix_runs_target_reached``, however many connection errors came after it."""
    reached_run = REACHED_RUN
    return (
        select(reached_run.started_at)
        .where(
            reached_run.target_id == Target.id,
            reached(reached_run),
            reached_run.started_at.is_not(None),
        )
        .order_by(reached_run.started_at.desc())
        .limit(1)
        .correlate(Target)
        .scalar_subquery()
    )


def classified(session: Session, scope: Scope = EVERY) -> CTE:
    """The current assignments (of the jobs in ``scope``) whose newest finished run failed
    (``assignment_id``, ``job_id``, ``target_id``), and whether that failure is part of its
    target's outage (``down``: 1 for a connection error after the newest run that reached
    the target)."""
    # The assignment carries its newest finished run and that run's status
    # (store/run_newest.py): the failing ones come from the index on that status. Only a
    # connection error's start is compared with its target's last reach, so only those
    # runs are looked up (by primary key; a CASE evaluates its subquery for its rows alone).
    failing = _failing_assignments(session, scope)
    reached_at = last_reached_at()
    # Once per target with a connection error, not once per failing assignment there.
    last_reached = materialized(
        select(Target.id.label("target_id"), reached_at.label("reached_at"))
        .where(
            Target.id.in_(
                select(failing.c.target_id).where(failing.c.status == RunStatus.CONNECT_ERROR.value)
            )
        )
        .cte("last_reached")
    )
    down = case(
        (
            and_(
                failing.c.status == RunStatus.CONNECT_ERROR.value,
                or_(
                    last_reached.c.reached_at.is_(None),
                    failing.c.started > last_reached.c.reached_at,
                ),
            ),
            1,
        ),
        else_=0,
    )
    return materialized(
        select(
            failing.c.assignment_id,
            failing.c.job_id,
            failing.c.target_id,
            down.label("down"),
        )
        .select_from(failing)
        .outerjoin(last_reached, last_reached.c.target_id == failing.c.target_id)
        .cte("classified")
    )


def _failing_assignments(session: Session, scope: Scope) -> CTE:
    """The current assignments of the jobs in ``scope`` whose newest finished run failed,
    with that status and, for a connection error, when its run started."""
    is_connect_error = Assignment.newest_finished_status == RunStatus.CONNECT_ERROR.value
    started = (
        select(func.coalesce(LAST_RUN.started_at, LAST_RUN.finished_at))
        .where(LAST_RUN.id == Assignment.newest_finished_run_id)
        .correlate(Assignment)
        .scalar_subquery()
    )
    return materialized(
        select(
            Assignment.id.label("assignment_id"),
            Assignment.job_id.label("job_id"),
            Assignment.target_id.label("target_id"),
            Assignment.newest_finished_status.label("status"),
            case((is_connect_error, started), else_=null()).label("started"),
        )
        .where(
            rare(session, Assignment.newest_finished_status.in_(FAILED)),
            scope.jobs(Assignment.job_id),
        )
        .cte("failing")
    )


def failing_overview(
    session: Session, limit: int | None, scope: Scope = EVERY
) -> tuple[FailingCounts, set[int], set[int]]:
    """In one statement (the failing assignments found once): their counts per job and the
    targets in an outage, and the assignments behind the lines listed: those of the first
    ``limit`` unreachable targets (by name) and the first ``limit`` other failing ones (by
    job, then target)."""
    by_job: dict[JobKey, JobTally] = {}
    unreachable_targets = 0
    shown_down: set[int] = set()
    shown_others: set[int] = set()
    rows = session.execute(_overview(session, limit, scope)).all()
    for what, assignment_id, is_down, job, n, project in rows:
        if what == "shown":
            (shown_down if is_down else shown_others).add(assignment_id)
        elif what == "targets":
            unreachable_targets = n
        else:
            tally = by_job.setdefault((project, job), JobTally())
            tally.failing += n
            if is_down:
                tally.unreachable += n
    return FailingCounts(by_job, unreachable_targets), shown_down, shown_others


def _overview(session: Session, limit: int | None, scope: Scope) -> Any:
    """One statement: the assignments behind the lines listed (``shown``), the failing
    ones per job and whether in an outage (``job``), the targets in an outage
    (``targets``)."""
    named = _named_failures(session, scope)
    per_job = select(
        literal("job"), null(), named.c.down, named.c.job, func.count(), named.c.project
    ).group_by(named.c.project, named.c.job, named.c.down)
    targets = select(
        literal("targets"),
        null(),
        literal(1, Integer),
        null(),
        func.count(distinct(named.c.target_id)),
        null(),
    ).where(named.c.down == 1)
    return union_all(_shown_lines(named, limit), per_job, targets)


def _named_failures(session: Session, scope: Scope) -> CTE:
    """The failing assignments (:func:`classified`) with their job's and target's names."""
    c = classified(session, scope)
    return materialized(
        select(
            c.c.assignment_id,
            c.c.target_id,
            c.c.down,
            Job.name.label("job"),
            Target.name.label("target"),
            Project.name.label("project"),
        )
        .select_from(c)
        .join(Job, Job.id == c.c.job_id)
        .join(Target, Target.id == c.c.target_id)
        .join(Project, Project.id == Job.project_id)
        .cte("named")
    )


def _shown_lines(named: CTE, limit: int | None) -> Any:
    """The assignments behind the first ``limit`` lines listed, outages and failures each
    ranked on their own: by target, then by job and target."""
    # An unreachable target's assignments share its rank: its line lists them together.
    rank = case(
        (
            named.c.down == 1,
            func.dense_rank().over(partition_by=named.c.down, order_by=named.c.target),
        ),
        else_=func.row_number().over(
            partition_by=named.c.down, order_by=(named.c.job, named.c.project, named.c.target)
        ),
    )
    ranked = select(named.c.assignment_id, named.c.down, rank.label("rank")).subquery("ranked")
    shown = select(
        literal("shown").label("what"),
        ranked.c.assignment_id.label("assignment_id"),
        ranked.c.down,
        null().label("job"),
        literal(0, Integer).label("n"),
        null().label("project"),
    )
    if limit is not None:
        shown = shown.where(ranked.c.rank <= limit)
    return shown


def failing_rows(
    session: Session, assignment_ids: Sequence[int], streak_of: Iterable[int] | None = None
) -> list[Failing]:
    """These assignments' newest finished run, when it failed, in one statement; for those
    in ``streak_of`` (None: all) with the length and the start of the failure streak (the
    failures after the newest success; the others have 0 and None)."""
    # Issued even for no assignment (an empty IN), as the outages are: a summary makes the
    # same statements whatever it finds. By primary key: the status only filters (read
    # through its index, the planner walked every failing assignment and compared each
    # with the whole list).
    last = LAST_RUN
    failed = _failed_of(assignment_ids, streak_of)
    # The streak (services/health/failure_streak.py), only where asked for: none is counted for
    # the rows of an unreachable target's line, which shows its outage instead.
    streak = failure_streak(failed.c.assignment_id, failed.c.ok_at, since="start")
    failures: Any = func.coalesce(streak.failures, 0)
    since: Any = streak.since
    if streak_of is not None:
        wanted = failed.c.assignment_id.in_(sorted(streak_of))
        failures = case((wanted, failures), else_=0)
        since = case((wanted, since), else_=null())
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
            failures,
            since,
            last.reason,
            Project.name,
            TARGET_PROJECT.name,
        )
        .select_from(failed)
        .join(last, last.id == failed.c.run_id)
        .join(Assignment, Assignment.id == failed.c.assignment_id)
        .join(Job, Job.id == Assignment.job_id)
        .join(Target, Target.id == Assignment.target_id)
        .join(Project, Project.id == Job.project_id)
        .join(TARGET_PROJECT, TARGET_PROJECT.id == Target.project_id)
        .order_by(Job.name, Project.name, Target.name)
    ).all()
    return [_failing(row) for row in rows]


def _failed_of(assignment_ids: Sequence[int], streak_of: Iterable[int] | None) -> CTE:
    """These assignments, when their newest finished run failed: that run, and their
    newest success where a streak is wanted."""
    # The newest success, read once per assignment (and only where a streak is wanted):
    # the streak's subqueries compare each run with it.
    ok_at: Any = newest_success(Assignment.id)
    if streak_of is not None:
        ok_at = case((Assignment.id.in_(sorted(streak_of)), ok_at), else_=null())
    return materialized(
        select(
            Assignment.id.label("assignment_id"),
            Assignment.newest_finished_run_id.label("run_id"),
            ok_at.label("ok_at"),
        )
        .where(
            Assignment.id.in_(assignment_ids),
            unindexed(Assignment.newest_finished_status).in_(statuses.FAILED_VALUES),
        )
        .cte("failing")
    )


def _failing(row: Any) -> Failing:
    return Failing(
        assignment_id=row[0],
        job=row[1],
        target_id=row[2],
        target=row[3],
        run_id=row[4],
        status=row[5],
        error=row[6],
        exit_code=row[7],
        started_at=row[8],
        finished_at=row[9],
        failures=counted(row[10]),
        streak_since=row[11],
        reason=row[12],
        project=row[13],
        target_project=row[14],
    )


def rare(session: Session, condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """``condition``, marked for SQLite's planner as true for few rows. SQLite keeps no
    distribution of a column's values, so it takes the six failed statuses for most of the
    runs and scans the table instead of reading the status index; ``unlikely()`` is a no-op
    that corrects the estimate. PostgreSQL has the histogram."""
    if session.get_bind().dialect.name == "sqlite":
        return func.unlikely(condition)
    return condition


def outages_of(session: Session, target_ids: Sequence[int]) -> dict[int, Outage]:
    """Per target, the connection errors since the newest run that reached it (by start
    time across all its jobs): the first, and how many, counted up to
    :data:`ATTEMPTS_COUNTED` (``attempts.more``: there were more). Targets reached after
    their last connection error have none. A few seeks per target, however long the outage
    (``ix_runs_target_reached``, ``ix_runs_target_connect_error``)."""
    # Materialized: else PostgreSQL and SQLite inline it and look up the newest reaching run
    # again for every place that reads it.
    last_reached = materialized(
        select(Target.id.label("target_id"), last_reached_at().label("reached_at"))
        .where(Target.id.in_(target_ids))
        .cte("last_reached")
    )
    attempt = ATTEMPT_RUN
    since_reached = and_(
        attempt.target_id == last_reached.c.target_id,
        connect_error(attempt),
        attempt.started_at
        > func.coalesce(last_reached.c.reached_at, literal(NEVER, UTCDateTime())),
    )
    first = (
        select(attempt.started_at)
        .where(since_reached)
        .order_by(attempt.started_at)
        .limit(1)
        .correlate(last_reached)
        .scalar_subquery()
    )
    attempts = count_up_to(attempt, since_reached, ATTEMPTS_COUNTED)
    rows = session.execute(
        select(last_reached.c.target_id, last_reached.c.reached_at, first, attempts)
    ).all()
    return {
        row[0]: Outage(row[1], row[2], Bounded.of(row[3], ATTEMPTS_COUNTED))
        for row in rows
        if row[2] is not None
    }


def in_outage(failing: Failing, outage: Outage | None) -> bool:
    """Whether this failure is part of its target's outage: a connection error that no run
    reaching the target has followed."""
    if failing.status != "connect_error" or outage is None:
        return False
    started = failing.started_at or failing.finished_at
    return outage.reached_at is None or (started is not None and started > outage.reached_at)


def group_failures(failing: Iterable[Failing], outages: dict[int, Outage]) -> list[GroupedProblem]:
    """One ``unreachable`` line per target in an outage, then one ``failing`` line per
    other failing job × target."""
    down: list[Failing] = []
    others: list[GroupedProblem] = []
    for f in failing:
        if in_outage(f, outages.get(f.target_id)):
            down.append(f)
        else:
            others.append(one_line(failing_problem(f)))
    return [*unreachable_lines(down, outages), *others]


def unreachable_lines(down: Iterable[Failing], outages: dict[int, Outage]) -> list[GroupedProblem]:
    """One line per target of these failures (all of them part of its outage), by name."""
    by_target: dict[int, list[Failing]] = {}
    for f in down:
        by_target.setdefault(f.target_id, []).append(f)
    lines = []
    for target_id, members in by_target.items():
        newest = max(members, key=lambda f: f.run_id)  # its error is the one shown
        outage = outages.get(target_id) or members_outage(members)
        jobs = tuple(sorted(f.job for f in members))
        named = named_few(jobs, JOBS_NAMED)
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
                failures=outage.attempts.n,
                failures_more=outage.attempts.more,
                run_id=newest.run_id,
                project=newest.target_project,
            )
        )
    lines.sort(key=lambda line: (line.target, line.project))
    return lines


def members_outage(members: Sequence[Failing]) -> Outage:
    """The outage as its failures show it, for a target whose connection errors carry no
    start time (the outage statement reads start times only)."""
    times = [t for f in members for t in (f.started_at, f.finished_at) if t is not None]
    return Outage(None, min(times) if times else datetime.min, Bounded(len(members)))


def failing_problem(f: Failing) -> Problem:
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
        failures=f.failures.n,
        failures_more=f.failures.more,
        last_failure_at=f.finished_at,
        run_id=f.run_id,
        project=f.project,
    )


def one_line(p: Problem) -> GroupedProblem:
    return GroupedProblem(
        p.kind,
        p.target,
        p.job,
        (p.job,),
        p.since,
        p.detail,
        p.error,
        p.failures,
        p.run_id,
        p.failures_more,
        p.silenced,
        p.project,
    )
