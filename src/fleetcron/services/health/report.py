"""Health of the schedules: what failed, what is late or missing, what is stuck.

*Late or missing* needs no scan of the history: the scheduler advances an assignment's
indexed ``next_fire_at`` whenever it decides a slot (ran, missed, skipped). An enabled
assignment whose ``next_fire_at`` is older than the misfire grace therefore has a slot
nobody decided — the scheduler was down, or no node could prove ownership.

*Failing* is grouped by cause. A target none of whose runs reached it since its connection
errors began is **unreachable**: one line for the target, with the connection error and the
start of the outage, however many of its jobs fail. Every other failure (the command exited
non-zero or timed out, or the outcome is unknown: lost, interrupted, fenced) is one line per
job × target. ``HealthSummary.problems`` keeps the job × target detail of the lines shown.

**Bounded.** A summary lists at most ``limit`` lines of each cause (``DEFAULT_LIMIT``, at
most ``LIMIT_MAX``; ``None``: all), and keeps the full counts: per cause
(``HealthSummary.groups``: lines, job × target problems, how many more than shown, and
where the web UI lists them all), per job (``HealthSummary.jobs``, the jobs with the most
problems first, also at most ``limit``) and in total (``ok``, ``line_count``,
``problem_count``: what monitors and the exit status of ``fleetcron health`` read). With
5,000 failing targets an answer is a few dozen lines, not 2,550 (537 KB of JSON before).

Cost: a fixed number of statements per call, none per assignment or per target, and only
the lines shown are built. The failing assignments come from one chain of CTEs: those whose
newest finished run failed (each assignment carries that run and its status, kept with
every run write by ``store/run_newest.py``; an index on the status finds them), and for the
targets with a connection error the newest run that reached them
(``ix_runs_target_started``), which says whether the failure is part of an outage. The
counts are grouped statements over that chain; the shown lines are picked from it with a
LIMIT, and only they get their streak (the failures since the newest success) and their
outage read.

**Hosts.** Beside the causes, ``hosts``: the SSH targets whose newest host probe (a fresh
connection, ``services/targets/reach.py``) failed, counted in full in ``hosts_down``. A
target whose pooled connection still works but whose ``sshd`` is gone shows here within
one probe interval, before its jobs fail. Any such host makes the summary not ``ok``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.permissions import DEFAULT_PROJECT
from fleetcron.core.statuses import RunStatus
from fleetcron.core.validation import validate_int
from fleetcron.metrics import StateReading
from fleetcron.services.health.assignments import AssignmentHealth, assignment_health
from fleetcron.services.health.failures import (
    FAILED,
    FINISHED,
    JOBS_NAMED,
    REACHED,
    FailingCounts,
    GroupedProblem,
    JobKey,
    JobTally,
    Problem,
    classified,
    failing_overview,
    failing_problem,
    failing_rows,
    group_failures,
    one_line,
    outages_of,
    unreachable_lines,
)
from fleetcron.services.health.hosts import HostLine, hosts_down
from fleetcron.services.health.scope import EVERY, Scope, day_counts, scope_of
from fleetcron.services.health.silenced import active_silences, silenced_names, silenced_pairs
from fleetcron.store.planner import materialized
from fleetcron.store.schema import Assignment, ClusterOwnership, Job, Project, Run, Target

DEFAULT_LIMIT = 20
"""Lines of each cause (and jobs) a summary lists unless asked for another number."""
LIMIT_MAX = 1000
"""The most lines of one cause a caller may ask for (the CLI's ``--limit 0`` lists all)."""

KINDS: tuple[str, ...] = ("unreachable", "failing", "stuck", "late")
"""The causes, in the order their lines are listed."""


@dataclass(frozen=True)
class Group:
    """One cause, counted in full, however few of its lines are listed.

    ``total``: its lines (targets for ``unreachable``, job × target for ``failing`` and
    ``late``, runs for ``stuck``); ``problems``: the job × target problems behind them;
    ``shown``: the lines listed; ``more``: the lines not listed; ``see_all``: the web UI's
    list that holds every one of them (paged), or None where that list is per job (see
    :attr:`HealthSummary.jobs`).
    """

    kind: str
    total: int
    problems: int
    shown: int
    more: int
    see_all: str | None


@dataclass(frozen=True)
class JobProblems:
    """One job's problems, counted in full: job × target failing (``unreachable`` of them
    because their target cannot be reached), late, and stuck runs; ``see_all``: the job
    page filtered to them."""

    job: str
    total: int
    failing: int
    unreachable: int
    late: int
    stuck: int
    see_all: str
    #: the job's project: two projects' jobs of one name are two entries
    project: str = DEFAULT_PROJECT


@dataclass
class HealthSummary:
    checked_at: datetime
    limit: int | None = DEFAULT_LIMIT
    problems: list[Problem] = field(default_factory=list)
    """The job × target detail of the lines listed in ``grouped`` (of an unreachable
    target's line: one per job there; asked for without detail: none of those)."""
    grouped: list[GroupedProblem] = field(default_factory=list)
    """At most ``limit`` lines of each cause, in the order of :data:`KINDS`."""
    groups: list[Group] = field(default_factory=list)
    jobs: list[JobProblems] = field(default_factory=list)
    """At most ``limit`` jobs with problems, the most first."""
    jobs_total: int = 0
    """Every job with a problem."""
    failures_24h: int = 0
    runs_24h: dict[str, int] = field(default_factory=dict)
    hosts_down: int = 0
    """SSH targets the newest host probe found unreachable (a fresh connection fails)."""
    hosts: list[HostLine] = field(default_factory=list)
    """At most ``limit`` of them, longest down first."""
    silenced: int = 0
    """Job × target problems (and stuck runs) under a silence in force: listed and
    counted as the others (in ``ok`` and the exit status too), marked ``silenced``."""

    @property
    def line_count(self) -> int:
        """Every line of the grouped view, listed or not."""
        return sum(g.total for g in self.groups)

    @property
    def problem_count(self) -> int:
        """Every job × target problem (and stuck run), listed or not."""
        return sum(g.problems for g in self.groups)

    @property
    def ok(self) -> bool:
        return self.line_count == 0 and self.hosts_down == 0

    def group(self, kind: str) -> Group:
        return next(g for g in self.groups if g.kind == kind)

    def as_dict(self, *, detail: bool = True) -> dict[str, Any]:
        """The summary for JSON; ``detail=False`` leaves out the job × target problems."""
        out = {
            **asdict(self),
            "ok": self.ok,
            "line_count": self.line_count,
            "problem_count": self.problem_count,
        }
        if not detail:
            del out["problems"]
        return out


def late_count(session: Session, now: datetime, grace: timedelta) -> int:
    return session.scalar(select(func.count(Assignment.id)).where(_is_late(now, grace, EVERY))) or 0


def state_reading(app: App, ownership: Callable[[], str]) -> StateReading:
    """What the metrics' state gauges show at scrape time: late assignments, running runs,
    this node's ownership (as ``ownership`` tells it) and the generation."""
    with app.db.read() as session:
        late = late_count(session, app.now(), timedelta(seconds=app.settings.misfire_grace_s))
        running = (
            session.scalar(select(func.count(Run.id)).where(Run.status == RunStatus.RUNNING)) or 0
        )
        generation = session.scalar(select(func.max(ClusterOwnership.generation))) or 0
    return StateReading(late, running, ownership(), generation)


def check_limit(limit: int | None) -> int | None:
    """``limit`` lines of each cause: 1 to :data:`LIMIT_MAX`, or None for all."""
    if limit is not None:
        validate_int(limit, field="limit", low=1, high=LIMIT_MAX)
    return limit


def runs_url(**query: str) -> str:
    return "/runs?" + urlencode(query)


def job_url(job: str, project: str = DEFAULT_PROJECT, **query: str) -> str:
    """The job page (in its project, when not ``default``) with ``query``."""
    where = {} if project == DEFAULT_PROJECT else {"project": project}
    return f"/jobs/{quote(job, safe='')}?" + urlencode({**where, **query})


#: Where the web UI lists every line of a cause: the runs list filtered (every unreachable
#: target has its connection errors there, every stuck run is running). Failing and late
#: lines are listed per job, on the job page (:attr:`JobProblems.see_all`).
SEE_ALL: dict[str, str | None] = {
    "unreachable": runs_url(status=RunStatus.CONNECT_ERROR.value),
    "failing": None,
    "stuck": runs_url(status=RunStatus.RUNNING.value),
    "late": None,
}


def summary(
    app: App,
    actor: Actor,
    *,
    limit: int | None = DEFAULT_LIMIT,
    detail: bool = True,
    project: str | None = None,
) -> HealthSummary:
    """Failing assignments, late or missing slots, runs running past their deadline,
    grouped by cause (``grouped``, at most ``limit`` lines of each cause; None: all) with
    their job × target detail (``problems``; with ``detail=False`` only that of the lines
    that are one job × target, so that the streaks of an unreachable target's jobs are not
    read), and counted in full (``groups``, ``jobs``). A line under a silence in force is
    listed as any other, marked ``silenced`` (and counted in ``silenced``): silences mute
    messages, not health, so it still counts in ``ok`` and the exit status.

    ``project``: that project's health only (its jobs' problems and runs, the hosts down
    among the targets its jobs may run on), for whoever reads its runs; None: the whole
    install's, for a global role."""
    _authorize(actor, project)
    check_limit(limit)
    now = app.now()
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    result = HealthSummary(checked_at=now, limit=limit)
    with app.db.read() as session:
        scope = scope_of(session, actor, project)
        late_by_job, late = _late(session, now, grace, limit, scope)
        stuck_by_job, stuck = _stuck(session, now, limit, scope)
        failing = _failing(session, limit, scope, detail=detail)
        result.problems = [*late, *stuck, *failing.detailed]
        result.grouped = [
            *failing.down_lines,
            *failing.lines,
            *(one_line(p) for p in stuck),
            *(one_line(p) for p in late),
        ]
        result.groups = _groups(failing, stuck_by_job, late_by_job, len(stuck), len(late))
        per_job = _per_job(failing.counts.by_job, late_by_job, stuck_by_job)
        result.jobs_total = len(per_job)
        result.jobs = per_job[:limit] if limit is not None else per_job
        # The whole install's kept per minute and status by triggers on the runs
        # (store/run_counts.py): its day's runs are not read; a project's are counted.
        result.runs_24h = day_counts(session, now - timedelta(hours=24), scope)
        result.failures_24h = sum(result.runs_24h.get(s, 0) for s in FAILED)
        result.hosts_down, result.hosts = hosts_down(session, limit, scope)
        _mark_silenced(session, now, grace, result, scope)
    return result


def _authorize(actor: Actor, project: str | None) -> None:
    """Every project's health needs a global role; a project's, reading its runs."""
    if project is None:
        actor.authorize("run.read")
    else:
        actor.authorize_in("run.read", project)


def _late(
    session: Session, now: datetime, grace: timedelta, limit: int | None, scope: Scope
) -> tuple[dict[JobKey, int], list[Problem]]:
    """Late assignments (of the jobs in ``scope``) counted per job, and the first ``limit``."""
    is_late = _is_late(now, grace, scope)
    # The rows first (their index), then the grouping: else the planners walk a whole
    # index in the grouping's order to save a sort, 45-750 ms for no row at all.
    late_rows = materialized(select(Assignment.job_id).where(is_late).cte("late_rows"))
    by_job: dict[JobKey, int] = {
        (project, job): n
        for project, job, n in session.execute(
            select(Project.name, Job.name, func.count())
            .select_from(late_rows)
            .join(Job, Job.id == late_rows.c.job_id)
            .join(Project, Project.id == Job.project_id)
            .group_by(Project.name, Job.name)
        )
    }
    late = [
        Problem(
            "late",
            row[0],
            row[1],
            row[2],
            f"slot {row[2]:%Y-%m-%d %H:%M} not decided",
            project=row[3],
        )
        for row in session.execute(
            select(Job.name, Target.name, Assignment.next_fire_at, Project.name)
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .join(Project, Project.id == Job.project_id)
            .where(is_late)
            .order_by(Assignment.next_fire_at, Assignment.id)
            .limit(limit)
        )
    ]
    return by_job, late


def _is_late(now: datetime, grace: timedelta, scope: Scope) -> ColumnElement[bool]:
    return and_(
        Assignment.enabled.is_(True),
        Assignment.next_fire_at < now - grace,
        scope.jobs(Assignment.job_id),
    )


def _is_stuck(now: datetime, scope: Scope) -> ColumnElement[bool]:
    return and_(Run.status == RunStatus.RUNNING, Run.deadline_at < now, scope.jobs(Run.job_id))


def _stuck(
    session: Session, now: datetime, limit: int | None, scope: Scope
) -> tuple[dict[JobKey, int], list[Problem]]:
    """Runs (of the jobs in ``scope``) running past their deadline counted per job, and
    the first ``limit`` (a run of a removed job counts in ``default``, of every project's
    health only)."""
    is_stuck = _is_stuck(now, scope)
    stuck_rows = materialized(select(Run.job_name, Run.job_id).where(is_stuck).cte("stuck_rows"))
    project = func.coalesce(Project.name, DEFAULT_PROJECT)
    by_job: dict[JobKey, int] = {
        (where, job): n
        for where, job, n in session.execute(
            select(project, stuck_rows.c.job_name, func.count())
            .select_from(stuck_rows)
            .outerjoin(Job, Job.id == stuck_rows.c.job_id)
            .outerjoin(Project, Project.id == Job.project_id)
            .group_by(project, stuck_rows.c.job_name)
        )
    }
    stuck = [
        Problem(
            "stuck",
            run.job_name,
            run.target_name,
            run.started_at,
            f"run {run.id} still running past its deadline",
            status=run.status,
            run_id=run.id,
            project=where,
        )
        for run, where in session.execute(
            select(Run, project)
            .outerjoin(Job, Job.id == Run.job_id)
            .outerjoin(Project, Project.id == Job.project_id)
            .where(is_stuck)
            .order_by(Run.id)
            .limit(limit)
        ).all()
    ]
    return by_job, stuck


@dataclass(frozen=True)
class _FailingPart:
    """The failing assignments as a summary shows them: counted, their lines (those of
    unreachable targets and the others), and the job × target detail kept."""

    counts: FailingCounts
    down_lines: list[GroupedProblem]
    lines: list[GroupedProblem]
    detailed: list[Problem]


def _failing(session: Session, limit: int | None, scope: Scope, *, detail: bool) -> _FailingPart:
    counts, shown_down, shown_others = failing_overview(session, limit, scope)
    failing = failing_rows(session, [*shown_down, *shown_others], None if detail else shown_others)
    outages = outages_of(
        session, sorted({f.target_id for f in failing if f.assignment_id in shown_down})
    )
    down_lines = unreachable_lines([f for f in failing if f.assignment_id in shown_down], outages)
    lines = [one_line(failing_problem(f)) for f in failing if f.assignment_id in shown_others]
    detailed = [failing_problem(f) for f in failing if detail or f.assignment_id in shown_others]
    return _FailingPart(counts, down_lines, lines, detailed)


def _groups(
    failing: _FailingPart,
    stuck_by_job: dict[JobKey, int],
    late_by_job: dict[JobKey, int],
    stuck_shown: int,
    late_shown: int,
) -> list[Group]:
    """Each cause counted in full: its lines, its job × target problems, how many shown."""
    by_job = failing.counts.by_job.values()
    unreachable_problems = sum(c.unreachable for c in by_job)
    other_failing = sum(c.failing for c in by_job) - unreachable_problems
    stuck, late = sum(stuck_by_job.values()), sum(late_by_job.values())
    totals = {
        "unreachable": (
            failing.counts.unreachable_targets,
            unreachable_problems,
            len(failing.down_lines),
        ),
        "failing": (other_failing, other_failing, len(failing.lines)),
        "stuck": (stuck, stuck, stuck_shown),
        "late": (late, late, late_shown),
    }
    return [
        Group(kind, total, problems, shown, total - shown, SEE_ALL[kind])
        for kind, (total, problems, shown) in totals.items()
    ]


def _mark_silenced(
    session: Session, now: datetime, grace: timedelta, result: HealthSummary, scope: Scope
) -> None:
    """Mark the lines under a silence in force and count every problem under one (a few
    more statements only while a silence is in force)."""
    if not active_silences(session, now):
        return
    # An unreachable target's line names its jobs in the target's project.
    names = {(p.project, p.job, p.target) for p in result.problems}
    names |= {(g.project, job, g.target) for g in result.grouped for job in g.jobs}
    muted = silenced_names(session, names, now)
    result.problems = [
        replace(p, silenced=True) if (p.project, p.job, p.target) in muted else p
        for p in result.problems
    ]
    result.grouped = [
        replace(g, silenced=True) if all((g.project, j, g.target) in muted for j in g.jobs) else g
        for g in result.grouped
    ]
    every = _problem_pairs(session, now, grace, scope)
    covered = silenced_pairs(session, every, now)
    result.silenced = sum(1 for pair in every if pair in covered)


def _problem_pairs(
    session: Session, now: datetime, grace: timedelta, scope: Scope
) -> list[tuple[int, int]]:
    """(job, target) of every problem in ``scope``: failing and late job × target, stuck
    runs."""
    c = classified(session, scope)
    statements = [
        select(c.c.job_id, c.c.target_id),
        select(Assignment.job_id, Assignment.target_id).where(_is_late(now, grace, scope)),
        select(Run.job_id, Run.target_id).where(_is_stuck(now, scope)),
    ]
    return [
        (job_id, target_id)
        for statement in statements
        for job_id, target_id in session.execute(statement)
        if job_id is not None and target_id is not None
    ]


def _per_job(
    failing: dict[JobKey, JobTally], late: dict[JobKey, int], stuck: dict[JobKey, int]
) -> list[JobProblems]:
    out = []
    for key in {*failing, *late, *stuck}:
        project, job = key
        tally = failing.get(key, JobTally())
        n_late, n_stuck = late.get(key, 0), stuck.get(key, 0)
        if tally.failing:
            see_all = job_url(job, project, status="failed")
        elif n_late:
            see_all = job_url(job, project, sort="next")  # the undecided slots first
        else:
            where = {} if project == DEFAULT_PROJECT else {"project": project}
            see_all = runs_url(**where, job=job, status=RunStatus.RUNNING.value)
        out.append(
            JobProblems(
                job,
                tally.failing + n_late + n_stuck,
                tally.failing,
                tally.unreachable,
                n_late,
                n_stuck,
                see_all,
                project,
            )
        )
    out.sort(key=lambda j: (-j.total, j.job, j.project))
    return out


__all__ = [
    "DEFAULT_LIMIT",
    "FAILED",
    "FINISHED",
    "JOBS_NAMED",
    "KINDS",
    "LIMIT_MAX",
    "REACHED",
    "SEE_ALL",
    "AssignmentHealth",
    "Group",
    "GroupedProblem",
    "HealthSummary",
    "HostLine",
    "JobProblems",
    "Problem",
    "assignment_health",
    "check_limit",
    "group_failures",
    "late_count",
    "summary",
]
