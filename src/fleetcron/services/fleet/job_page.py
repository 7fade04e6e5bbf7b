"""One job across all its targets: the job page's header and rows (filtered, sorted, one
page, each with its status strip). Beside it: the per-job counts and the fleet grid
(:mod:`~fleetcron.services.fleet.grid`), the slots of a job
(:mod:`~fleetcron.services.jobs.slots`), which targets a targeted run or a bulk pause
selects (:mod:`~fleetcron.services.jobs.selection`), and the statements they share
(:mod:`~fleetcron.services.fleet.states`).

Everything here is read in a few set-based statements, never one per target: the state of
every assignment comes from one statement: the newest run is named on the assignment
(``store/run_newest.py``), and correlated subqueries seek the runs' ``(assignment_id,
scheduled_for, attempt)`` unique index for the newest success and the failures since it, so
the cost grows with the job's targets, not with its history. Filtering and sorting then run
over those rows in memory (5,000 small tuples); the status strips are read with one window
query for the shown page only.

The words: a target's *state* is the class of its newest run of the job (``ok`` — it
succeeded, ``failed`` — one of :data:`fleetcron.core.statuses.FAILED`, ``running``,
``waiting`` — pending its turn in a rollout, ``skipped``, ``missed``, or ``never``; a
queued "run now" counts once the scheduler starts it); *paused* is separate (the job is
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

from sqlalchemy import String, case, func, select, type_coerce
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.bounded import Bounded
from fleetcron.core.labels import format_selector, parse_labels, selector_matches
from fleetcron.core.status_display import STATE_OF, STATES, State, state_of
from fleetcron.core.statuses import RunStatus
from fleetcron.core.validation import validate_int
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.fleet.states import (
    CHUNK,
    OFFSET_MAX,
    PAGE_MAX,
    JobCounts,
    with_newest,
)
from fleetcron.services.health.failure_streak import counted, failure_streak, newest_success
from fleetcron.services.projects.scope import place
from fleetcron.store.planner import materialized
from fleetcron.store.schema import Assignment, Job, Run, Target

#: What the status filter accepts: a state, or ``paused`` / ``active`` (not paused).
STATUS_FILTERS: tuple[str, ...] = (*STATES, "paused", "active")
#: Sort keys (``-`` in front reverses): target name, state (worst first), newest run
#: (newest first), duration (longest first), failure streak (longest first), next fire.
SORTS: tuple[str, ...] = ("target", "status", "last", "duration", "streak", "next")
STRIP_DEFAULT = 20
STRIP_MAX = 100


# --- result types -------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotMark:
    """One cell of a target's status strip: a run of the job there."""

    run_id: int
    status: str
    scheduled_for: datetime

    @property
    def state(self) -> State:
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
    state: State
    last: LastResult | None
    streak: int
    """Failed runs since the newest success, counted up to ``STREAK_COUNTED``."""
    streak_since: datetime | None
    strip: tuple[SlotMark, ...] = ()
    timezone: str | None = None
    """The target's own zone (None: not set); its next fire is shown in it."""
    timezone_source: str | None = None
    """Who set the zone: ``detected``, ``operator``, or ``None`` (no zone: the default)."""
    streak_more: bool = False
    """The streak is longer than ``streak`` (which is then ``STREAK_COUNTED``)."""

    @property
    def streak_text(self) -> str:
        """``12`` or ``100+``; empty without a streak."""
        return Bounded(self.streak, self.streak_more).short if self.streak else ""

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
class JobHeader:
    """What the job page shows above its targets (one row read; no assignments)."""

    name: str
    origin: str
    schedule: str
    timezone: str
    command: str
    notes: str
    selector: str
    #: The job's start window: its spread (each target at its own offset in it) and its
    #: jitter (added to that offset); 0 and 0: none (``core.start_window.window_words``).
    spread_s: int = 0
    jitter_s: int = 0
    #: The rollout options as stored ("" when not set; core/rollout.py reads them).
    canary: str = ""
    batch: str = ""
    batch_pause_s: int = 0
    max_failures: str = ""


def job_header(app: App, actor: Actor, name: str) -> JobHeader:
    actor.authorize_in("job.read")
    with app.db.read() as session:
        job = session.scalar(
            select(Job).where(Job.name == name, Job.project_id == place(session, actor))
        )
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
            jitter_s=job.jitter_s,
            canary=job.canary or "",
            batch=job.batch or "",
            batch_pause_s=job.batch_pause_s or 0,
            max_failures=job.max_failures or "",
        )


# --- the statements -----------------------------------------------------------------------


def _summary(session: Session, job_id: int, assignment_ids: Sequence[int]) -> list[Any]:
    """The named assignments of the job with their target, newest run and failure streak
    (the page's rows, or the failing ones when sorting by streak)."""
    base = materialized(
        select(
            Assignment.id.label("assignment_id"),
            Assignment.enabled,
            Assignment.next_fire_at,
            Target.name.label("target"),
            Target.labels,
            Target.paused.label("target_paused"),
            Target.timezone.label("timezone"),
            Target.timezone_source.label("timezone_source"),
            Assignment.newest_run_id.label("last_id"),
            newest_success(Assignment.id).label("last_ok"),
        )
        .join(Target, Target.id == Assignment.target_id)
        .where(Assignment.job_id == job_id, Assignment.id.in_(assignment_ids))
        .cte("summary")
    )
    streak = failure_streak(base.c.assignment_id, base.c.last_ok, since="slot")
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
        case((is_failing, streak.failures), else_=0).label("streak"),
        case((is_failing, streak.since), else_=None).label("streak_since"),
    ).outerjoin(Run, Run.id == base.c.last_id)
    return list(session.execute(query).all())


def _row(r: Any) -> TargetRow:
    streak = counted(r.streak)
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
        streak=streak.n,
        streak_since=r.streak_since,
        streak_more=streak.more,
        timezone=r.timezone,
        timezone_source=r.timezone_source if r.timezone else None,
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
    validate_int(q.limit, field="limit", low=1, high=PAGE_MAX)
    validate_int(q.offset, field="offset", low=0, high=OFFSET_MAX)
    validate_int(q.strip, field="strip", low=0, high=STRIP_MAX)
    return wanted, labels, key.lstrip("-"), descending


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
    state: State
    last_at: Any
    duration_ms: int | None
    labels: Mapping[str, str]

    @property
    def paused(self) -> bool:
        return not self.enabled or self.target_paused


def _states(session: Session, job_id: int, *, labels: bool, times: bool) -> list[_Light]:
    """Every assignment of the job with the status of its newest run (the target's labels
    only when a filter needs them; the run's slot and duration only when the sort does)."""
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
    found = with_newest(session, columns, Assignment.job_id == job_id, times=times, raw_times=True)
    no_labels: Mapping[str, str] = {}
    # positional: the columns above, then last_id, status, scheduled_for, duration_ms
    return [
        _Light(
            r[0],
            r[3],
            bool(r[1]),
            bool(r[4]),
            r[2],
            STATE_OF[r[-3]],
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
    actor.authorize_in("run.read")
    wanted, labels, key, descending = _check_query(q)
    with app.db.read() as session:
        job = session.scalar(
            select(Job).where(Job.name == name, Job.project_id == place(session, actor))
        )
        if job is None:
            raise NotFound("job", name)
        rows = _states(session, job.id, labels=bool(labels), times=key in ("last", "duration"))
        counts = _counts(rows)
        shown = [row for row in rows if _matches(row, wanted, labels)]
        details: dict[int, TargetRow] = {}
        if key == "streak":
            failing = [row.assignment_id for row in shown if row.state == "failed"]
            details = _details(session, job.id, failing)
        # A streak counted as "more than 100" sorts after one of exactly 100.
        streaks = {a: row.streak + row.streak_more for a, row in details.items()}
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


__all__ = [
    "SORTS",
    "STATUS_FILTERS",
    "JobHeader",
    "LastResult",
    "SlotMark",
    "TargetQuery",
    "TargetRow",
    "TargetsPage",
    "job_header",
    "job_targets",
]
