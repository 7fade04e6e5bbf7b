"""One job across all its targets: the job page's rows, per-job counts, the fleet grid,
the slots of a bulk job, and which targets a targeted run or a bulk pause selects.

Everything here is read in a few set-based statements, never one per target: the state of
every assignment comes from one statement whose correlated subqueries seek the runs'
``(assignment_id, scheduled_for, attempt)`` unique index (the newest run, the newest
success, the failures since it), so the cost grows with the job's targets, not with its
history. Filtering and sorting then run over those rows in memory (5,000 small tuples);
the status strips are read with one window query for the shown page only.

The words: a target's *state* is the class of its newest run of the job (``ok`` — it
succeeded, ``failed`` — one of :data:`fleetcron.core.statuses.FAILED`, ``running`` —
queued or running, ``skipped``, ``missed``, or ``never``); *paused* is separate (the job is
disabled on the target, or the whole target is paused), so a paused target keeps showing
how its last run went. The *failure streak* counts the failed runs since the newest
success (skipped and missed slots neither break nor extend it), and *since* is the slot of
the first of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from sqlalchemy import (
    ColumnElement,
    String,
    and_,
    case,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
)
from sqlalchemy.orm import Session, aliased

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.labels import format_selector, parse_labels, parse_selector, selector_matches
from fleetcron.core.statuses import RunStatus
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services import jobs as jobs_svc
from fleetcron.store.schema import Assignment, Job, Run, Target

#: The classes of a target's newest run, in the order "worst first" sorts them.
STATES: tuple[str, ...] = ("failed", "running", "missed", "skipped", "never", "ok")
#: What the status filter accepts: a state, or ``paused`` / ``active`` (not paused).
STATUS_FILTERS: tuple[str, ...] = (*STATES, "paused", "active")
#: Sort keys (``-`` in front reverses): target name, state (worst first), newest run
#: (newest first), duration (longest first), failure streak (longest first), next fire.
SORTS: tuple[str, ...] = ("target", "status", "last", "duration", "streak", "next")
STRIP_DEFAULT = 20
STRIP_MAX = 100
PAGE_MAX = 1000
#: Statuses that count as "did not succeed" for a re-run of the failed targets.
RERUN_STATUSES = statuses.FAILED
_FAILED = [s.value for s in statuses.FAILED]


def state_of(status: RunStatus | str | None) -> str:
    """The class of a run's status as the job page shows it."""
    if status is None:
        return "never"
    status = RunStatus(status)
    if status is RunStatus.SUCCEEDED:
        return "ok"
    if status in statuses.FAILED:
        return "failed"
    if status in statuses.ACTIVE:
        return "running"
    if status is RunStatus.CANCELLED:
        return "skipped"  # stopped by an operator: did not run to an outcome, not a failure
    return status.value  # missed, skipped


# --- result types -------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotMark:
    """One cell of a target's status strip: a run of the job there."""

    run_id: int
    status: str
    scheduled_for: datetime

    @property
    def state(self) -> str:
        return state_of(self.status)


@dataclass(frozen=True)
class LastResult:
    """The newest run of the job on a target."""

    run_id: int
    status: str
    exit_code: int | None
    duration_ms: int | None
    scheduled_for: datetime
    started_at: datetime | None
    finished_at: datetime | None
    trigger: str


@dataclass(frozen=True)
class TargetRow:
    """One target of a job, as the job page, the API and ``job status`` show it."""

    target: str
    labels: dict[str, str]
    enabled: bool
    target_paused: bool
    next_fire_at: datetime | None
    state: str
    last: LastResult | None
    streak: int
    streak_since: datetime | None
    strip: tuple[SlotMark, ...] = ()
    timezone: str | None = None
    """The target's own zone (None: not set); its next fire is shown in it."""

    @property
    def next_fire_local(self) -> datetime | None:
        """The next fire on the target's wall clock, when the target has a zone."""
        if self.next_fire_at is None or self.timezone is None:
            return None
        return self.next_fire_at.astimezone(ZoneInfo(self.timezone))

    @property
    def paused(self) -> bool:
        return not self.enabled or self.target_paused

    @property
    def label_text(self) -> str:
        return format_selector(self.labels)


@dataclass(frozen=True)
class JobCounts:
    """How a job's targets stand: by their newest run, and how many are paused (a paused
    target is also counted by its newest run)."""

    total: int = 0
    ok: int = 0
    failed: int = 0
    running: int = 0
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
            "missed": self.missed,
            "skipped": self.skipped,
            "never": self.never,
            "paused": self.paused,
        }


@dataclass(frozen=True)
class TargetQuery:
    """Which rows of a job's targets to show, in which order, which page."""

    statuses: Sequence[str] = ()
    labels: Sequence[str] = ()
    sort: str = "target"
    limit: int = 50
    offset: int = 0
    strip: int = STRIP_DEFAULT


@dataclass(frozen=True)
class TargetsPage:
    job: str
    origin: str
    counts: JobCounts
    matched: int
    limit: int
    offset: int
    sort: str
    items: list[TargetRow] = field(default_factory=list)


@dataclass(frozen=True)
class SlotGroup:
    """One slot of a job: every run with the same ``scheduled_for`` (a bulk fire on all its
    targets, or one manual request), counted per status."""

    scheduled_for: datetime
    trigger: str
    runs: int
    by_status: dict[str, int]
    run_ids: tuple[int, ...] = ()

    @property
    def failed(self) -> int:
        return sum(self.by_status.get(s, 0) for s in _FAILED)


@dataclass(frozen=True)
class SlotsPage:
    job: str
    items: list[SlotGroup]
    limit: int
    #: The ``before`` cursor of the next (older) page, None on the last page.
    next_before: datetime | None


@dataclass(frozen=True)
class GridCell:
    state: str
    enabled: bool
    run_id: int | None


@dataclass(frozen=True)
class FleetGrid:
    """Targets (rows) by bulk jobs (columns), capped on both sides."""

    jobs: list[str]
    targets: list[str]
    cells: dict[tuple[str, str], GridCell]
    total_targets: int
    total_jobs: int
    offset: int

    @property
    def more_targets(self) -> int:
        return max(0, self.total_targets - self.offset - len(self.targets))

    @property
    def more_jobs(self) -> int:
        return self.total_jobs - len(self.jobs)


@dataclass(frozen=True)
class Selection:
    """Which targets of a job a manual run (or a bulk pause) is for. Every given part
    narrows the selection; nothing given means every enabled target (today's run now).

    ``failed``: targets whose newest run of the job did not succeed (one of
    :data:`RERUN_STATUSES`; a target whose re-run is already queued or running is not
    selected again). ``selector``: targets whose labels match. ``targets``: these targets,
    even where the job is paused (as naming one target always did)."""

    failed: bool = False
    selector: str | None = None
    targets: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        return self.failed or bool(self.selector) or bool(self.targets)

    def audit_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {}
        if self.failed:
            detail["failed"] = True
        if self.selector:
            detail["selector"] = format_selector(parse_selector(self.selector))
        if self.targets:
            detail["targets"] = list(self.targets)
        return detail


@dataclass(frozen=True)
class JobHeader:
    """What the job page shows above its targets (one row read; no assignments)."""

    name: str
    origin: str
    schedule: str
    timezone: str
    command: str
    notes: str
    selector: str
    #: The job's spread window (each target starts at its own offset in it); 0: none.
    spread_s: int = 0


def job_header(app: App, actor: Actor, name: str) -> JobHeader:
    actor.authorize("job.read")
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        if job is None:
            raise NotFound("job", name)
        return JobHeader(
            name=job.name,
            origin=job.origin,
            schedule=job.schedule,
            timezone=job.timezone,
            command=job.command,
            notes=job.notes,
            selector=format_selector(job.selector or {}),
            spread_s=job.spread_s,
        )


# --- the statements -----------------------------------------------------------------------


def _newest(condition: ColumnElement[bool] | None = None) -> Any:
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


def _unindexed(status: Any) -> Any:
    """``status`` as an expression no index serves (``status || ''``), on every database.

    The reads below go through one assignment's runs by the (assignment, slot, attempt)
    index and stop at the first match; given a bare ``status = ...`` term, a planner without
    statistics may pick an index that starts with the status instead and walk every run of
    that status in the table (seconds, at a few hundred thousand runs)."""
    return type_coerce(status, String()).concat("")


def _summary(session: Session, job_id: int, assignment_ids: Sequence[int]) -> list[Any]:
    """The named assignments of the job with their target, newest run and failure streak
    (the page's rows, or the failing ones when sorting by streak)."""
    base = (
        select(
            Assignment.id.label("assignment_id"),
            Assignment.enabled,
            Assignment.next_fire_at,
            Target.name.label("target"),
            Target.labels,
            Target.paused.label("target_paused"),
            Target.timezone.label("timezone"),
            _newest().label("last_id"),
            _newest(_unindexed(Run.status) == RunStatus.SUCCEEDED.value).label("last_ok"),
        )
        .join(Target, Target.id == Assignment.target_id)
        .where(Assignment.job_id == job_id, Assignment.id.in_(assignment_ids))
        .cte("summary")
    )
    failed = aliased(Run)
    since_last_ok = and_(
        failed.assignment_id == base.c.assignment_id,
        _unindexed(failed.status).in_(_FAILED),
        or_(base.c.last_ok.is_(None), failed.scheduled_for > base.c.last_ok),
    )
    streak = select(func.count(failed.id)).where(since_last_ok).correlate(base).scalar_subquery()
    since = (
        select(func.min(failed.scheduled_for))
        .where(since_last_ok)
        .correlate(base)
        .scalar_subquery()
    )
    # Only a target whose newest run failed has a streak: no count for the others.
    is_failing = Run.status.in_(statuses.FAILED)
    query = select(
        base,
        Run.status,
        Run.exit_code,
        Run.duration_ms,
        Run.scheduled_for,
        Run.started_at,
        Run.finished_at,
        Run.trigger,
        case((is_failing, streak), else_=0).label("streak"),
        case((is_failing, since), else_=None).label("streak_since"),
    ).outerjoin(Run, Run.id == base.c.last_id)
    return list(session.execute(query).all())


def _row(r: Any) -> TargetRow:
    last = None
    if r.last_id is not None and r.status is not None:
        last = LastResult(
            run_id=r.last_id,
            status=RunStatus(r.status).value,
            exit_code=r.exit_code,
            duration_ms=r.duration_ms,
            scheduled_for=r.scheduled_for,
            started_at=r.started_at,
            finished_at=r.finished_at,
            trigger=r.trigger,
        )
    return TargetRow(
        target=r.target,
        labels=dict(r.labels or {}),
        enabled=bool(r.enabled),
        target_paused=bool(r.target_paused),
        next_fire_at=r.next_fire_at,
        state=state_of(r.status),
        last=last,
        streak=int(r.streak or 0),
        streak_since=r.streak_since,
        timezone=r.timezone,
    )


def strips(
    session: Session, assignment_ids: Sequence[int], n: int
) -> dict[int, tuple[SlotMark, ...]]:
    """The newest ``n`` runs of each assignment, oldest first: one window query."""
    if not assignment_ids or n <= 0:
        return {}
    ranked = (
        select(
            Run.assignment_id,
            Run.id,
            Run.status,
            Run.scheduled_for,
            func.row_number()
            .over(
                partition_by=Run.assignment_id,
                order_by=(Run.scheduled_for.desc(), Run.attempt.desc()),
            )
            .label("rn"),
        )
        .where(Run.assignment_id.in_(assignment_ids))
        .subquery()
    )
    rows = session.execute(
        select(ranked.c.assignment_id, ranked.c.id, ranked.c.status, ranked.c.scheduled_for)
        .where(ranked.c.rn <= n)
        .order_by(ranked.c.assignment_id, ranked.c.rn.desc())
    ).all()
    out: dict[int, list[SlotMark]] = {}
    for assignment_id, run_id, status, scheduled_for in rows:
        out.setdefault(assignment_id, []).append(
            SlotMark(run_id, RunStatus(status).value, scheduled_for)
        )
    return {key: tuple(value) for key, value in out.items()}


# --- validation ---------------------------------------------------------------------------


def _check_query(q: TargetQuery) -> tuple[set[str], dict[str, str], str, bool]:
    wanted: set[str] = set()
    for status in q.statuses:
        for part in (p.strip() for p in status.split(",")):
            if part and part not in STATUS_FILTERS:
                raise InvalidInput(
                    f"status: {part!r} is not one of {', '.join(STATUS_FILTERS)}",
                    field="status",
                    value=part,
                    allowed=", ".join(STATUS_FILTERS),
                )
            if part:
                wanted.add(part)
    labels = parse_labels(q.labels, field="label")
    key = q.sort.strip() or "target"
    descending = key.startswith("-")
    if key.lstrip("-") not in SORTS:
        raise InvalidInput(
            f"sort: {q.sort!r} is not one of {', '.join(SORTS)} (a leading '-' reverses)",
            field="sort",
            value=q.sort,
            allowed=", ".join(SORTS),
        )
    _check_range("limit", q.limit, 1, PAGE_MAX)
    _check_range("offset", q.offset, 0, 10_000_000)
    _check_range("strip", q.strip, 0, STRIP_MAX)
    return wanted, labels, key.lstrip("-"), descending


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidInput(
            f"{name}: {value} is out of range; allowed: {low} to {high}",
            field=name,
            value=str(value),
            allowed=f"{low} to {high}",
        )


#: A run status (its string) -> the state it puts a target in.
_STATE_OF: dict[str | None, str] = {None: "never", **{s.value: state_of(s) for s in RunStatus}}


class _Light(NamedTuple):
    """One assignment as the first, all-targets pass reads it: enough to count, filter
    and sort (all but the streak); the shown page is then read in full. A tuple: thousands
    are made per page."""

    assignment_id: int
    target: str
    enabled: bool
    target_paused: bool
    #: the times as the driver gives them (text on SQLite): compared, never shown
    next_fire_at: Any
    state: str
    last_at: Any
    duration_ms: int | None
    labels: Mapping[str, str]

    @property
    def paused(self) -> bool:
        return not self.enabled or self.target_paused


def _with_newest(
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
    inner_q = select(*columns, _newest().label("last_id")).select_from(Assignment)
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


def _states(session: Session, job_id: int, *, labels: bool) -> list[_Light]:
    """Every assignment of the job with the status of its newest run (the target's labels
    only when a filter needs them)."""
    columns: list[Any] = [
        Assignment.id.label("id"),
        Assignment.enabled.label("enabled"),
        # as the driver gives it: only compared (sorting), never shown
        type_coerce(Assignment.next_fire_at, String()).label("next_fire_at"),
        Target.name.label("name"),
        Target.paused.label("paused"),
    ]
    if labels:
        columns.append(Target.labels.label("labels"))
    found = _with_newest(session, columns, Assignment.job_id == job_id, raw_times=True)
    no_labels: Mapping[str, str] = {}
    # positional: the columns above, then last_id, status, scheduled_for, duration_ms
    return [
        _Light(
            r[0],
            r[3],
            bool(r[1]),
            bool(r[4]),
            r[2],
            _STATE_OF[r[-3]],
            r[-2],
            r[-1],
            (r[5] or no_labels) if labels else no_labels,
        )
        for r in found
    ]


def _matches(row: _Light, wanted: set[str], labels: Mapping[str, str]) -> bool:
    if labels and not selector_matches(labels, row.labels):
        return False
    if not wanted:
        return True
    flags = {row.state, "paused" if row.paused else "active"}
    states = wanted & set(STATES)
    pause = wanted & {"paused", "active"}
    return (not states or bool(states & flags)) and (not pause or bool(pause & flags))


def _sort(rows: list[_Light], key: str, descending: bool, streaks: Mapping[int, int]) -> None:
    """Sort in place by ``key``, ties by target name. Times are compared as the database
    gave them (SQLite's text sorts as the time does), newest and longest first; a stable
    sort on the name first keeps the ties in name order either way."""
    rows.sort(key=lambda r: r.target)
    if key == "target":
        if descending:
            rows.reverse()
        return
    if key == "status":
        rows.sort(key=lambda r: STATES.index(r.state), reverse=descending)
    elif key == "last":
        rows.sort(key=lambda r: (r.last_at is not None, r.last_at or ""), reverse=not descending)
    elif key == "duration":
        rows.sort(key=lambda r: (r.last_at is not None, r.duration_ms or 0), reverse=not descending)
    elif key == "streak":
        rows.sort(key=lambda r: streaks.get(r.assignment_id, 0), reverse=not descending)
    elif key == "next":
        rows.sort(key=lambda r: (r.next_fire_at is None, r.next_fire_at or ""), reverse=descending)


def _counts(rows: Sequence[_Light]) -> JobCounts:
    by: dict[str, int] = dict.fromkeys(STATES, 0)
    for row in rows:
        by[row.state] += 1
    return JobCounts(total=len(rows), paused=sum(row.paused for row in rows), **by)


#: Ids per ``IN (...)`` list (SQLite allows 32,766 parameters; stay well below).
CHUNK = 900


def _details(session: Session, job_id: int, ids: Sequence[int]) -> dict[int, TargetRow]:
    out: dict[int, TargetRow] = {}
    for start in range(0, len(ids), CHUNK):
        for r in _summary(session, job_id, ids[start : start + CHUNK]):
            out[r.assignment_id] = _row(r)
    return out


# --- operations ---------------------------------------------------------------------------


def job_targets(app: App, actor: Actor, name: str, q: TargetQuery | None = None) -> TargetsPage:
    """The targets of job ``name``: filtered, sorted, one page, each with its strip.

    One statement reads every assignment's newest run status (counting, filtering and
    sorting need them all); the shown page (and, to sort by streak, the failing targets)
    is then read in full, and its strips in one window query."""
    q = q or TargetQuery()
    actor.authorize("run.read")
    wanted, labels, key, descending = _check_query(q)
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        if job is None:
            raise NotFound("job", name)
        rows = _states(session, job.id, labels=bool(labels))
        counts = _counts(rows)
        shown = [row for row in rows if _matches(row, wanted, labels)]
        details: dict[int, TargetRow] = {}
        if key == "streak":
            failing = [row.assignment_id for row in shown if row.state == "failed"]
            details = _details(session, job.id, failing)
        streaks = {a: row.streak for a, row in details.items()}
        _sort(shown, key, descending, streaks)
        window = [row.assignment_id for row in shown[q.offset : q.offset + q.limit]]
        missing = [a for a in window if a not in details]
        details.update(_details(session, job.id, missing))
        marks = strips(session, window, q.strip)
        items = [_with_strip(details[a], marks.get(a, ())) for a in window]
        return TargetsPage(
            job=job.name,
            origin=job.origin,
            counts=counts,
            matched=len(shown),
            limit=q.limit,
            offset=q.offset,
            sort=q.sort or "target",
            items=items,
        )


def _with_strip(row: TargetRow, marks: tuple[SlotMark, ...]) -> TargetRow:
    return TargetRow(**{**row.__dict__, "strip": marks})


def _newest_of_every(session: Session, where: ColumnElement[bool]) -> list[Any]:
    """(job_id, job name, target name, enabled, target paused, newest run id, its status)
    of every assignment matching ``where``."""
    columns = [
        Assignment.job_id.label("job_id"),
        Job.name.label("job"),
        Target.name.label("target"),
        Assignment.enabled.label("enabled"),
        Target.paused.label("target_paused"),
    ]
    return _with_newest(session, columns, where, jobs=True)


def job_counts(app: App, actor: Actor, *, origin: str | None = "bulk") -> dict[str, JobCounts]:
    """Per job (by name), how its targets stand; one statement for every job."""
    actor.authorize("run.read")
    with app.db.read() as session:
        where = Job.origin == origin if origin else true()
        tallies: dict[str, dict[str, int]] = {}
        for r in _newest_of_every(session, where):
            tally = tallies.setdefault(r.job, dict.fromkeys(("total", "paused", *STATES), 0))
            tally["total"] += 1
            tally[state_of(r.status)] += 1
            tally["paused"] += (not r.enabled) or bool(r.target_paused)
        return {job: JobCounts(**tally) for job, tally in tallies.items()}


GRID_TARGETS = 40
GRID_JOBS = 12


def fleet_grid(
    app: App, actor: Actor, *, offset: int = 0, limit: int = GRID_TARGETS, jobs: int = GRID_JOBS
) -> FleetGrid:
    """Paired targets by bulk jobs, ``limit`` targets from ``offset`` and the first
    ``jobs`` bulk jobs by name; each cell the class of the newest run there."""
    actor.authorize("run.read")
    _check_range("offset", offset, 0, 10_000_000)
    _check_range("limit", limit, 1, PAGE_MAX)
    with app.db.read() as session:
        total_targets = session.scalar(select(func.count(Target.id))) or 0
        total_jobs = session.scalar(select(func.count(Job.id)).where(Job.origin == "bulk")) or 0
        target_rows = session.execute(
            select(Target.id, Target.name).order_by(Target.name).offset(offset).limit(limit)
        ).all()
        job_rows = session.execute(
            select(Job.id, Job.name).where(Job.origin == "bulk").order_by(Job.name).limit(jobs)
        ).all()
        cells: dict[tuple[str, str], GridCell] = {}
        if target_rows and job_rows:
            where = and_(
                Assignment.target_id.in_([t.id for t in target_rows]),
                Assignment.job_id.in_([j.id for j in job_rows]),
            )
            for r in _newest_of_every(session, where):
                cells[(r.target, r.job)] = GridCell(
                    state_of(r.status), bool(r.enabled) and not r.target_paused, r.last_id
                )
        return FleetGrid(
            jobs=[j.name for j in job_rows],
            targets=[t.name for t in target_rows],
            cells=cells,
            total_targets=total_targets,
            total_jobs=total_jobs,
            offset=offset,
        )


SLOTS_DEFAULT = 20
SLOTS_MAX = 200


def job_slots(
    app: App,
    actor: Actor,
    name: str,
    *,
    limit: int = SLOTS_DEFAULT,
    before: datetime | None = None,
    run_ids: bool = False,
) -> SlotsPage:
    """The newest slots of job ``name`` (older than ``before``), each with its counts per
    status; keyset paging by slot time. ``run_ids``: also list each slot's runs."""
    actor.authorize("run.read")
    _check_range("limit", limit, 1, SLOTS_MAX)
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        if job is None:
            raise NotFound("job", name)
        found = _slot_times(session, job.id, before, limit + 1)
        more = len(found) > limit
        found = found[:limit]
        times = [at for at, _ in found]
        groups: list[SlotGroup] = []
        if times:
            # Counted from the (job_id, scheduled_for, status) index alone.
            rows = session.execute(
                select(Run.scheduled_for, type_coerce(Run.status, String()), func.count())
                .where(Run.job_id == job.id, Run.scheduled_for.in_(times))
                .group_by(Run.scheduled_for, Run.status)
            ).all()
            ids: dict[datetime, list[int]] = {}
            if run_ids:
                for at, run_id in session.execute(
                    select(Run.scheduled_for, Run.id)
                    .where(Run.job_id == job.id, Run.scheduled_for.in_(times))
                    .order_by(Run.id)
                ):
                    ids.setdefault(at, []).append(run_id)
            groups = _fold_slots(rows, found, ids)
        return SlotsPage(
            job=job.name,
            items=groups,
            limit=limit,
            next_before=times[-1] if more and times else None,
        )


def _slot_times(
    session: Session, job_id: int, before: datetime | None, n: int
) -> list[tuple[datetime, str]]:
    """The ``n`` newest distinct slot times of a job (older than ``before``), newest first,
    each with the trigger of one of its runs: a recursive walk that asks the
    (job_id, scheduled_for, status) index for the next older time at each step, so it reads
    ``n`` index entries, not the job's whole history."""
    newest = select(func.max(Run.scheduled_for).label("at"), literal(1).label("n")).where(
        Run.job_id == job_id
    )
    if before is not None:
        newest = newest.where(Run.scheduled_for < before)
    walk = newest.cte("slot_times", recursive=True)
    older = aliased(Run)
    step = select(
        select(func.max(older.scheduled_for))
        .where(older.job_id == job_id, older.scheduled_for < walk.c.at)
        .scalar_subquery(),
        walk.c.n + 1,
    ).where(walk.c.at.is_not(None), walk.c.n < n)
    walk = walk.union_all(step)
    trigger = (
        select(older.trigger)
        .where(older.job_id == job_id, older.scheduled_for == walk.c.at)
        .limit(1)
        .scalar_subquery()
    )
    found = session.execute(
        select(walk.c.at, trigger).where(walk.c.at.is_not(None)).order_by(walk.c.n)
    ).all()
    return [(at, trig) for at, trig in found if at is not None]


def _fold_slots(
    rows: Sequence[Any],
    found: Sequence[tuple[datetime, str]],
    ids: Mapping[datetime, list[int]],
) -> list[SlotGroup]:
    by: dict[datetime, dict[str, int]] = {}
    for at, status, n in rows:
        by.setdefault(at, {})[status] = n
    return [
        SlotGroup(
            scheduled_for=at,
            trigger=trigger,
            runs=sum(by.get(at, {}).values()),
            by_status=by.get(at, {}),
            run_ids=tuple(ids.get(at, ())),
        )
        for at, trigger in found
    ]


# --- selections ---------------------------------------------------------------------------


def select_assignments(session: Session, job: Job, selection: Selection) -> list[Assignment]:
    """The assignments of ``job`` a selection names; raises InvalidInput (naming the part
    of the selection) when it matches nothing, NotFound for a target the job lacks."""
    chosen = list(job.assignments)
    if selection.targets:
        by_name = {a.target.name: a for a in job.assignments}
        missing = [t for t in selection.targets if t not in by_name]
        if missing:
            raise NotFound(f"assignment of job {job.name} on target", ", ".join(missing))
        chosen = [by_name[t] for t in dict.fromkeys(selection.targets)]
    else:
        chosen = [a for a in chosen if a.enabled]
    if selection.selector:
        wanted = parse_selector(selection.selector)
        chosen = [a for a in chosen if selector_matches(wanted, a.target.labels)]
        if not chosen:
            raise InvalidInput(
                f"selector: no target of job {job.name} matches {format_selector(wanted)}"
                f"{'' if selection.targets else ' where the job is enabled'}; nothing queued",
                field="selector",
                value=selection.selector,
                allowed="a selector matching at least one of the job's targets",
            )
    if selection.failed and chosen:
        ids = [a.id for a in chosen]
        newest: dict[int, str | None] = {}
        for start in range(0, len(ids), CHUNK):
            where = Assignment.id.in_(ids[start : start + CHUNK])
            found = _with_newest(session, [Assignment.id.label("assignment_id")], where)
            newest.update((r.assignment_id, r.status) for r in found)
        chosen = [a for a in chosen if newest.get(a.id) in RERUN_STATUSES]
        if not chosen:
            raise InvalidInput(
                f"failed: no selected target of job {job.name} has a failed newest run "
                "(a target whose re-run is queued or running is not selected again); "
                "nothing queued",
                field="failed",
                value="true",
                allowed="a job with at least one target whose newest run did not succeed",
            )
    chosen.sort(key=lambda a: a.target.name)
    return chosen


def set_enabled_on(app: App, actor: Actor, name: str, targets: Sequence[str], enabled: bool) -> int:
    """Pause (``enabled=False``) or resume job ``name`` on the named targets; returns how
    many changed. Each change is the jobs service's own (audited per target, with its
    rules for the next fire); every name is checked before any change is made."""
    actor.authorize("job.enable" if enabled else "job.disable")
    if not targets:
        raise InvalidInput(
            "targets: select at least one target",
            field="targets",
            value="",
            allowed="one or more of the job's targets",
        )
    view = jobs_svc.show_job(app, actor, name)
    have = {a.target: a.enabled for a in view.assignments}
    missing = [t for t in targets if t not in have]
    if missing:
        raise NotFound(f"assignment of job {name} on target", ", ".join(missing))
    changed = 0
    for target in dict.fromkeys(targets):
        if have[target] != enabled:
            jobs_svc.set_enabled(app, actor, name, enabled, target=target)
            changed += 1
    return changed


__all__ = [
    "SORTS",
    "STATES",
    "STATUS_FILTERS",
    "FleetGrid",
    "JobCounts",
    "JobHeader",
    "LastResult",
    "Selection",
    "SlotGroup",
    "SlotMark",
    "SlotsPage",
    "TargetQuery",
    "TargetRow",
    "TargetsPage",
    "fleet_grid",
    "job_counts",
    "job_header",
    "job_slots",
    "job_targets",
    "select_assignments",
    "set_enabled_on",
    "state_of",
]
