"""Incidents in the store: which targets share a cause on a job, and which messages are due.

Evaluation (:mod:`fleetcron.services.alerts.evaluation`) learns each assignment's changes of
alert state and hands them here in its transaction: :func:`record_change` puts the target
into the open incident of its job and cause (opening one if needed) or marks it
recovered, and resolves an incident whose last target recovered; :func:`record_halt` does
the same for the targets a halted rollout skipped. :func:`queue_messages` then asks
:func:`fleetcron.core.incidents.next_message` about every open (or just resolved) incident
and every channel whose rules want it, and queues the deliveries. Nothing here reads the
clock: ``now`` is the evaluation's.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from fleetcron.core import incidents as core
from fleetcron.core.alerts import FAILURE_STATUSES, LATE_STATUSES, stderr_excerpt
from fleetcron.core.incidents import Cause, IncidentMessage, TargetLine, Thresholds, Timers
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.services.alerts import thresholds
from fleetcron.services.alerts.host_incidents import (
    behind_down,
    flap_key,
    host_mutes,
    sync_host_incidents,
)
from fleetcron.services.health.silenced import active_silences, target_labels
from fleetcron.store.schema import (
    DEFAULT_PROJECT_ID,
    Incident,
    IncidentNotice,
    IncidentTarget,
    Job,
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
    Run,
)

log = logging.getLogger(__name__)

#: A resolved incident is looked at for messages this long after it resolved (a channel
#: disabled meanwhile, or a silence in force, hears nothing of it).
RESOLVED_LOOKBACK = timedelta(hours=1)
#: The alert-state word an incident of each cause stands for.
STATE_OF: dict[str, str] = {
    "failing": "failing",
    "late": "late",
    "stuck": "late",
    "halted": "failing",
    "unreachable": "unreachable",
}


@dataclass(frozen=True)
class Route:
    """One enabled rule: its project, its channel, its job (None: every job of its
    project), its switches and timers."""

    channel_id: int
    job_id: int | None
    events: frozenset[str]
    timers: Timers
    thresholds: Thresholds = field(default_factory=Thresholds)
    project_id: int = DEFAULT_PROJECT_ID

    def applies(self, project_id: int, job_id: int) -> bool:
        """Whether the rule is about job ``job_id`` of project ``project_id``: a rule
        never routes another project's incidents, whatever their job's name."""
        return self.project_id == project_id and self.job_id in (None, job_id)


def routes(session: Session) -> list[Route]:
    rows = session.execute(
        select(
            NotificationRule.channel_id,
            NotificationRule.job_id,
            NotificationRule.on_failure,
            NotificationRule.on_late,
            NotificationRule.on_recovery,
            NotificationRule.group_wait_s,
            NotificationRule.group_interval_s,
            NotificationRule.repeat_interval_s,
            NotificationRule.failures_before,
            NotificationRule.successes_before,
            NotificationRule.project_id,
        )
        .join(NotificationChannel, NotificationChannel.id == NotificationRule.channel_id)
        .where(NotificationChannel.enabled.is_(True))
    )
    return [
        Route(
            channel_id,
            job_id,
            frozenset(
                name
                for name, on in (("failure", fail), ("late", late), ("recovery", recover))
                if on
            ),
            Timers(wait, interval, repeat),
            Thresholds(failures_before, successes_before),
            project_id,
        )
        for (
            channel_id,
            job_id,
            fail,
            late,
            recover,
            wait,
            interval,
            repeat,
            failures_before,
            successes_before,
            project_id,
        ) in rows
    ]


@dataclass(frozen=True)
class SuccessesNeeded:
    """How many consecutive successes take a target out of an incident of each job: the
    most any rule routing the job asks for (``core.Thresholds.successes_before``); a rule
    for every job counts only for its own project's jobs."""

    by_job: dict[int, int]
    #: project -> the most its rules for every job ask for
    by_project: dict[int, int]

    @classmethod
    def of(cls, all_routes: Iterable[Route]) -> SuccessesNeeded:
        by_project: dict[int, int] = {}
        for route in all_routes:
            if route.job_id is None:
                wanted = route.thresholds.successes_before
                by_project[route.project_id] = max(by_project.get(route.project_id, 1), wanted)
        by_job: dict[int, int] = {}
        for route in all_routes:
            if route.job_id is not None:
                by_job[route.job_id] = max(
                    by_job.get(route.job_id, by_project.get(route.project_id, 1)),
                    route.thresholds.successes_before,
                )
        return cls(by_job, by_project)

    def __call__(self, job_id: int, project_id: int) -> int:
        return self.by_job.get(job_id, self.by_project.get(project_id, 1))

    @property
    def holds(self) -> bool:
        """Whether any rule wants more than one success."""
        return any(n > 1 for n in (*self.by_job.values(), *self.by_project.values()))


# -- recording ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """A target of one job as an incident records it."""

    assignment_id: int
    job_id: int
    job_name: str
    target_id: int
    target_name: str


@dataclass(frozen=True)
class StateChange:
    """One assignment's change of alert state at ``at``: into an incident of ``cause``, or
    recovered (``cause`` None), with what the incident records if it opens with it."""

    member: Member
    cause: Cause | None
    at: datetime
    previous_state: str
    reason: str
    run_id: int | None

    def opening(self) -> Opening:
        """What the incident of this change's cause records if the change opens it."""
        assert self.cause is not None
        return Opening(
            job_id=self.member.job_id,
            job_name=self.member.job_name,
            cause=self.cause,
            at=self.at,
            previous_state=self.previous_state,
            reason=self.reason,
            run_id=self.run_id,
        )


@dataclass(frozen=True)
class Opening:
    """What an incident records when it opens: its job and cause, when, the alert state
    the job left, why, and the run that opened it."""

    job_id: int
    job_name: str
    cause: Cause
    at: datetime
    previous_state: str
    reason: str
    run_id: int | None


def record_changes(
    session: Session, changes: Sequence[StateChange], *, rules: Sequence[Route] | None = None
) -> None:
    """Apply assignments' changes of alert state, oldest first per assignment: each target
    joins the open incident of its cause (opening one if needed) and leaves the job's
    other open incidents (a halted rollout's incident is left to :func:`recover_halted`);
    an incident whose last target left resolves. A few statements per round, not per
    change: a slot failing on 5,000 targets is 5,000 changes. ``rules``: the round's
    :func:`routes` when the caller read them already."""
    if not changes:
        return
    book = _Memberships.load(session, changes)
    needed = SuccessesNeeded.of(routes(session) if rules is None else rules)
    jobs = {c.member.job_id for c in changes}
    projects = job_projects(session, jobs) if needed.holds else {}
    for change in changes:
        job_id = change.member.job_id
        needs = needed(job_id, projects.get(job_id, DEFAULT_PROJECT_ID))
        if change.cause is None and needs > 1:
            continue  # held: it leaves once it has had enough successes (release_held)
        book.leave_other_incidents(change)
        if change.cause is not None:
            book.join_incident(change)
    session.flush()
    book.resolve_emptied()


@dataclass
class _Memberships:
    """The open incidents of the jobs a round of changes is about and the changed
    assignments' rows in them, read once and kept up to date while the changes apply."""

    session: Session
    #: (job, cause) -> its open incident.
    open_by_key: dict[tuple[int, str], Incident]
    #: incident id -> the open incident.
    by_id: dict[int, Incident]
    #: (incident, assignment) -> the assignment's row in the incident, active or not.
    rows: dict[tuple[int, int], IncidentTarget]
    #: assignment -> the incidents it is (still) in.
    active: defaultdict[int, set[int]]
    #: incident -> the newest change that may have emptied it.
    touched: dict[int, datetime] = field(default_factory=dict)

    @classmethod
    def load(cls, session: Session, changes: Sequence[StateChange]) -> _Memberships:
        job_ids = sorted({c.member.job_id for c in changes})
        open_by_key: dict[tuple[int, str], Incident] = {}
        for chunk in _chunked(job_ids):
            for incident in session.scalars(
                select(Incident).where(Incident.status == "open", Incident.job_id.in_(chunk))
            ):
                open_by_key[(incident.job_id, incident.cause)] = incident
        book = cls(
            session,
            open_by_key,
            by_id={i.id: i for i in open_by_key.values()},
            rows={},
            active=defaultdict(set),
        )
        book.read_rows(sorted({c.member.assignment_id for c in changes}))
        return book

    def read_rows(self, assignment_ids: Sequence[int]) -> None:
        """Every membership of these assignments in the open incidents, active or not."""
        incident_ids = sorted(self.by_id)
        if not incident_ids:
            return
        for chunk in _chunked(assignment_ids):
            for row in self.session.scalars(
                select(IncidentTarget).where(
                    IncidentTarget.incident_id.in_(incident_ids),
                    IncidentTarget.assignment_id.in_(chunk),
                )
            ):
                self.rows[(row.incident_id, row.assignment_id)] = row
                if row.recovered_at is None:
                    self.active[row.assignment_id].add(row.incident_id)

    def leave_other_incidents(self, change: StateChange) -> None:
        """The target recovers in the open incidents of its job that are not of the
        change's cause (but stays in a halted rollout's)."""
        aid = change.member.assignment_id
        for incident_id in sorted(self.active[aid]):
            other = self.by_id[incident_id]
            if other.cause == change.cause or other.cause == "halted":
                continue
            self.rows[(incident_id, aid)].recovered_at = change.at
            self.active[aid].discard(incident_id)
            self.touched[incident_id] = max(change.at, self.touched.get(incident_id, change.at))

    def join_incident(self, change: StateChange) -> None:
        """The target joins the open incident of the change's cause, opened if need be."""
        assert change.cause is not None  # a recovery joins nothing
        member = change.member
        key = (member.job_id, change.cause)
        incident = self.open_by_key.get(key)
        if incident is None:
            incident = _new_incident(self.session, change.opening())
            self.open_by_key[key] = self.by_id[incident.id] = incident
        found = self.rows.get((incident.id, member.assignment_id))
        if found is None:
            row = IncidentTarget(
                incident_id=incident.id,
                assignment_id=member.assignment_id,
                target_id=member.target_id,
                target_name=member.target_name,
                joined_at=change.at,
                last_seen_at=change.at,
            )
            self.session.add(row)
            self.rows[(incident.id, member.assignment_id)] = row
        else:
            found.recovered_at = None
            found.last_seen_at = max(found.last_seen_at, change.at)
        self.active[member.assignment_id].add(incident.id)

    def resolve_emptied(self) -> None:
        """Resolve the incidents the changes left without an active target (once flushed)."""
        if not self.touched:
            return
        left = dict(
            self.session.execute(
                select(IncidentTarget.incident_id, func.count())
                .where(
                    IncidentTarget.incident_id.in_(sorted(self.touched)),
                    IncidentTarget.recovered_at.is_(None),
                )
                .group_by(IncidentTarget.incident_id)
            ).all()
        )
        for incident_id, at in sorted(self.touched.items()):
            if not left.get(incident_id):
                _resolve(self.session, self.by_id[incident_id], at)


def _new_incident(session: Session, opening: Opening) -> Incident:
    # Evaluation holds the writer lock (SQLite) or the advisory lock (PostgreSQL), so no
    # one else opens this incident meanwhile; the partial unique index makes sure of it.
    incident = Incident(
        project_id=_project_of_job(session, opening.job_id),
        job_id=opening.job_id,
        job_name=opening.job_name,
        cause=opening.cause,
        status="open",
        opened_at=opening.at,
        previous_state=opening.previous_state,
        reason=opening.reason,
        first_run_id=opening.run_id,
    )
    session.add(incident)
    session.flush()
    log.info(
        "incident: #%d %s %s opened",
        incident.id,
        opening.job_name,
        opening.cause,
        extra={"action": "incident.opened", "incident_id": incident.id, "job": opening.job_name},
    )
    return incident


def job_projects(session: Session, job_ids: Iterable[int]) -> dict[int, int]:
    """Job -> its project, for the jobs among ``job_ids`` still present."""
    found: dict[int, int] = {}
    for chunk in _chunked(sorted(set(job_ids))):
        found.update(session.execute(select(Job.id, Job.project_id).where(Job.id.in_(chunk))).all())
    return found


def _project_of_job(session: Session, job_id: int) -> int:
    """The project of job ``job_id`` (``default`` for one already removed)."""
    found = session.scalar(select(Job.project_id).where(Job.id == job_id))
    return DEFAULT_PROJECT_ID if found is None else found


def _chunked(items: Sequence[int], size: int = 500) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def record_halt(
    session: Session,
    job_id: int,
    job_name: str,
    halted_at: datetime,
    skipped: Sequence[Member],
    *,
    previous_state: str,
    reason: str,
    run_id: int | None,
) -> bool:
    """The targets a halted rollout skipped join the job's ``halted`` incident; returns
    False when the halt was already recorded (evaluation reads a window of several
    rounds). A target that recovered after this halt does not join again."""
    if _halt_resolved_since(session, job_id, halted_at):
        return False
    incident = _open_incident(
        session,
        Opening(
            job_id=job_id,
            job_name=job_name,
            cause="halted",
            at=halted_at,
            previous_state=previous_state,
            reason=reason,
            run_id=run_id,
        ),
    )
    return _join_halted(session, incident, skipped, halted_at)


def _halt_resolved_since(session: Session, job_id: int, halted_at: datetime) -> bool:
    """Whether the job's newest resolved ``halted`` incident closed at or after this halt,
    so the halt was recorded (and dealt with) already."""
    newest_resolved = session.scalar(
        select(func.max(Incident.resolved_at)).where(
            Incident.job_id == job_id, Incident.cause == "halted"
        )
    )
    return newest_resolved is not None and halted_at <= newest_resolved


def _join_halted(
    session: Session, incident: Incident, skipped: Sequence[Member], halted_at: datetime
) -> bool:
    """The skipped targets join the incident, except those already seen at or after the
    halt or recovered since; returns whether any joined."""
    rows = {
        row.assignment_id: row
        for row in session.scalars(
            select(IncidentTarget).where(IncidentTarget.incident_id == incident.id)
        )
    }
    news = False
    for member in skipped:
        row = rows.get(member.assignment_id)
        if row is not None and _seen_since((row.last_seen_at, row.recovered_at), halted_at):
            continue
        _join(session, incident, member, halted_at, row=row)
        news = True
    return news


#: One target of a job's open ``halted`` incident: when it was last seen halted, and when
#: it recovered (None: it has not).
_HaltRow = tuple[datetime, datetime | None]


@dataclass
class HaltsSeen:
    """What one round knows of each job's ``halted`` incidents, read once per job: enough
    to tell that :func:`record_halt` would find a halt recorded already (and change
    nothing), without reading the halt's slot again. Evaluation reads a window of several
    rounds, so most halts it finds are such. A job's facts are forgotten (read again when
    next asked) once one of its halts goes through :func:`record_halt`."""

    session: Session
    _facts: dict[int, tuple[datetime | None, dict[int, _HaltRow] | None]] = field(
        default_factory=dict
    )

    def recorded(self, job_id: int, halted_at: datetime, skipped: Sequence[Member]) -> bool:
        """Whether :func:`record_halt` of this halt would return False without a write:
        the job's halted incident resolved at or after it, or its open one holds every
        skipped target, seen at or after the halt or recovered since."""
        if job_id not in self._facts:
            self._facts[job_id] = self._read(job_id)
        newest_resolved, rows = self._facts[job_id]
        if newest_resolved is not None and halted_at <= newest_resolved:
            return True
        if rows is None:
            return False
        return all(_seen_since(rows.get(member.assignment_id), halted_at) for member in skipped)

    def forget(self, job_id: int) -> None:
        self._facts.pop(job_id, None)

    def _read(self, job_id: int) -> tuple[datetime | None, dict[int, _HaltRow] | None]:
        newest_resolved = self.session.scalar(
            select(func.max(Incident.resolved_at)).where(
                Incident.job_id == job_id, Incident.cause == "halted"
            )
        )
        open_id = self.session.scalar(
            select(Incident.id).where(
                Incident.job_id == job_id, Incident.cause == "halted", Incident.status == "open"
            )
        )
        if open_id is None:
            return newest_resolved, None
        rows = self.session.execute(
            select(
                IncidentTarget.assignment_id,
                IncidentTarget.last_seen_at,
                IncidentTarget.recovered_at,
            ).where(IncidentTarget.incident_id == open_id)
        )
        return newest_resolved, {aid: (seen, recovered) for aid, seen, recovered in rows}


def _seen_since(row: _HaltRow | None, halted_at: datetime) -> bool:
    """Whether a target's row in a halted incident already accounts for a halt: it was
    seen halted at or after it, or recovered at or after it (the rule of
    :func:`_join_halted`)."""
    if row is None:
        return False
    last_seen, recovered = row
    return halted_at <= last_seen or (recovered is not None and halted_at <= recovered)


def recover_halted(session: Session) -> None:
    """A target of a ``halted`` incident recovers with a success after the slot that put
    it there; the incident resolves when the last one has."""
    open_halts = list(
        session.scalars(
            select(Incident).where(Incident.status == "open", Incident.cause == "halted")
        )
    )
    for incident in open_halts:
        active = list(
            session.scalars(
                select(IncidentTarget).where(
                    IncidentTarget.incident_id == incident.id,
                    IncidentTarget.recovered_at.is_(None),
                )
            )
        )
        if not active:
            continue
        # One statement per chunk of targets (the unique index on runs starts with
        # assignment_id), not one per target: a halt can skip thousands.
        since = min(r.last_seen_at for r in active)
        successes: dict[int, list[datetime]] = defaultdict(list)
        ids = sorted(r.assignment_id for r in active)
        for start in range(0, len(ids), 500):
            for aid, finished in session.execute(
                select(Run.assignment_id, Run.finished_at).where(
                    Run.assignment_id.in_(ids[start : start + 500]),
                    Run.status == RunStatus.SUCCEEDED,
                    Run.finished_at > since,
                )
            ):
                if finished is not None:
                    successes[aid].append(finished)
        for row in active:
            after = [f for f in successes.get(row.assignment_id, ()) if f > row.last_seen_at]
            if after:
                row.recovered_at = min(after)
        session.flush()
        last = max((r.recovered_at for r in active if r.recovered_at is not None), default=None)
        if last is not None:
            _resolve_if_empty(session, incident, last)


def release_held(session: Session, rules: Sequence[Route]) -> None:
    """Targets held in their incidents after a recovery (a rule wants more than one
    success) leave them at the success that makes enough; an incident whose last target
    left resolves then. ``rules``: the round's :func:`routes`."""
    needed = SuccessesNeeded.of(rules)
    releases = thresholds.held_releases(session, needed)
    newest: dict[int, datetime] = {}
    for release in releases:
        release.row.recovered_at = release.at
        incident_id = release.row.incident_id
        newest[incident_id] = max(release.at, newest.get(incident_id, release.at))
    session.flush()
    for incident_id, at in sorted(newest.items()):
        incident = session.get(Incident, incident_id)
        if incident is not None:
            _resolve_if_empty(session, incident, at)


def _open_incident(session: Session, opening: Opening) -> Incident:
    """The open incident of the job and cause, or a new one recording ``opening``."""
    found = session.scalar(
        select(Incident).where(
            Incident.job_id == opening.job_id,
            Incident.cause == opening.cause,
            Incident.status == "open",
        )
    )
    if found is not None:
        return found
    return _new_incident(session, opening)


def _join(
    session: Session,
    incident: Incident,
    member: Member,
    at: datetime,
    *,
    row: IncidentTarget | None = None,
) -> None:
    if row is None:
        row = session.get(IncidentTarget, (incident.id, member.assignment_id))
    if row is None:
        session.add(
            IncidentTarget(
                incident_id=incident.id,
                assignment_id=member.assignment_id,
                target_id=member.target_id,
                target_name=member.target_name,
                joined_at=at,
                last_seen_at=at,
            )
        )
    else:
        row.recovered_at = None
        row.last_seen_at = max(row.last_seen_at, at)
    session.flush()


def _resolve_if_empty(session: Session, incident: Incident, at: datetime) -> None:
    session.flush()
    left = session.scalar(
        select(func.count()).where(
            IncidentTarget.incident_id == incident.id, IncidentTarget.recovered_at.is_(None)
        )
    )
    if not left:
        _resolve(session, incident, at)


def _resolve(session: Session, incident: Incident, at: datetime) -> None:
    incident.status = "resolved"
    incident.resolved_at = max(at, incident.opened_at)
    session.flush()
    log.info(
        "incident: #%d %s %s resolved",
        incident.id,
        incident.job_name,
        incident.cause,
        extra={"action": "incident.resolved", "incident_id": incident.id, "job": incident.job_name},
    )


# -- messages ----------------------------------------------------------------------------


def queue_messages(session: Session, now: datetime, rules: Sequence[Route]) -> int:
    """Bring the host incidents up to date with the probe's states
    (:func:`~fleetcron.services.alerts.host_incidents.sync_host_incidents`), then queue
    every message due now about open and just-resolved incidents under ``rules`` (the
    round's :func:`routes`); returns how many deliveries were queued."""
    sync_host_incidents(session, now)
    found = list(
        session.scalars(
            select(Incident)
            .where(or_(Incident.status == "open", Incident.resolved_at >= now - RESOLVED_LOOKBACK))
            .order_by(Incident.id)
        )
    )
    if not found:
        return 0
    _close_removed_jobs(
        session, [i for i in found if i.status == "open" and i.target_id is None], now
    )
    batch = _Round.read(session, found, now, list(rules))
    queued = 0
    for incident in found:
        queued += _queue_about(batch, incident)
    session.flush()
    return queued


def _hosts_open(found: Sequence[Incident]) -> set[int]:
    """The targets of the open host incidents among ``found``."""
    return {i.target_id for i in found if i.status == "open" and i.target_id is not None}


@dataclass(frozen=True, slots=True)
class _MemberRow:
    """One target of an incident as a round of messages reads it (a plain row: nothing in
    the round writes it, and loading hundreds of ORM objects each round cost more than
    the rest of the round)."""

    incident_id: int
    assignment_id: int
    target_id: int
    target_name: str
    recovered_at: datetime | None


@dataclass
class _Round:
    """What a round of messages reads once for all the incidents it looks at: the rules,
    what each channel was told so far, the targets, flapping and silences in force. The
    notices and the flaps announced are kept up to date as messages are queued."""

    session: Session
    now: datetime
    routes: list[Route]
    #: (incident, channel) -> what the channel was told of the incident.
    notices: dict[tuple[int, int], IncidentNotice]
    #: incident -> every target it has had (none: an empty list).
    members: defaultdict[int, list[_MemberRow]]
    opened_recently: dict[tuple[int, str], list[datetime]]
    announced: set[tuple[tuple[int, str], int]]
    silences: list[core.SilenceFacts]
    #: The targets of open host incidents, muting the job incidents over them.
    hosts_down: list[core.SilenceFacts]
    #: target -> its labels (read only when a silence is in force).
    labels: dict[int, dict[str, str]]
    #: incident -> its open targets' final verdicts (read when a threshold asks).
    verdicts: dict[int, dict[int, thresholds.Verdicts]] = field(default_factory=dict)

    @classmethod
    def read(
        cls, session: Session, found: Sequence[Incident], now: datetime, all_routes: list[Route]
    ) -> _Round:
        ids = [i.id for i in found]
        notices: dict[tuple[int, int], IncidentNotice] = {
            (n.incident_id, n.channel_id): n
            for n in session.scalars(
                select(IncidentNotice).where(IncidentNotice.incident_id.in_(ids))
            )
        }
        members: defaultdict[int, list[_MemberRow]] = defaultdict(list)
        for row in session.execute(
            select(
                IncidentTarget.incident_id,
                IncidentTarget.assignment_id,
                IncidentTarget.target_id,
                IncidentTarget.target_name,
                IncidentTarget.recovered_at,
            ).where(IncidentTarget.incident_id.in_(ids))
        ):
            members[row.incident_id].append(_MemberRow(*row))
        opened_recently = _opened_recently(session, now)
        announced = _flaps_announced(session, now)
        silences = active_silences(session, now)
        labels = (
            target_labels(session, {r.target_id for rows in members.values() for r in rows})
            if silences
            else {}
        )
        return cls(
            session,
            now,
            all_routes,
            notices,
            members,
            opened_recently,
            announced,
            silences,
            host_mutes(list(found), now, behind_down(session, _hosts_open(found))),
            labels,
        )

    def reached(
        self, incident: Incident, targets: frozenset[int], failures: int
    ) -> dict[int, datetime]:
        """The incident's open targets whose failure streak reached ``failures``, and
        when (their verdicts read once per round)."""
        if incident.id not in self.verdicts:
            self.verdicts[incident.id] = thresholds.final_verdicts(
                self.session, incident.job_id, incident.opened_at, sorted(targets)
            )
        return thresholds.streaks_reached(self.verdicts[incident.id], failures)

    def notice(self, incident_id: int, channel_id: int) -> tuple[IncidentNotice, core.NoticeFacts]:
        """The channel's notice of the incident (new if it was told nothing yet) and what
        it says the channel was told."""
        notice = self.notices.get((incident_id, channel_id))
        seen = core.NoticeFacts(
            last_sent_at=notice.last_sent_at if notice else None,
            notified=frozenset(notice.notified) if notice else frozenset(),
            closed=notice.closed if notice else False,
        )
        if notice is None:
            notice = IncidentNotice(
                incident_id=incident_id, channel_id=channel_id, notified=[], messages=0
            )
            self.session.add(notice)
            self.notices[(incident_id, channel_id)] = notice
        return notice, seen


@dataclass(frozen=True)
class _Standing:
    """Where one incident stands this round, whichever channel is asked about it."""

    incident: Incident
    #: Every target it has had, recovered or not.
    rows: Sequence[_MemberRow]
    facts: core.IncidentFacts
    #: Its job and cause.
    key: tuple[int, str]
    silenced: bool
    flapping: bool
    #: Open targets a silence of part of the job's targets mutes: left out of the
    #: incident's messages (and of what a channel was told) while it is in force.
    muted: frozenset[int] = frozenset()

    @classmethod
    def of(cls, batch: _Round, incident: Incident) -> _Standing:
        rows = batch.members[incident.id]
        active = [r for r in rows if r.recovered_at is None]
        shown_targets = active if incident.status == "open" else rows
        # The silences of its own project, and (for a job incident) the unreachable hosts.
        own = core.of_project(batch.silences, incident.project_id)
        mutes = own if incident.target_id is not None else [*own, *batch.hosts_down]
        silenced = core.is_silenced(
            mutes,
            incident.job_id,
            [(r.target_id, batch.labels.get(r.target_id, {})) for r in shown_targets],
            batch.now,
        )
        muted = frozenset(
            r.assignment_id
            for r in active
            if own
            and core.covered(
                own,
                incident.job_id,
                r.target_id,
                batch.labels.get(r.target_id, {}),
                batch.now,
            )
        )
        facts = core.IncidentFacts(
            opened_at=incident.opened_at,
            resolved_at=incident.resolved_at,
            acknowledged=incident.acked_at is not None,
            targets=frozenset(r.assignment_id for r in active) - muted,
        )
        key = flap_key(incident)
        flapping = core.is_flapping(batch.opened_recently.get(key, ()), batch.now)
        shown_rows = [r for r in rows if r.assignment_id not in muted]
        return cls(incident, shown_rows, facts, key, silenced, flapping, muted)


def _queue_about(batch: _Round, incident: Incident) -> int:
    """Queue the message due now about one incident to each channel whose rules want it;
    returns how many were queued."""
    standing = _Standing.of(batch, incident)
    cause = cast(Cause, incident.cause)
    wanted = _wanted(batch.routes, incident, core.cause_event(cause))
    queued = 0
    for channel_id, (timers, counts) in sorted(wanted.items()):
        notice, seen = batch.notice(incident.id, channel_id)
        # A target muted since the channel was told of it neither recovered nor left.
        seen = replace(seen, notified=seen.notified - standing.muted)
        seen_by = _as_seen_by(batch, standing, seen, counts.failures_before)
        if seen_by is None:
            # Never told, and no target reached the channel's threshold: it hears
            # nothing of this incident, not even of its resolution.
            if incident.status == "resolved":
                notice.closed = True
            continue
        kind = _due(batch, seen_by, notice, seen, timers)
        if kind is not None:
            _queue_message(batch, seen_by, notice, seen.notified, kind)
            queued += 1
    return queued


def _as_seen_by(
    batch: _Round, standing: _Standing, seen: core.NoticeFacts, failures: int
) -> _Standing | None:
    """The incident as a channel that hears of a target after ``failures`` consecutive
    failed slots sees it: the targets whose streak reached that, and those it was told
    of that are still in the incident; its group_wait counts from the first target that
    reached it. None when the channel was told nothing and no target reached it."""
    incident = standing.incident
    if failures <= 1 or incident.cause != "failing":
        return standing
    reached = batch.reached(incident, standing.facts.targets, failures)
    told = seen.notified
    shown = frozenset(a for a in standing.facts.targets if a in reached or a in told)
    if seen.last_sent_at is None and not shown:
        return None
    opened_at = incident.opened_at
    if seen.last_sent_at is None:
        opened_at = min(reached[a] for a in shown)
    facts = replace(standing.facts, opened_at=opened_at, targets=shown)
    rows = [r for r in standing.rows if r.assignment_id in shown or r.assignment_id in told]
    return replace(standing, rows=rows, facts=facts)


def _due(
    batch: _Round,
    standing: _Standing,
    notice: IncidentNotice,
    seen: core.NoticeFacts,
    timers: Timers,
) -> core.MessageKind | None:
    """The message due now to the notice's channel, if any (:func:`core.next_message`);
    marks the notice closed when nothing more is to be said on it."""
    incident = standing.incident
    if incident.status == "resolved" and standing.silenced and not seen.closed:
        notice.closed = True  # resolved while muted: nothing left to say
        return None
    kind = core.next_message(
        standing.facts,
        seen,
        timers,
        batch.now,
        silenced=standing.silenced,
        flapping=standing.flapping,
        flap_announced=(standing.key, notice.channel_id) in batch.announced,
    )
    if kind is None:
        if standing.flapping and not standing.silenced:
            notice.closed = True  # opened while flapping: never announced
        return None
    notice.closed = core.closes(kind)
    if kind == "resolved" and not _wants_recovery(batch.routes, incident, notice.channel_id):
        return None
    return kind


def _queue_message(
    batch: _Round,
    standing: _Standing,
    notice: IncidentNotice,
    notified: frozenset[int],
    kind: core.MessageKind,
) -> None:
    """Queue the message to the notice's channel and note on the notice what it told."""
    incident = standing.incident
    message = _message(
        batch.session, incident, kind, rows=standing.rows, notified=notified, now=batch.now
    )
    if kind == "flapping":
        message = replace(message, flapping=len(batch.opened_recently.get(standing.key, ())))
        incident.flapping_at = batch.now
        batch.announced.add((standing.key, notice.channel_id))
    _queue(batch.session, notice.channel_id, incident, message, batch.now)
    notice.last_sent_at = batch.now
    notice.notified = sorted(standing.facts.targets)
    notice.messages = (notice.messages or 0) + 1


def _opened_recently(session: Session, now: datetime) -> dict[tuple[int, str], list[datetime]]:
    found: dict[tuple[int, str], list[datetime]] = defaultdict(list)
    for incident in session.scalars(
        select(Incident).where(Incident.opened_at > now - core.FLAP_WINDOW)
    ):
        found[flap_key(incident)].append(incident.opened_at)
    return found


def _flaps_announced(session: Session, now: datetime) -> set[tuple[tuple[int, str], int]]:
    """(job and cause, channel) told of flapping within the window."""
    rows = session.execute(
        select(Incident, IncidentNotice.channel_id)
        .join(IncidentNotice, IncidentNotice.incident_id == Incident.id)
        .where(Incident.flapping_at > now - core.FLAP_WINDOW, IncidentNotice.messages > 0)
    )
    return {(flap_key(incident), channel_id) for incident, channel_id in rows}


def _close_removed_jobs(session: Session, open_ones: Sequence[Incident], now: datetime) -> None:
    """An open incident whose job was removed resolves, and no channel hears more of it
    (removing the job was the answer)."""
    job_ids = sorted({i.job_id for i in open_ones})
    if not job_ids:
        return
    present = set(session.scalars(select(Job.id).where(Job.id.in_(job_ids))))
    for incident in open_ones:
        if incident.job_id in present:
            continue
        incident.status = "resolved"
        incident.resolved_at = max(now, incident.opened_at)
        session.execute(
            update(IncidentTarget)
            .where(IncidentTarget.incident_id == incident.id, IncidentTarget.recovered_at.is_(None))
            .values(recovered_at=incident.resolved_at)
        )
        session.execute(
            update(IncidentNotice)
            .where(IncidentNotice.incident_id == incident.id)
            .values(closed=True)
        )
        for channel_id in session.scalars(select(NotificationChannel.id)):
            if session.get(IncidentNotice, (incident.id, channel_id)) is None:
                session.add(
                    IncidentNotice(
                        incident_id=incident.id,
                        channel_id=channel_id,
                        notified=[],
                        messages=0,
                        closed=True,
                    )
                )
        log.info(
            "incident: #%d %s %s closed: the job was removed",
            incident.id,
            incident.job_name,
            incident.cause,
            extra={"action": "incident.job_removed", "incident_id": incident.id},
        )
    session.flush()


def _wanted(
    all_routes: Iterable[Route], incident: Incident, event: str
) -> dict[int, tuple[Timers, Thresholds]]:
    """Channel -> timers and thresholds of the rules of the incident's project for its job
    (or every job) that want this event; a channel named by several rules gets each
    message once, on the shortest timers and the smallest thresholds."""
    found: dict[int, list[Route]] = defaultdict(list)
    for route in all_routes:
        if event in route.events and route.applies(incident.project_id, incident.job_id):
            found[route.channel_id].append(route)
    return {
        channel: (
            core.merged(r.timers for r in rules),
            core.merged_thresholds(r.thresholds for r in rules),
        )
        for channel, rules in found.items()
    }


def _wants_recovery(all_routes: Iterable[Route], incident: Incident, channel_id: int) -> bool:
    return any(
        r.channel_id == channel_id
        and "recovery" in r.events
        and r.applies(incident.project_id, incident.job_id)
        for r in all_routes
    )


def _message(
    session: Session,
    incident: Incident,
    kind: core.MessageKind,
    *,
    rows: Sequence[_MemberRow],
    notified: frozenset[int],
    now: datetime,
) -> IncidentMessage:
    cause = cast(Cause, incident.cause)
    active = [r for r in rows if r.recovered_at is None]
    previous, state = _transition(incident, kind, cause)
    shown = active if kind != "resolved" else list(rows)
    return IncidentMessage(
        kind=kind,
        incident_id=incident.id,
        job_id=incident.job_id,
        job_name=incident.job_name,
        cause=cause,
        opened_at=incident.opened_at,
        at=now,
        previous_state=previous,
        state=state,
        reason=incident.reason,
        targets=core.bounded(_lines(shown)),
        target_count=len(shown),
        failed_slots=failed_slots(session, incident, now),
        joined=_joined(active, notified),
        recovered=_recovered(rows, active, notified),
        resolved_at=incident.resolved_at,
        acknowledged_by=incident.acked_by,
        first_run=_first_run(session, incident.first_run_id),
        clusters=_clusters(session, incident, active) if kind != "resolved" else (),
        host=TargetLine(incident.target_id, incident.target_name or "")
        if incident.target_id is not None
        else None,
    )


def _transition(incident: Incident, kind: core.MessageKind, cause: Cause) -> tuple[str, str]:
    """The (previous, new) alert state a message reports: a firing message moves from the
    state before the incident, a resolved one back to ok, any other stays in the cause's."""
    state = STATE_OF[cause]
    if kind == "firing":
        return incident.previous_state, state
    if kind == "resolved":
        return state, "ok"
    return state, state


def _joined(active: Sequence[_MemberRow], notified: frozenset[int]) -> Sequence[TargetLine]:
    """The open targets not yet notified (none on the first message, which names all)."""
    if not notified:
        return ()
    return core.bounded(_lines(r for r in active if r.assignment_id not in notified))


def _recovered(
    rows: Sequence[_MemberRow],
    active: Sequence[_MemberRow],
    notified: frozenset[int],
) -> Sequence[TargetLine]:
    """The notified targets that are no longer open."""
    current = {r.assignment_id for r in active}
    return core.bounded(
        _lines(r for r in rows if r.assignment_id in notified and r.assignment_id not in current)
    )


def _clusters(
    session: Session, incident: Incident, active: Sequence[_MemberRow]
) -> list[core.Cluster]:
    """The open targets of a failing incident grouped by how their newest failing run
    since it opened failed, with the labels each group shares."""
    if incident.cause != "failing" or not active:
        return []
    newest: dict[int, tuple[datetime, int, str]] = {}
    ids = sorted(r.assignment_id for r in active)
    for chunk in _chunked(ids):
        for aid, finished, run_id, status, exit_code, error in session.execute(
            select(
                Run.assignment_id, Run.finished_at, Run.id, Run.status, Run.exit_code, Run.error
            ).where(
                Run.assignment_id.in_(chunk),
                Run.job_id == incident.job_id,
                Run.status.in_(sorted(FAILURE_STATUSES)),
                Run.finished_at >= incident.opened_at,
            )
        ):
            seen = newest.get(aid)
            if finished is not None and (seen is None or (finished, run_id) > seen[:2]):
                newest[aid] = (finished, run_id, core.failure_key(str(status), exit_code, error))
    labels = target_labels(session, {r.target_id for r in active})
    return core.clusters(
        (newest[r.assignment_id][2], labels.get(r.target_id, {}))
        for r in active
        if r.assignment_id in newest
    )


def _lines(rows: Iterable[_MemberRow]) -> list[TargetLine]:
    return [TargetLine(r.target_id, r.target_name) for r in rows]


def failed_slots(session: Session, incident: Incident, now: datetime) -> int:
    """Slots of the job that went wrong for this cause while the incident was open."""
    end = incident.resolved_at or now
    if incident.target_id is not None:
        return _host_failed_slots(session, incident, end)
    where: list[Any] = [
        Run.job_id == incident.job_id,
        Run.finished_at >= incident.opened_at,
        Run.finished_at <= end,
    ]
    if incident.cause == "failing":
        where.append(Run.status.in_(sorted(FAILURE_STATUSES)))
    elif incident.cause == "late":
        where.append(
            or_(
                Run.status.in_(sorted(LATE_STATUSES)),
                Run.skip_kind == SkipKind.OWNERSHIP_UNCERTAIN,
            )
        )
    elif incident.cause == "halted":
        where.append(Run.skip_kind == SkipKind.ROLLOUT_HALTED)
    else:
        where = [
            Run.job_id == incident.job_id,
            Run.scheduled_for <= end,
            Run.status.in_([RunStatus.RUNNING, RunStatus.LOST]),
            or_(Run.finished_at.is_(None), Run.finished_at >= incident.opened_at),
        ]
    count = session.scalar(select(func.count(func.distinct(Run.scheduled_for))).where(*where))
    return max(int(count or 0), 1)


def _host_failed_slots(session: Session, incident: Incident, end: datetime) -> int:
    """Slots of the host's jobs that failed while it could not be reached."""
    count = session.scalar(
        select(func.count(func.distinct(Run.scheduled_for))).where(
            Run.target_id == incident.target_id,
            Run.status.in_(sorted(FAILURE_STATUSES)),
            Run.finished_at >= incident.opened_at,
            Run.finished_at <= end,
        )
    )
    return int(count or 0)


def _first_run(session: Session, run_id: int | None) -> core.FirstRun | None:
    if run_id is None:
        return None
    row = session.execute(
        select(Run.id, Run.status, Run.exit_code, Run.error, Run.stderr_head).where(
            Run.id == run_id
        )
    ).first()
    if row is None:
        return None
    return core.FirstRun(
        id=row.id,
        status=str(row.status),
        exit_code=row.exit_code,
        error=row.error,
        stderr=stderr_excerpt(row.stderr_head or ""),
    )


def _queue(
    session: Session, channel_id: int, incident: Incident, message: IncidentMessage, now: datetime
) -> None:
    body = core.payload(message)
    event = core.rule_event(message)
    session.add(
        NotificationDelivery(
            channel_id=channel_id,
            event=event,
            payload=body,
            status="pending",
            attempts=0,
            created_at=now,
            next_attempt_at=now,
            incident_id=incident.id,
        )
    )
    log.info(
        "notify: incident #%d %s %s: %s, %d target(s)",
        incident.id,
        incident.job_name,
        incident.cause,
        message.kind,
        message.target_count,
        extra={
            "action": f"incident.{message.kind}",
            "incident_id": incident.id,
            "job": incident.job_name,
            "channel_id": channel_id,
        },
    )


__all__ = [
    "RESOLVED_LOOKBACK",
    "STATE_OF",
    "HaltsSeen",
    "Member",
    "Opening",
    "Route",
    "StateChange",
    "failed_slots",
    "queue_messages",
    "record_changes",
    "record_halt",
    "recover_halted",
    "release_held",
    "routes",
]
