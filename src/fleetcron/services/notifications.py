"""Notifications: channels and rules, alert evaluation, and the delivery queue.

Operators manage *channels* (a webhook or an email list) and *rules* (which job's events
go to which channel). The scheduler then runs two steps, each safe on every node at once:

1. :func:`evaluate_alerts` reads what changed — runs that finished recently with a verdict,
   slots still undecided past the misfire grace (through the indexed ``next_fire_at``),
   runs still ``running`` past their deadline — asks :func:`fleetcron.core.alerts.decide`
   about each assignment concerned, stores its new alert state and queues one delivery per
   matching channel, all in one transaction.
2. :func:`deliver_due` claims due deliveries, sends them *outside* any transaction with a
   timeout, and records each attempt: ``sent``, or ``pending`` again with exponential
   backoff, or ``failed`` after ``notify_max_attempts``.

:func:`run_notifications` does both on worker threads and never raises: a broken channel
or database hiccup is logged and retried, and never blocks the scheduler's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from fleetcron.core import validation as v
from fleetcron.core.alerts import (
    ALERT_STATES,
    FAILURE_STATUSES,
    LATE_STATUSES,
    OWNERSHIP_UNCERTAIN,
    Alert,
    AlertEvent,
    AlertStateName,
    Change,
    Outcome,
    RunFacts,
    channel_test_payload,
    classify_run,
    delivery_delay,
    late_slot_reason,
    payload,
    replay,
    run_reason,
    stderr_excerpt,
    stuck_run_reason,
)
from fleetcron.crypto import Secret
from fleetcron.errors import Conflict, FleetcronError, InvalidInput, NotFound
from fleetcron.notify import DeliveryFailed, send
from fleetcron.notify.channels import (
    EmailSpec,
    WebhookSpec,
    audit_summary,
    validate_email,
    validate_webhook,
)
from fleetcron.notify.webhook import masked, refuse_private_destination
from fleetcron.services.audit import AuditNote, audited, record, record_failure
from fleetcron.services.context import Actor, App
from fleetcron.services.jobs import get_job
from fleetcron.store.schema import (
    AlertState,
    Assignment,
    Job,
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
    Run,
    Target,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

CHANNEL_KINDS = ("webhook", "email")
DELIVERY_STATUSES = ("pending", "sent", "failed")
#: How often the scheduler should call :func:`run_notifications`.
NOTIFY_INTERVAL_S = 10.0
#: Runs that finished longer ago than this before an evaluation are not read by it. It is
#: many intervals long, so a slow or skipped round loses nothing; a node that was down
#: longer finished no runs meanwhile (the ones it left running are closed at its restart).
EVALUATION_WINDOW = timedelta(minutes=15)
#: Deliveries claimed by one :func:`deliver_due` call.
DELIVERY_BATCH = 100
#: Sends in flight at once within that call.
SEND_CONCURRENCY = 8
MAX_ERROR_LENGTH = 500
_IN_CHUNK = 500
# Key of the PostgreSQL advisory lock that lets one node at a time evaluate ("fcnt").
_EVALUATION_LOCK = 0x66636E74
_VERDICT_STATUSES = sorted(FAILURE_STATUSES | LATE_STATUSES)


# -- channels ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelView:
    """A channel as the CLI and API show it: its settings, never its secret."""

    id: int
    name: str
    kind: str
    enabled: bool
    config: dict[str, Any]
    has_secret: bool
    created_at: datetime

    @property
    def summary(self) -> str:
        c = self.config
        if self.kind == "webhook":
            return f"POST {c['url']}" + (" (signed)" if self.has_secret else "")
        login = f" as {c['username']}" if c.get("username") else ""
        tls = " starttls" if c.get("starttls") else ""
        return f"{c['host']}:{c['port']}{tls}{login} from {c['sender']} to {', '.join(c['to'])}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary}


def get_channel(session: Session, name: str) -> NotificationChannel:
    channel = session.scalar(select(NotificationChannel).where(NotificationChannel.name == name))
    if channel is None:
        raise NotFound("notification channel", name)
    return channel


def add_channel(app: App, actor: Actor, name: str, spec: WebhookSpec | EmailSpec) -> ChannelView:
    """Create a channel; its secret (webhook signing key, SMTP password) is encrypted with
    the master key. Raises InvalidInput naming the field, Conflict for a taken name."""
    kind = "webhook" if isinstance(spec, WebhookSpec) else "email"
    note = AuditNote("notify.channel.add", detail={"channel": name, "kind": kind})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        v.validate_name(name)
        if isinstance(spec, WebhookSpec):
            config, secret = validate_webhook(spec)
        else:
            config, secret = validate_email(spec)
        note.detail.update(audit_summary(kind, config, signed=secret is not None))
        if kind == "webhook":
            config = sealed_webhook(app, config["url"])
        taken = session.scalar(
            select(NotificationChannel.id).where(NotificationChannel.name == name)
        )
        if taken is not None:
            raise Conflict(f"notification channel {name} already exists", field="name")
        channel = NotificationChannel(
            name=name,
            kind=kind,
            config=config,
            secret_enc=app.master_key.encrypt(secret.encode()) if secret else None,
            enabled=True,
            created_at=app.now(),
        )
        session.add(channel)
        session.flush()
        return _channel_view(channel)


def list_channels(app: App, actor: Actor) -> list[ChannelView]:
    """Every channel, by name. Admins only: webhook URLs often embed a token."""
    actor.authorize("settings.manage")
    with app.db.read() as session:
        channels = session.scalars(select(NotificationChannel).order_by(NotificationChannel.name))
        return [_channel_view(c) for c in channels]


def remove_channel(app: App, actor: Actor, name: str) -> int:
    """Delete a channel with its rules and deliveries; returns how many rules went with it."""
    note = AuditNote("notify.channel.remove", detail={"channel": name})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        channel = get_channel(session, name)
        rules = (
            session.scalar(
                select(func.count(NotificationRule.id)).where(
                    NotificationRule.channel_id == channel.id
                )
            )
            or 0
        )
        # Rules and deliveries go by ON DELETE CASCADE, in this same statement.
        session.delete(channel)
        note.detail.update({"kind": channel.kind, "rules": rules})
        return rules


def send_test_message(app: App, actor: Actor, name: str) -> str | None:
    """Send a test message to a channel now, outside any transaction; returns a note on a
    partial success (refused recipients). Raises DeliveryFailed saying what went wrong."""
    note = AuditNote("notify.channel.test", detail={"channel": name})
    try:
        actor.authorize("settings.manage")
        with app.db.read() as session:
            channel = get_channel(session, name)
            outbound = _Outbound(
                delivery_id=None,
                attempt=1,
                channel=channel.name,
                kind=channel.kind,
                config=dict(channel.config),
                secret_enc=channel.secret_enc,
                message=channel_test_payload(channel.name, app.now()),
            )
        sent_note = _send(app, outbound)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    if sent_note:
        note.detail["note"] = sent_note
    with app.db.session() as session:
        record(session, app, actor, note, success=True)
    return sent_note


# -- rules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleView:
    id: int
    channel: str
    job: str | None
    on_failure: bool
    on_late: bool
    on_recovery: bool
    created_at: datetime

    @property
    def events(self) -> list[str]:
        flags = (("failure", self.on_failure), ("late", self.on_late))
        return [name for name, on in (*flags, ("recovery", self.on_recovery)) if on]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "events": self.events}


def add_rule(
    app: App,
    actor: Actor,
    channel: str,
    *,
    job: str | None = None,
    on_failure: bool = True,
    on_late: bool = True,
    on_recovery: bool = True,
) -> RuleView:
    """Send a channel the events of one job, or of every job (``job`` None). One rule per
    channel and job: a second one is a Conflict (remove the first to change it)."""
    note = AuditNote("notify.rule.add", job_name=job, detail={"channel": channel})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        if not (on_failure or on_late or on_recovery):
            raise InvalidInput(
                "events: a rule needs at least one of failure, late, recovery",
                field="events",
                value=[],
                allowed="failure, late, recovery",
            )
        the_channel = get_channel(session, channel)
        job_id: int | None = None
        if job is not None:
            job_id = note.job_id = get_job(session, job).id
        same = select(NotificationRule.id).where(NotificationRule.channel_id == the_channel.id)
        same = same.where(
            NotificationRule.job_id.is_(None)
            if job_id is None
            else NotificationRule.job_id == job_id
        )
        existing = session.scalar(same)
        if existing is not None:
            raise Conflict(
                f"channel {channel} already has rule {existing} for "
                f"{'job ' + job if job else 'every job'}; remove it to change the events",
                field="job",
            )
        rule = NotificationRule(
            channel_id=the_channel.id,
            job_id=job_id,
            on_failure=on_failure,
            on_late=on_late,
            on_recovery=on_recovery,
            created_at=app.now(),
        )
        session.add(rule)
        session.flush()
        view = RuleView(rule.id, channel, job, on_failure, on_late, on_recovery, rule.created_at)
        note.detail.update({"rule": rule.id, "events": view.events})
        return view


def list_rules(app: App, actor: Actor) -> list[RuleView]:
    actor.authorize("job.read")
    with app.db.read() as session:
        rows = session.execute(
            select(NotificationRule, NotificationChannel.name, Job.name)
            .join(NotificationChannel, NotificationChannel.id == NotificationRule.channel_id)
            .outerjoin(Job, Job.id == NotificationRule.job_id)
            .order_by(NotificationChannel.name, NotificationRule.id)
        ).all()
        return [
            RuleView(r.id, channel, job, r.on_failure, r.on_late, r.on_recovery, r.created_at)
            for r, channel, job in rows
        ]


def remove_rule(app: App, actor: Actor, rule_id: int) -> None:
    note = AuditNote("notify.rule.remove", detail={"rule": rule_id})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        rule = session.get(NotificationRule, rule_id)
        if rule is None:
            raise NotFound("notification rule", rule_id)
        session.delete(rule)


# -- deliveries (read) ------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryView:
    id: int
    channel: str
    event: str
    status: str
    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None
    sent_at: datetime | None
    last_error: str | None
    payload: dict[str, Any]

    @property
    def subject(self) -> str:
        return str(self.payload.get("subject", ""))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "subject": self.subject}


def list_deliveries(
    app: App,
    actor: Actor,
    *,
    status: str | None = None,
    channel: str | None = None,
    limit: int = 50,
) -> list[DeliveryView]:
    """Deliveries, newest first."""
    actor.authorize("run.read")
    if status is not None:
        v.validate_choice(status, DELIVERY_STATUSES, field="status")
    v.validate_int(limit, field="limit", low=1, high=10_000)
    with app.db.read() as session:
        query = select(NotificationDelivery, NotificationChannel.name).join(
            NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id
        )
        if status is not None:
            query = query.where(NotificationDelivery.status == status)
        if channel is not None:
            query = query.where(NotificationChannel.id == get_channel(session, channel).id)
        rows = session.execute(query.order_by(NotificationDelivery.id.desc()).limit(limit))
        return [
            DeliveryView(
                d.id,
                name,
                d.event,
                d.status,
                d.attempts,
                d.created_at,
                d.next_attempt_at,
                d.sent_at,
                d.last_error,
                dict(d.payload),
            )
            for d, name in rows
        ]


# -- evaluation -------------------------------------------------------------------------


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
    # Runs with a verdict other than success, finished in the window (ix_runs_status):
    # only these can turn an "ok" assignment into something else.
    flagged = [
        _run_row(row, stderr=row.stderr_head)
        for row in session.execute(
            select(*_RUN_COLUMNS, Run.stderr_head).where(
                Run.finished_at > since,
                or_(
                    Run.status.in_(_VERDICT_STATUSES),
                    (Run.status == "skipped") & Run.reason.startswith(OWNERSHIP_UNCERTAIN),
                ),
            )
        )
    ]
    # Slots the scheduler has not decided within the grace (ix_assignments_due).
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
        select(*_RUN_COLUMNS).where(Run.status == "running", Run.deadline_at < now)
    ):
        run = _run_row(row)
        stuck.setdefault(run.assignment_id, run)
    unsettled = set(
        session.scalars(select(AlertState.assignment_id).where(AlertState.state != "ok"))
    )
    concerned = {r.assignment_id for r in flagged} | set(overdue) | set(stuck) | unsettled
    if not concerned:
        return 0

    subjects = _subjects(session, concerned)
    gone = concerned - set(subjects)
    for chunk in _chunks(sorted(gone)):
        # The job or target was removed: nothing left to alert about.
        session.execute(delete(AlertState).where(AlertState.assignment_id.in_(chunk)))
    states = _states(session, subjects)
    runs: dict[int, list[_RunRow]] = defaultdict(list)
    for run in [*flagged, *_successes(session, subjects, since)]:
        runs[run.assignment_id].append(run)

    routes = _routes(session)
    queued = 0
    for aid in sorted(subjects):
        subject = subjects[aid]
        previous: AlertStateName = "ok"
        changed_at: datetime | None = None
        if aid in states:
            previous, changed_at = states[aid]
        # Runs finished before the last change were judged by an earlier evaluation.
        cutoff = max(since, changed_at) if changed_at is not None else since
        verdicts = _verdicts(runs.get(aid, ()), subject, cutoff)
        _, changes = replay(
            previous, [outcome for _, outcome in verdicts], overdue=aid in overdue or aid in stuck
        )
        for change in changes:
            if change.cause is None:
                changed = now
                alert = _overdue_alert(
                    change, subject, now, overdue.get(aid), stuck.get(aid), grace
                )
            else:
                run = verdicts[change.cause][0]
                assert run.finished_at is not None
                changed = run.finished_at
                alert = _run_alert(change, subject, now, run)
            queued += _queue(session, routes, alert)
        if changes:
            _save_state(session, aid, changes[-1].decision.state, changed, exists=aid in states)
    return queued


def _states(session: Session, ids: Iterable[int]) -> dict[int, tuple[AlertStateName, datetime]]:
    states: dict[int, tuple[AlertStateName, datetime]] = {}
    for chunk in _chunks(sorted(ids)):
        for row in session.scalars(select(AlertState).where(AlertState.assignment_id.in_(chunk))):
            known = row.state if row.state in ALERT_STATES else "ok"
            states[row.assignment_id] = (cast(AlertStateName, known), row.changed_at)
    return states


def _successes(session: Session, ids: Iterable[int], since: datetime) -> list[_RunRow]:
    """Successes matter only where something is or was just wrong: they are read for those
    assignments alone (the unique index on runs starts with ``assignment_id``)."""
    found: list[_RunRow] = []
    for chunk in _chunks(sorted(ids)):
        query = select(*_RUN_COLUMNS).where(
            Run.assignment_id.in_(chunk), Run.status == "succeeded", Run.finished_at > since
        )
        found.extend(_run_row(row) for row in session.execute(query))
    return found


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


def _queue(session: Session, routes: Iterable[_Route], alert: Alert) -> int:
    """Queue the alert for every channel that wants it; returns how many."""
    body = payload(alert)
    channels = _channels_for(routes, alert.job_id, alert.event)
    for channel_id in channels:
        session.add(
            NotificationDelivery(
                channel_id=channel_id,
                event=alert.event,
                payload=body,
                status="pending",
                attempts=0,
                created_at=alert.at,
                next_attempt_at=alert.at,
            )
        )
    log.info(
        "notify: %s %s on %s (%s -> %s), %d message(s)",
        alert.event,
        alert.job_name,
        alert.target_name,
        alert.previous_state,
        alert.state,
        len(channels),
        extra={
            "action": f"alert.{alert.event}",
            "job": alert.job_name,
            "target": alert.target_name,
            "run_id": alert.run.id if alert.run else None,
        },
    )
    return len(channels)


def _run_row(row: Any, *, stderr: str | None = None) -> _RunRow:
    return _RunRow(
        id=row.id,
        assignment_id=row.assignment_id,
        status=row.status,
        reason=row.reason,
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


@dataclass(frozen=True)
class _Route:
    channel_id: int
    job_id: int | None
    events: frozenset[str]


def _routes(session: Session) -> list[_Route]:
    rows = session.execute(
        select(
            NotificationRule.channel_id,
            NotificationRule.job_id,
            NotificationRule.on_failure,
            NotificationRule.on_late,
            NotificationRule.on_recovery,
        )
        .join(NotificationChannel, NotificationChannel.id == NotificationRule.channel_id)
        .where(NotificationChannel.enabled.is_(True))
    )
    return [
        _Route(
            channel_id,
            job_id,
            frozenset(
                name
                for name, on in (("failure", fail), ("late", late), ("recovery", recover))
                if on
            ),
        )
        for channel_id, job_id, fail, late, recover in rows
    ]


def _channels_for(routes: Iterable[_Route], job_id: int, event: AlertEvent) -> list[int]:
    """Channels of every rule for this job or for every job that wants this event; a
    channel named by several rules gets the message once."""
    return sorted(
        {
            r.channel_id
            for r in routes
            if event in r.events and (r.job_id is None or r.job_id == job_id)
        }
    )


# -- delivery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outbound:
    """One claimed delivery attempt: plain data, no session."""

    delivery_id: int | None
    attempt: int
    channel: str
    kind: str
    config: dict[str, Any]
    secret_enc: bytes | None = field(repr=False)
    message: dict[str, Any] = field(repr=False)


def deliver_due(app: App, now: datetime, *, limit: int = DELIVERY_BATCH) -> int:
    """Send up to ``limit`` pending deliveries whose ``next_attempt_at`` has come; returns
    how many attempts were made. Never raises for a channel's failure: each attempt's
    outcome is recorded on its delivery. Blocks for up to about ``notify_timeout_s`` per
    round of :data:`SEND_CONCURRENCY` sends: call it from a worker thread."""
    claimed = _claim(app, now, limit)
    if not claimed:
        return 0
    with ThreadPoolExecutor(
        max_workers=min(SEND_CONCURRENCY, len(claimed)), thread_name_prefix="fleetcron-notify"
    ) as pool:
        outcomes = list(pool.map(lambda outbound: _attempt(app, outbound), claimed))
    _record(app, now, list(zip(claimed, outcomes, strict=True)))
    return len(claimed)


def _lease(app: App) -> timedelta:
    # A claimed delivery is not due again until its attempt is certainly over: every SMTP
    # step may take the full timeout. If this process dies mid-send, it is retried then.
    return timedelta(seconds=max(60.0, 10 * app.settings.notify_timeout_s))


def _claim(app: App, now: datetime, limit: int) -> list[_Outbound]:
    with app.db.session() as session:
        query = (
            select(NotificationDelivery.id)
            .join(NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id)
            .where(
                NotificationDelivery.status == "pending",
                NotificationDelivery.next_attempt_at <= now,
                NotificationChannel.enabled.is_(True),
            )
            .order_by(NotificationDelivery.next_attempt_at, NotificationDelivery.id)
            .limit(limit)
        )
        if session.get_bind().dialect.name == "postgresql":
            # Another node's claim in progress is skipped, not waited for.
            query = query.with_for_update(skip_locked=True, of=NotificationDelivery)
        ids = list(session.scalars(query))
        if not ids:
            return []
        # Counting the attempt at the claim bounds the attempts even across crashes.
        session.execute(
            update(NotificationDelivery)
            .where(NotificationDelivery.id.in_(ids))
            .values(
                attempts=NotificationDelivery.attempts + 1,
                next_attempt_at=now + _lease(app),
            )
        )
        rows = session.execute(
            select(NotificationDelivery, NotificationChannel)
            .join(NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id)
            .where(NotificationDelivery.id.in_(ids))
            .order_by(NotificationDelivery.id)
            .execution_options(populate_existing=True)
        ).all()
        return [
            _Outbound(
                delivery_id=d.id,
                attempt=d.attempts,
                channel=c.name,
                kind=c.kind,
                config=dict(c.config),
                secret_enc=c.secret_enc,
                message=dict(d.payload),
            )
            for d, c in rows
        ]


def sealed_webhook(app: App, url: str) -> dict[str, Any]:
    """A webhook channel's stored config: the URL encrypted with the master key (it often
    carries a token), and the masked form that lists show."""
    return {"url_enc": app.master_key.encrypt(url.encode()).decode(), "url_shown": masked(url)}


def _open_config(app: App, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    """The config a sender needs: the webhook URL decrypted (rows from before encryption
    still hold it in clear until :func:`seal_stored_urls` runs)."""
    if kind != "webhook" or "url_enc" not in config:
        return config
    url = app.master_key.decrypt(str(config["url_enc"]).encode()).reveal().decode()
    return {"url": url}


def _shown_config(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    if kind != "webhook":
        return config
    return {"url": config.get("url_shown") or masked(str(config.get("url", "")))}


_SEALED: set[str] = set()


def seal_stored_urls(app: App) -> int:
    """Encrypt webhook URLs still stored in clear (channels added before URLs were
    encrypted); returns how many. Done by the notifier once per process and database; the
    master key is not available to schema migrations, so this is not one."""
    database = app.settings.effective_database_url
    if database in _SEALED:
        return 0
    sealed = 0
    with app.db.session() as session:
        for channel in session.scalars(
            select(NotificationChannel).where(NotificationChannel.kind == "webhook")
        ):
            if "url" in channel.config and "url_enc" not in channel.config:
                channel.config = sealed_webhook(app, str(channel.config["url"]))
                sealed += 1
    _SEALED.add(database)
    if sealed:
        log.info(
            "notify: encrypted %d stored webhook URL(s)",
            sealed,
            extra={"action": "notify.seal", "count": sealed},
        )
    return sealed


def _send(app: App, outbound: _Outbound) -> str | None:
    secret: Secret | None = None
    if outbound.secret_enc is not None:
        secret = app.master_key.decrypt(outbound.secret_enc)
    config = _open_config(app, outbound.kind, outbound.config)
    if outbound.kind == "webhook" and app.settings.webhook_refuse_private:
        refuse_private_destination(str(config["url"]))
    return send(
        outbound.kind,
        config,
        secret,
        outbound.message,
        delivery_id=outbound.delivery_id,
        timeout=app.settings.notify_timeout_s,
    )


def _attempt(app: App, outbound: _Outbound) -> tuple[bool, str | None]:
    """(sent, note or error) of one attempt; never raises."""
    try:
        return True, _send(app, outbound)
    except FleetcronError as exc:
        return False, _bounded(exc.message)
    except Exception as exc:  # a bug in a sender must not stop the other deliveries
        log.exception(
            "notify: delivery %s to %s crashed",
            outbound.delivery_id,
            outbound.channel,
            extra={"action": "notify.error", "channel": outbound.channel},
        )
        return False, _bounded(f"internal error: {type(exc).__name__}: {exc}")


def _record(
    app: App, now: datetime, results: list[tuple[_Outbound, tuple[bool, str | None]]]
) -> None:
    settings = app.settings
    with app.db.session() as session:
        for outbound, (sent, detail) in results:
            # Written only if no one claimed the delivery again after our lease ran out.
            mine = (NotificationDelivery.id == outbound.delivery_id) & (
                NotificationDelivery.attempts == outbound.attempt
            )
            if sent:
                values: dict[str, Any] = {
                    "status": "sent",
                    "sent_at": now,
                    "next_attempt_at": None,
                    "last_error": detail,
                }
                action, level = "notify.sent", logging.INFO
            else:
                delay = delivery_delay(
                    outbound.attempt, settings.notify_backoff_s, settings.notify_max_attempts
                )
                if delay is None:
                    values = {"status": "failed", "next_attempt_at": None, "last_error": detail}
                    action, level = "notify.failed", logging.WARNING
                else:
                    values = {
                        "status": "pending",
                        "next_attempt_at": now + timedelta(seconds=delay),
                        "last_error": detail,
                    }
                    action, level = "notify.retry", logging.INFO
            session.execute(update(NotificationDelivery).where(mine).values(**values))
            log.log(
                level,
                "notify: delivery %s to %s attempt %d: %s%s",
                outbound.delivery_id,
                outbound.channel,
                outbound.attempt,
                values["status"],
                f" ({detail})" if detail else "",
                extra={
                    "action": action,
                    "channel": outbound.channel,
                    "delivery_id": outbound.delivery_id,
                    "attempt": outbound.attempt,
                },
            )


# -- the scheduler's hook ---------------------------------------------------------------


@dataclass(frozen=True)
class NotifyStats:
    """What one :func:`run_notifications` round did."""

    queued: int = 0
    attempted: int = 0
    errors: int = 0


async def run_notifications(app: App, now: datetime) -> NotifyStats:
    """Evaluate alerts, then send what is due, each on a worker thread; never raises
    (except on cancellation). Errors are logged and the next round tries again."""
    queued = attempted = errors = 0
    try:
        await asyncio.to_thread(seal_stored_urls, app)
    except Exception:
        errors += 1
        log.exception("notify: encrypting stored URLs failed", extra={"action": "notify.error"})
    try:
        queued = await asyncio.to_thread(evaluate_alerts, app, now)
    except Exception:
        errors += 1
        log.exception("notify: alert evaluation failed", extra={"action": "notify.error"})
    try:
        attempted = await asyncio.to_thread(deliver_due, app, now)
    except Exception:
        errors += 1
        log.exception("notify: delivery round failed", extra={"action": "notify.error"})
    return NotifyStats(queued, attempted, errors)


def _channel_view(channel: NotificationChannel) -> ChannelView:
    return ChannelView(
        id=channel.id,
        name=channel.name,
        kind=channel.kind,
        enabled=channel.enabled,
        config=_shown_config(channel.kind, dict(channel.config)),
        has_secret=channel.secret_enc is not None,
        created_at=channel.created_at,
    )


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start : start + _IN_CHUNK]


__all__ = [
    "CHANNEL_KINDS",
    "DELIVERY_STATUSES",
    "EVALUATION_WINDOW",
    "NOTIFY_INTERVAL_S",
    "ChannelView",
    "DeliveryFailed",
    "DeliveryView",
    "EmailSpec",
    "NotifyStats",
    "RuleView",
    "WebhookSpec",
    "add_channel",
    "add_rule",
    "deliver_due",
    "evaluate_alerts",
    "get_channel",
    "list_channels",
    "list_deliveries",
    "list_rules",
    "remove_channel",
    "remove_rule",
    "run_notifications",
    "send_test_message",
]
