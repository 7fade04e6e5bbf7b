"""Notification administration: channels, rules and the delivery log.

Operators manage *channels* (where messages go; each kind is a module of
:mod:`fleetcron.notify`) and *rules* (which job's events go to which channel). Every change
is authorized (``settings.manage``), validated, written and audited here; secrets and
webhook URLs are stored encrypted with the master key and never shown. What the scheduler
does with them is :mod:`fleetcron.services.alerts.evaluation` and
:mod:`fleetcron.services.alerts.deliveries`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.alerts import channel_test_payload
from fleetcron.core.incidents import (
    DEFAULT_GROUP_INTERVAL_S,
    DEFAULT_GROUP_WAIT_S,
    DEFAULT_REPEAT_INTERVAL_S,
    RuleTimers,
    Thresholds,
)
from fleetcron.errors import Conflict, FleetcronError, InvalidInput, NotFound
from fleetcron.notify import ChannelSpec
from fleetcron.notify.registry import KINDS, kind_of
from fleetcron.services.alerts.deliveries import Outbound, send_outbound
from fleetcron.services.audit import AuditNote, audited, record, record_failure
from fleetcron.services.jobs.edit import get_job
from fleetcron.services.projects.scope import place
from fleetcron.store.schema import Job, NotificationChannel, NotificationDelivery, NotificationRule

DELIVERY_STATUSES = ("pending", "sent", "failed")


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
        kind = KINDS.get(self.kind)
        if kind is None:  # stored by a version with more kinds; its deliveries fail
            return f"(unknown channel kind {self.kind})"
        return kind.summary(self.config, self.has_secret)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary}


def get_channel(session: Session, name: str) -> NotificationChannel:
    channel = session.scalar(select(NotificationChannel).where(NotificationChannel.name == name))
    if channel is None:
        raise NotFound("notification channel", name)
    return channel


def add_channel(app: App, actor: Actor, name: str, spec: ChannelSpec) -> ChannelView:
    """Create a channel; its secret (webhook signing key, SMTP password) is encrypted with
    the master key. Raises InvalidInput naming the field, Conflict for a taken name."""
    kind = kind_of(spec)
    note = AuditNote("notify.channel.add", detail={"channel": name, "kind": kind.name})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        v.validate_name(name)
        config, secret = kind.validate(spec)
        note.detail.update(kind.audit(config, secret is not None))
        config = kind.seal(config, app.master_key.encrypt)
        taken = session.scalar(
            select(NotificationChannel.id).where(NotificationChannel.name == name)
        )
        if taken is not None:
            raise Conflict(f"notification channel {name} already exists", field="name")
        channel = NotificationChannel(
            name=name,
            kind=kind.name,
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
            outbound = Outbound(
                delivery_id=None,
                attempt=1,
                channel=channel.name,
                kind=channel.kind,
                config=dict(channel.config),
                secret_enc=channel.secret_enc,
                message=channel_test_payload(channel.name, app.now()),
            )
        sent_note = send_outbound(app, outbound)
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
    group_wait_s: float = DEFAULT_GROUP_WAIT_S
    group_interval_s: float = DEFAULT_GROUP_INTERVAL_S
    repeat_interval_s: float = DEFAULT_REPEAT_INTERVAL_S
    failures_before: int = 1
    successes_before: int = 1

    @property
    def events(self) -> list[str]:
        flags = (("failure", self.on_failure), ("late", self.on_late))
        return [name for name, on in (*flags, ("recovery", self.on_recovery)) if on]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "events": self.events}


@dataclass(frozen=True)
class RuleEvents:
    """Which incidents a rule sends: failing or halted (``failure``), late or stuck
    (``late``), and the resolved messages (``recovery``); at least one."""

    failure: bool = True
    late: bool = True
    recovery: bool = True

    def checked(self) -> RuleEvents:
        if not (self.failure or self.late or self.recovery):
            raise InvalidInput(
                "events: a rule needs at least one of failure, late, recovery",
                field="events",
                value=[],
                allowed="failure, late, recovery",
            )
        return self


def add_rule(
    app: App,
    actor: Actor,
    channel: str,
    *,
    job: str | None = None,
    events: RuleEvents | None = None,
    timers: RuleTimers | None = None,
    thresholds: Thresholds | None = None,
) -> RuleView:
    """Send a channel the ``events`` (None: all) of the incidents of one job, or of every
    job (``job`` None), with the rule's ``timers`` (``core/incidents.py``; None, or one of
    them None: Alertmanager's defaults) and ``thresholds`` (None: the first failure and
    the first success). One rule per channel and job: a second one is a Conflict (remove
    the first to change it)."""
    note = AuditNote("notify.rule.add", job_name=job, detail={"channel": channel})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        wanted = (RuleEvents() if events is None else events).checked()
        checked = (RuleTimers() if timers is None else timers).checked()
        counts = (Thresholds() if thresholds is None else thresholds).checked()
        the_channel = get_channel(session, channel)
        job_id: int | None = None
        pid = place(session, actor)
        if job is not None:
            job_id = note.job_id = get_job(session, job, pid).id
        _refuse_second_rule(session, the_channel, pid, job_id, job)
        rule = NotificationRule(
            project_id=pid,
            channel_id=the_channel.id,
            job_id=job_id,
            on_failure=wanted.failure,
            on_late=wanted.late,
            on_recovery=wanted.recovery,
            group_wait_s=checked.group_wait_s,
            group_interval_s=checked.group_interval_s,
            repeat_interval_s=checked.repeat_interval_s,
            failures_before=counts.failures_before,
            successes_before=counts.successes_before,
            created_at=app.now(),
        )
        session.add(rule)
        session.flush()
        view = _rule_view(rule, channel, job)
        note.detail.update(
            {"rule": rule.id, "events": view.events, **asdict(checked), **asdict(counts)}
        )
        return view


def _refuse_second_rule(
    session: Session, channel: NotificationChannel, pid: int, job_id: int | None, job: str | None
) -> None:
    """A Conflict when the channel already has a rule for this job (or every job of the
    project ``pid``)."""
    same = select(NotificationRule.id).where(
        NotificationRule.channel_id == channel.id, NotificationRule.project_id == pid
    )
    same = same.where(
        NotificationRule.job_id.is_(None) if job_id is None else NotificationRule.job_id == job_id
    )
    existing = session.scalar(same)
    if existing is not None:
        raise Conflict(
            f"channel {channel.name} already has rule {existing} for "
            f"{'job ' + job if job else 'every job'}; remove it to change the events",
            field="job",
        )


def list_rules(app: App, actor: Actor) -> list[RuleView]:
    """The rules of the project the actor acts in (a role there is enough to read them)."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        rows = session.execute(
            select(NotificationRule, NotificationChannel.name, Job.name)
            .join(NotificationChannel, NotificationChannel.id == NotificationRule.channel_id)
            .outerjoin(Job, Job.id == NotificationRule.job_id)
            .where(NotificationRule.project_id == place(session, actor))
            .order_by(NotificationChannel.name, NotificationRule.id)
        ).all()
        return [_rule_view(r, channel, job) for r, channel, job in rows]


def _rule_view(rule: NotificationRule, channel: str, job: str | None) -> RuleView:
    return RuleView(
        rule.id,
        channel,
        job,
        rule.on_failure,
        rule.on_late,
        rule.on_recovery,
        rule.created_at,
        rule.group_wait_s,
        rule.group_interval_s,
        rule.repeat_interval_s,
        rule.failures_before,
        rule.successes_before,
    )


def remove_rule(app: App, actor: Actor, rule_id: int) -> None:
    note = AuditNote("notify.rule.remove", detail={"rule": rule_id})
    with audited(app, actor, note) as session:
        actor.authorize("settings.manage")
        rule = session.get(NotificationRule, rule_id)
        if rule is None or rule.project_id != place(session, actor):
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


def _channel_view(channel: NotificationChannel) -> ChannelView:
    return ChannelView(
        id=channel.id,
        name=channel.name,
        kind=channel.kind,
        enabled=channel.enabled,
        config=_shown(channel.kind, dict(channel.config)),
        has_secret=channel.secret_enc is not None,
        created_at=channel.created_at,
    )


def _shown(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    known = KINDS.get(kind)
    return known.shown(config) if known is not None else config


__all__ = [
    "DELIVERY_STATUSES",
    "ChannelView",
    "DeliveryView",
    "RuleEvents",
    "RuleTimers",
    "RuleView",
    "Thresholds",
    "add_channel",
    "add_rule",
    "get_channel",
    "list_channels",
    "list_deliveries",
    "list_rules",
    "remove_channel",
    "remove_rule",
    "send_test_message",
]
