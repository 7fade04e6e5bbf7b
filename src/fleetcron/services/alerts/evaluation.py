"""Alert evaluation: what changed, what each assignment's alert state becomes, and which
deliveries to queue.

:func:`evaluate_alerts` reads what changed — runs that finished recently with a verdict,
slots still undecided past the misfire grace (through the indexed ``next_fire_at``), runs
still ``running`` past their deadline — asks :func:`fleetcron.core.alerts.decide` about each
assignment concerned, stores its new alert state and queues one delivery per matching
channel, all in one transaction. Safe on every node at once: on PostgreSQL an advisory lock
lets one node evaluate per round. Sending is :mod:`fleetcron.services.alerts.deliveries`.

A round is incremental: its cost follows what changed, not how long an outage has lasted.
A state depends only on the runs after its last change, and a run can change it only when
its verdict differs from it (a failure cannot change "failing", a missed slot cannot change
"late", a success cannot change "ok"). So the database is asked, per assignment, for the
first run after its last change that may differ from its stored state (one aggregate row
per assignment with a verdict in the window, :func:`_first_verdicts` and
:func:`_first_successes`), and only the runs from that one on are loaded and replayed
(:func:`_runs_to_replay`); everything before it leaves the state as it is, so the decisions
are those of replaying the whole window. While 500 targets keep failing, a round reads 500
aggregate rows and no run, where it used to load each failure of the 15-minute window again
with its stderr (tests/integration/notify/test_evaluation_reads.py counts them)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import Row, case, delete, func, literal, or_, select, update
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.core.alerts import (
    ALERT_STATES,
    FAILURE_STATUSES,
    LATE_STATUSES,
    Alert,
    AlertStateName,
    Change,
    Outcome,
    RunFacts,
    classify_run,
    late_slot_reason,
    replay,
    run_reason,
    stderr_excerpt,
    stuck_run_reason,
)
from fleetcron.core.incidents import Cause
from fleetcron.core.rollout import ROLLOUT_FAILURES
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.services.alerts import incidents
from fleetcron.store.schema import (
    AlertState,
    Assignment,
    Job,
    Run,
    Target,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Runs that finished longer ago than this before an evaluation are not read by it. It is
#: many intervals long, so a slow or skipped round loses nothing; a node that was down
#: longer finished no runs meanwhile (the ones it left running are closed at its restart).
EVALUATION_WINDOW = timedelta(minutes=15)
_IN_CHUNK = 500
# Key of the PostgreSQL advisory lock that lets one node at a time evaluate ("fcnt").
_EVALUATION_LOCK = 0x66636E74
_VERDICT_STATUSES = sorted({*FAILURE_STATUSES, *LATE_STATUSES})


@dataclass(frozen=True)
class _Subject:
    """An assignment whose alert state may change, with the names its message shows."""

    id: int
    job_id: int
    job_name: str
    target_id: int
    target_name: str
    retries: int
    retry_on: tuple[str, ...]


@dataclass(frozen=True)
class _RunRow:
    id: int
    assignment_id: int
    status: str
    reason: str | None
    skip_kind: str | None
    attempt: int
    exit_code: int | None
    error: str | None
    scheduled_for: datetime
    finished_at: datetime | None
    deadline_at: datetime | None
    stderr_head: str = ""

    def facts(self) -> RunFacts:
        return RunFacts(
            id=self.id,
            status=self.status,
            attempt=self.attempt,
            scheduled_for=self.scheduled_for,
            exit_code=self.exit_code,
            finished_at=self.finished_at,
            deadline_at=self.deadline_at,
            error=self.error,
            reason=self.reason,
            stderr=stderr_excerpt(self.stderr_head),
        )


_RUN_COLUMNS = (
    Run.id,
    Run.assignment_id,
    Run.status,
    Run.reason,
    Run.skip_kind,
    Run.attempt,
    Run.exit_code,
    Run.error,
    Run.scheduled_for,
    Run.finished_at,
    Run.deadline_at,
)


def evaluate_alerts(app: App, now: datetime, *, window: timedelta = EVALUATION_WINDOW) -> int:
    """Decide the alert state of every assignment something happened to, and queue a
    delivery per matching channel for each state that changed; returns how many were
    queued. One transaction; when another node is evaluating (PostgreSQL) it returns 0."""
    grace = timedelta(seconds=app.settings.misfire_grace_s)
    with app.db.session() as session:
        if not _evaluation_lock(session):
            return 0
        queued = _evaluate(session, now, grace, now - window)
    if queued:
        log.info(
            "notify: %d message(s) queued",
            queued,
            extra={"action": "notify.queued", "count": queued},
        )
    return queued


def _evaluation_lock(session: Session) -> bool:
    # Evaluation reads alert states and then writes them: two nodes doing it at once would
    # both see "ok" and both queue the same failure. SQLite's BEGIN IMMEDIATE already holds
    # the single writer lock; PostgreSQL takes a transaction-scoped advisory lock, and a
    # node that does not get it leaves this round to the one that did.
    if session.get_bind().dialect.name != "postgresql":
        return True
    return bool(session.scalar(select(func.pg_try_advisory_xact_lock(_EVALUATION_LOCK))))


def _evaluate(session: Session, now: datetime, grace: timedelta, since: datetime) -> int:
    # The rules are read once: nothing in the round writes them.
    rules = incidents.routes(session)
    # Halts first: their incident's previous state is the stored one before this round.
    _rollout_halts(session, now, since)
    _evaluate_assignments(session, _Round(now, grace, since, rules))
    incidents.release_held(session, rules)
    incidents.recover_halted(session)
    return incidents.queue_messages(session, now, rules)


@dataclass(frozen=True)
class _Observed:
    """What a round reads of what changed: the assignments with a run of a verdict other
    than success finished in the window (``flagged``), the runs that may change a state
    (``runs``: see :func:`_runs_to_replay`), slots undecided past the grace, runs running
    past their deadline, and the assignments whose stored state is not ``ok``."""

    flagged: set[int]
    runs: list[_RunRow]
    overdue: dict[int, datetime]
    stuck: dict[int, _RunRow]
    unsettled: set[int]

    def concerned(self) -> set[int]:
        """The assignments whose alert state may change this round, or whose stored
        state is to be dropped once their job or target is gone."""
        return self.flagged | set(self.overdue) | set(self.stuck) | self.unsettled

    def moving(self) -> set[int]:
        """The assignments with a run to replay or overdue now: the only ones whose state
        can change this round (replaying nothing changes nothing)."""
        return {r.assignment_id for r in self.runs} | set(self.overdue) | set(self.stuck)


@dataclass(frozen=True)
class _Round:
    """One round before it reads anything: its moment, the misfire grace, the window's
    start and the notification rules (read once per round)."""

    now: datetime
    grace: timedelta
    since: datetime
    rules: Sequence[incidents.Route]


@dataclass(frozen=True)
class _Context:
    """One round: its moment, the misfire grace, the window's start, what it observed."""

    now: datetime
    grace: timedelta
    since: datetime
    seen: _Observed


def _observe(session: Session, now: datetime, grace: timedelta, since: datetime) -> _Observed:
    firsts = _first_verdicts(session, since)
    unsettled = set(
        session.scalars(select(AlertState.assignment_id).where(AlertState.state != "ok"))
    )
    starts = {aid: first for aid, first in firsts.items() if first is not None}
    for aid, first in _first_successes(session, unsettled, since).items():
        starts[aid] = min(first, starts.get(aid, first))
    runs = _runs_to_replay(session, starts, since)
    overdue, stuck = _overdue(session, now, grace)
    return _Observed(set(firsts), runs, overdue, stuck, unsettled)


def _overdue(
    session: Session, now: datetime, grace: timedelta
) -> tuple[dict[int, datetime], dict[int, _RunRow]]:
    """The slots the scheduler has not decided within the grace (ix_assignments_due), and
    the runs still running past their deadline, by assignment."""
    overdue: dict[int, datetime] = {
        aid: next_fire
        for aid, next_fire in session.execute(
            select(Assignment.id, Assignment.next_fire_at).where(
                Assignment.enabled.is_(True), Assignment.next_fire_at < now - grace
            )
        )
        if next_fire is not None
    }
    stuck: dict[int, _RunRow] = {}
    for row in session.execute(
        select(*_RUN_COLUMNS).where(Run.status == RunStatus.RUNNING, Run.deadline_at < now)
    ):
        run = _run_row(row)
        stuck.setdefault(run.assignment_id, run)
    return overdue, stuck


_FLAGGED = or_(
    Run.status.in_(_VERDICT_STATUSES),
    (Run.status == RunStatus.SKIPPED) & (Run.skip_kind == SkipKind.OWNERSHIP_UNCERTAIN),
)
# The stored state as a round reads it: a value it does not know counts as "ok".
_STORED = case((AlertState.state.in_(("failing", "late")), AlertState.state), else_=literal("ok"))
# After the assignment's last change (runs up to it were judged by an earlier round).
_AFTER_CHANGE = or_(AlertState.changed_at.is_(None), Run.finished_at > AlertState.changed_at)


def _first_verdicts(session: Session, since: datetime) -> dict[int, datetime | None]:
    """Every assignment with a run of a verdict other than success finished in the window
    (ix_runs_status), and when the first of them that may change its stored state finished
    after its last change (None: none may). A failure cannot change "failing", a missed
    slot cannot change "late": a round in which an outage goes on reads one row per
    assignment, however many of its failures the window holds."""
    differs = case(
        (Run.status.in_(FAILURE_STATUSES), _STORED != "failing"), else_=_STORED != "late"
    )
    query = (
        select(Run.assignment_id, func.min(case((differs & _AFTER_CHANGE, Run.finished_at))))
        .outerjoin(AlertState, AlertState.assignment_id == Run.assignment_id)
        .where(Run.finished_at > since, _FLAGGED)
        .group_by(Run.assignment_id)
    )
    return {aid: first for aid, first in session.execute(query)}


def _first_successes(session: Session, ids: Iterable[int], since: datetime) -> dict[int, datetime]:
    """For the assignments stored "failing" or "late" among ``ids``, when their first
    success after their last change finished (the unique index on runs starts with
    ``assignment_id``): a success changes nothing where the state is "ok"."""
    found: dict[int, datetime] = {}
    for chunk in _chunks(sorted(ids)):
        query = (
            select(Run.assignment_id, func.min(Run.finished_at))
            .join(AlertState, AlertState.assignment_id == Run.assignment_id)
            .where(
                Run.assignment_id.in_(chunk),
                Run.status == RunStatus.SUCCEEDED,
                Run.finished_at > since,
                AlertState.state.in_(("failing", "late")),
                _AFTER_CHANGE,
            )
            .group_by(Run.assignment_id)
        )
        found.update({aid: first for aid, first in session.execute(query) if first is not None})
    return found


def _runs_to_replay(
    session: Session, starts: dict[int, datetime], since: datetime
) -> list[_RunRow]:
    """The runs with a verdict of each assignment in ``starts``, from the first that may
    change its stored state on. Every run before that one leaves the state as it is, so
    replaying from there decides exactly what replaying the whole window would; the
    stderr is read for the runs that are not successes (their messages show it)."""
    stderr = case((Run.status == RunStatus.SUCCEEDED, literal("")), else_=Run.stderr_head)
    found: list[_RunRow] = []
    for chunk in _chunks(sorted(starts)):
        query = select(*_RUN_COLUMNS, stderr.label("stderr_head")).where(
            Run.assignment_id.in_(chunk),
            Run.finished_at > since,
            Run.finished_at >= min(starts[aid] for aid in chunk),
            or_(_FLAGGED, Run.status == RunStatus.SUCCEEDED),
        )
        found.extend(
            _run_row(row, stderr=row.stderr_head)
            for row in session.execute(query)
            if row.finished_at >= starts[row.assignment_id]
        )
    return found


def _evaluate_assignments(session: Session, round_: _Round) -> int:
    now, grace, since = round_.now, round_.grace, round_.since
    seen = _observe(session, now, grace, since)
    concerned = seen.concerned()
    if not concerned:
        return 0

    # Only an assignment with a run to replay, or overdue now, can change this round; the
    # others are only checked to be still there.
    moving = concerned & seen.moving()
    subjects = _subjects(session, moving)
    gone = concerned - set(subjects) - _existing(session, concerned - moving)
    for chunk in _chunks(sorted(gone)):
        # The job or target was removed: nothing left to alert about.
        session.execute(delete(AlertState).where(AlertState.assignment_id.in_(chunk)))
    states = _states(session, subjects)
    runs: dict[int, list[_RunRow]] = defaultdict(list)
    for run in seen.runs:
        runs[run.assignment_id].append(run)

    context = _Context(now, grace, since, seen)
    recorded: list[incidents.StateChange] = []
    for aid in sorted(subjects):
        found, state, changed = _subject_changes(
            context, subjects[aid], states.get(aid), runs.get(aid, ())
        )
        if state is not None:
            recorded.extend(found)
            _save_state(session, aid, state, changed, exists=aid in states)
    # Oldest first, so a target that failed and recovered within the window ends up
    # recovered, and incidents open in the order their first target failed.
    recorded.sort(key=lambda c: (c.at, c.member.assignment_id))
    incidents.record_changes(session, recorded, rules=round_.rules)
    return len(recorded)


def _subject_changes(
    context: _Context,
    subject: _Subject,
    stored: tuple[AlertStateName, datetime] | None,
    runs: Iterable[_RunRow],
) -> tuple[list[incidents.StateChange], AlertStateName | None, datetime]:
    """One assignment's changes of alert state this round (each logged), its new state
    (None: unchanged) and when it last changed."""
    previous: AlertStateName = "ok"
    changed_at: datetime | None = None
    if stored is not None:
        previous, changed_at = stored
    # Runs finished before the last change were judged by an earlier evaluation.
    cutoff = max(context.since, changed_at) if changed_at is not None else context.since
    verdicts = _verdicts(runs, subject, cutoff)
    seen = context.seen
    _, changes = replay(
        previous,
        [outcome for _, outcome in verdicts],
        overdue=subject.id in seen.overdue or subject.id in seen.stuck,
    )
    found: list[incidents.StateChange] = []
    changed = context.now
    for change in changes:
        changed, alert, cause = _what_changed(context, subject, change, verdicts)
        _log_change(alert)
        member = incidents.Member(
            subject.id, subject.job_id, subject.job_name, subject.target_id, subject.target_name
        )
        found.append(
            incidents.StateChange(
                member,
                cause,
                changed,
                previous_state=alert.previous_state,
                reason=alert.reason,
                run_id=alert.run.id if alert.run else None,
            )
        )
    return found, (changes[-1].decision.state if changes else None), changed


def _what_changed(
    context: _Context,
    subject: _Subject,
    change: Change,
    verdicts: Sequence[tuple[_RunRow, Outcome]],
) -> tuple[datetime, Alert, Cause | None]:
    """When a change happened, its alert, and the incident cause it joins (None: it
    recovered): from the run behind it, or from the assignment being overdue now."""
    seen = context.seen
    if change.cause is None:
        alert = _overdue_alert(
            change,
            subject,
            context.now,
            seen.overdue.get(subject.id),
            seen.stuck.get(subject.id),
            context.grace,
        )
        return context.now, alert, "stuck" if subject.id in seen.stuck else "late"
    run, outcome = verdicts[change.cause]
    assert run.finished_at is not None
    return run.finished_at, _run_alert(change, subject, context.now, run), _CAUSE_OF[outcome]


_CAUSE_OF: dict[Outcome, Cause | None] = {"failure": "failing", "late": "late", "success": None}


def _rollout_halts(session: Session, now: datetime, since: datetime) -> int:
    """The targets of every rolled-out slot halted in the window (a canary failed, or
    ``max_failures`` was reached; ``core/rollout.py``) join their job's ``halted``
    incident, whose first message names the threshold and the failure that reached it.
    Its previous state is the stored alert state of that failure's target. Returns how
    many halts were new. The skipped targets of every slot are read in one statement, and
    a halt recorded by an earlier round is told from the job's incident
    (:class:`~fleetcron.services.alerts.incidents.HaltsSeen`) without reading its slot."""
    slots = _halted_slots(session, since)
    members = _halted_members(session, slots)
    seen = incidents.HaltsSeen(session)
    recorded = 0
    for job_id, slot, reason, skipped, halted_at, first_skipped in slots:
        halt = _Halt(job_id, slot, reason, skipped, halted_at or now, first_skipped)
        if seen.recorded(job_id, halt.at, members.get((job_id, slot), [])):
            continue
        seen.forget(job_id)
        recorded += _record_halt(session, halt, members.get((job_id, slot), []))
    return recorded


@dataclass(frozen=True)
class _Halt:
    """One halted slot: its job, its time, a skip reason, how many runs were skipped,
    when, and the first skipped run's id."""

    job_id: int
    slot: datetime
    reason: str | None
    skipped: int
    at: datetime
    first_skipped: int


def _record_halt(session: Session, halt: _Halt, members: Sequence[incidents.Member]) -> int:
    """Record one halt (1: it was new, else 0)."""
    cause = _halt_cause(session, halt.job_id, halt.slot, halt.first_skipped)
    if cause is None:
        return 0
    stored = session.scalar(
        select(AlertState.state).where(AlertState.assignment_id == cause.assignment_id)
    )
    if not incidents.record_halt(
        session,
        halt.job_id,
        cause.job_name,
        halt.at,
        members,
        previous_state=stored if stored in ALERT_STATES else "ok",
        reason=f"{halt.reason}; {halt.skipped} target(s) of the slot were skipped",
        run_id=None if cause.status == RunStatus.SKIPPED else cause.id,
    ):
        return 0
    log.info(
        "notify: rollout of %s at %s halted, %d target(s) skipped",
        cause.job_name,
        halt.slot.isoformat(),
        halt.skipped,
        extra={"action": "alert.rollout_halted", "job": cause.job_name, "run_id": cause.id},
    )
    return 1


def _halted_slots(
    session: Session, since: datetime
) -> Sequence[Row[int, datetime, str | None, int, datetime | None, int]]:
    """One row per slot whose rollout halted after ``since``, oldest halt first: job id,
    slot, a skip reason, how many runs were skipped, when and the first skipped run's id."""
    return session.execute(
        select(
            Run.job_id,
            Run.scheduled_for,
            func.min(Run.reason),
            func.count(),
            func.min(Run.finished_at),
            func.min(Run.id),
        )
        .where(
            Run.status == RunStatus.SKIPPED,
            Run.skip_kind == SkipKind.ROLLOUT_HALTED,
            Run.finished_at > since,
        )
        .group_by(Run.job_id, Run.scheduled_for)
        .order_by(func.min(Run.finished_at))
    ).all()


def _halt_cause(session: Session, job_id: int, slot: datetime, first_skipped: int) -> Any:
    """The run that halted a slot's rollout: its newest failure, or (none found) its
    first skipped run."""
    return session.execute(
        select(*_RUN_COLUMNS, Run.target_id, Run.target_name, Run.job_name)
        .where(
            Run.job_id == job_id,
            Run.scheduled_for == slot,
            or_(Run.status.in_(ROLLOUT_FAILURES), Run.id == first_skipped),
        )
        .order_by(Run.status == RunStatus.SKIPPED, Run.finished_at.desc(), Run.id.desc())
        .limit(1)
    ).first()


def _halted_members(
    session: Session, slots: Sequence[Row[int, datetime, str | None, int, datetime | None, int]]
) -> dict[tuple[int, datetime], list[incidents.Member]]:
    """The targets a halted rollout skipped, by job and slot, for all ``slots`` at once
    (ix_runs_job_slot: the jobs' slots from the oldest on, the others left out here)."""
    wanted = {(job_id, slot) for job_id, slot, *_ in slots}
    found: dict[tuple[int, datetime], list[incidents.Member]] = defaultdict(list)
    if not wanted:
        return found
    query = (
        select(
            Run.job_id,
            Run.scheduled_for,
            Run.assignment_id,
            Run.job_name,
            Run.target_id,
            Run.target_name,
        )
        .where(
            Run.job_id.in_(sorted({job_id for job_id, _ in wanted})),
            Run.scheduled_for >= min(slot for _, slot in wanted),
            Run.status == RunStatus.SKIPPED,
            Run.skip_kind == SkipKind.ROLLOUT_HALTED,
        )
        .order_by(Run.id)
    )
    for job_id, slot, aid, job_name, tid, tname in session.execute(query):
        if (job_id, slot) in wanted:
            found[(job_id, slot)].append(incidents.Member(aid, job_id, job_name, tid, tname))
    return found


def _states(session: Session, ids: Iterable[int]) -> dict[int, tuple[AlertStateName, datetime]]:
    states: dict[int, tuple[AlertStateName, datetime]] = {}
    for chunk in _chunks(sorted(ids)):
        for row in session.scalars(select(AlertState).where(AlertState.assignment_id.in_(chunk))):
            known = row.state if row.state in ALERT_STATES else "ok"
            states[row.assignment_id] = (cast(AlertStateName, known), row.changed_at)
    return states


def _run_alert(change: Change, subject: _Subject, now: datetime, run: _RunRow) -> Alert:
    assert change.decision.event is not None
    facts = run.facts()
    return _alert(
        change,
        subject,
        now,
        slot=run.scheduled_for,
        reason=run_reason(change.decision.event, facts, change.previous),
        run=facts,
    )


def _overdue_alert(
    change: Change,
    subject: _Subject,
    now: datetime,
    slot: datetime | None,
    stuck: _RunRow | None,
    grace: timedelta,
) -> Alert:
    if stuck is not None and stuck.deadline_at is not None:
        reason = stuck_run_reason(stuck.id, stuck.deadline_at)
        return _alert(
            change, subject, now, slot=stuck.scheduled_for, reason=reason, run=stuck.facts()
        )
    assert slot is not None
    return _alert(change, subject, now, slot=slot, reason=late_slot_reason(slot, grace), run=None)


def _alert(
    change: Change,
    subject: _Subject,
    now: datetime,
    *,
    slot: datetime,
    reason: str,
    run: RunFacts | None,
) -> Alert:
    assert change.decision.event is not None
    return Alert(
        event=change.decision.event,
        state=change.decision.state,
        previous_state=change.previous,
        at=now,
        assignment_id=subject.id,
        job_id=subject.job_id,
        job_name=subject.job_name,
        target_id=subject.target_id,
        target_name=subject.target_name,
        slot=slot,
        reason=reason,
        run=run,
    )


def _log_change(alert: Alert) -> None:
    log.info(
        "notify: %s %s on %s (%s -> %s)",
        alert.event,
        alert.job_name,
        alert.target_name,
        alert.previous_state,
        alert.state,
        extra={
            "action": f"alert.{alert.event}",
            "job": alert.job_name,
            "target": alert.target_name,
            "run_id": alert.run.id if alert.run else None,
        },
    )


def _run_row(row: Any, *, stderr: str | None = None) -> _RunRow:
    return _RunRow(
        id=row.id,
        assignment_id=row.assignment_id,
        status=row.status,
        reason=row.reason,
        skip_kind=row.skip_kind,
        attempt=row.attempt,
        exit_code=row.exit_code,
        error=row.error,
        scheduled_for=row.scheduled_for,
        finished_at=row.finished_at,
        deadline_at=row.deadline_at,
        stderr_head=stderr or "",
    )


def _subjects(session: Session, ids: Iterable[int]) -> dict[int, _Subject]:
    found: dict[int, _Subject] = {}
    for chunk in _chunks(sorted(ids)):
        for row in session.execute(
            select(
                Assignment.id,
                Job.id,
                Job.name,
                Target.id,
                Target.name,
                Job.retries,
                Job.retry_on,
            )
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Assignment.id.in_(chunk))
        ):
            aid, job_id, job_name, target_id, target_name, retries, retry_on = row
            found[aid] = _Subject(
                aid, job_id, job_name, target_id, target_name, retries, tuple(retry_on or ())
            )
    return found


def _existing(session: Session, ids: Iterable[int]) -> set[int]:
    """The assignments among ``ids`` whose job and target are still there (the join of
    :func:`_subjects`, without its columns)."""
    found: set[int] = set()
    for chunk in _chunks(sorted(ids)):
        found.update(
            session.scalars(
                select(Assignment.id)
                .join(Job, Job.id == Assignment.job_id)
                .join(Target, Target.id == Assignment.target_id)
                .where(Assignment.id.in_(chunk))
            )
        )
    return found


def _verdicts(
    runs: Iterable[_RunRow], subject: _Subject, cutoff: datetime
) -> list[tuple[_RunRow, Outcome]]:
    """Runs finished after ``cutoff`` that say something, oldest first."""
    found: list[tuple[_RunRow, Outcome]] = []
    for run in runs:
        if run.finished_at is None or run.finished_at <= cutoff:
            continue
        verdict = classify_run(
            run.status,
            run.reason,
            attempt=run.attempt,
            retries=subject.retries,
            retry_on=subject.retry_on,
            skip_kind=run.skip_kind or "",  # the column, never the reason
        )
        if verdict is not None:
            found.append((run, verdict))
    return sorted(found, key=lambda pair: (pair[0].finished_at, pair[0].id))


def _save_state(
    session: Session, aid: int, state: AlertStateName, changed_at: datetime, *, exists: bool
) -> None:
    if exists:
        session.execute(
            update(AlertState)
            .where(AlertState.assignment_id == aid)
            .values(state=state, changed_at=changed_at)
        )
    else:
        session.add(AlertState(assignment_id=aid, state=state, changed_at=changed_at))


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start : start + _IN_CHUNK]


__all__ = ["EVALUATION_WINDOW", "evaluate_alerts"]
