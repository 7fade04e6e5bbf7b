"""Incidents as operators see them: listed, shown with their targets and the messages sent,
and acknowledged (which stops reminders, not the resolved message).

Reads need ``incident.read`` (viewers); acknowledging needs ``incident.ack`` (operators)
and is audited. The incidents themselves are written by evaluation
(:mod:`fleetcron.services.alerts.incidents`). Each is confined to the project the actor
acts in: another project's incident is not found, and a role in the project is enough.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.incidents import (
    CAUSES,
    Cause,
    host_link,
    is_silenced,
    job_link,
    of_project,
)
from fleetcron.core.validation import validate_int
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.metrics import IncidentReading, IncidentsReading
from fleetcron.services.alerts.incidents import failed_slots
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.health.silenced import active_silences, target_labels
from fleetcron.services.projects.scope import place
from fleetcron.store.schema import (
    Incident,
    IncidentTarget,
    NotificationChannel,
    NotificationDelivery,
    Project,
)

#: ``--status`` of a listing: open (acknowledged or not), acknowledged, resolved, all.
LIST_STATUSES: Final = ("open", "acknowledged", "resolved", "all")
LIST_MAX: Final = 500
NOTE_MAX: Final = 500
#: Targets a shown incident lists (the counts are whole).
TARGETS_LISTED: Final = 500


@dataclass(frozen=True)
class IncidentView:
    id: int
    job: str
    cause: str
    status: str
    opened_at: datetime
    resolved_at: datetime | None
    acked_at: datetime | None
    acked_by: str | None
    ack_note: str | None
    reason: str
    open_targets: int
    all_targets: int
    link: str

    @property
    def acknowledged(self) -> bool:
        return self.acked_at is not None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TargetRow:
    name: str
    joined_at: datetime
    recovered_at: datetime | None


@dataclass(frozen=True)
class MessageRow:
    delivery_id: int
    channel: str
    message: str
    status: str
    attempts: int
    created_at: datetime
    sent_at: datetime | None
    last_error: str | None


@dataclass(frozen=True)
class IncidentDetail:
    incident: IncidentView
    failed_slots: int
    first_run_id: int | None
    targets: list[TargetRow] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.incident.as_dict(),
            "failed_slots": self.failed_slots,
            "first_run_id": self.first_run_id,
            "targets": [asdict(t) for t in self.targets],
            "messages": [asdict(m) for m in self.messages],
        }


def list_incidents(
    app: App,
    actor: Actor,
    *,
    status: str = "open",
    job: str | None = None,
    limit: int = 50,
) -> list[IncidentView]:
    """Incidents, newest first: ``open`` (the default), ``acknowledged``, ``resolved`` or
    ``all``; of one job if given; of the actor's project. Raises InvalidInput naming the
    field."""
    actor.authorize_in("incident.read")
    if status not in LIST_STATUSES:
        raise InvalidInput(
            f"status: {status!r} is not one of {', '.join(LIST_STATUSES)}",
            field="status",
            value=status,
            allowed=", ".join(LIST_STATUSES),
        )
    validate_int(limit, field="limit", low=1, high=LIST_MAX)
    with app.db.read() as session:
        query = (
            select(Incident)
            .where(Incident.project_id == place(session, actor))
            .order_by(Incident.opened_at.desc(), Incident.id.desc())
        )
        if status in ("open", "acknowledged"):
            query = query.where(Incident.status == "open")
        if status == "acknowledged":
            query = query.where(Incident.acked_at.is_not(None))
        if status == "resolved":
            query = query.where(Incident.status == "resolved")
        if job is not None:
            query = query.where(Incident.job_name == job)
        found = list(session.scalars(query.limit(limit)))
        return [_view(session, incident) for incident in found]


def count_open(app: App, actor: Actor, *, job: str | None = None) -> int:
    """How many incidents are open (of one job if given): the dashboard's and the job
    page's link to the incidents page says it."""
    actor.authorize_in("incident.read")
    with app.db.read() as session:
        query = (
            select(func.count())
            .select_from(Incident)
            .where(Incident.status == "open", Incident.project_id == place(session, actor))
        )
        if job is not None:
            query = query.where(Incident.job_name == job)
        return int(session.scalar(query) or 0)


def show_incident(app: App, actor: Actor, incident_id: int) -> IncidentDetail:
    """One incident with its targets (the first :data:`TARGETS_LISTED`) and every message
    sent about it with its delivery status. Raises NotFound (also for another project's)."""
    actor.authorize_in("incident.read")
    with app.db.read() as session:
        incident = _get(session, actor, incident_id)
        targets = [
            TargetRow(r.target_name, r.joined_at, r.recovered_at)
            for r in session.scalars(
                select(IncidentTarget)
                .where(IncidentTarget.incident_id == incident.id)
                .order_by(IncidentTarget.recovered_at.is_not(None), IncidentTarget.target_name)
                .limit(TARGETS_LISTED)
            )
        ]
        messages = [
            MessageRow(
                d.id,
                channel,
                str((d.payload or {}).get("message", d.event)),
                d.status,
                d.attempts,
                d.created_at,
                d.sent_at,
                d.last_error,
            )
            for d, channel in session.execute(
                select(NotificationDelivery, NotificationChannel.name)
                .join(
                    NotificationChannel,
                    NotificationChannel.id == NotificationDelivery.channel_id,
                )
                .where(NotificationDelivery.incident_id == incident.id)
                .order_by(NotificationDelivery.id)
            )
        ]
        return IncidentDetail(
            _view(session, incident),
            failed_slots(session, incident, app.now()),
            incident.first_run_id,
            targets,
            messages,
        )


def acknowledge(app: App, actor: Actor, incident_id: int, *, note: str = "") -> IncidentView:
    """Acknowledge an open incident: no more reminders; updates and the resolved message
    still go out, naming who acknowledged it. Raises NotFound, or InvalidInput (field
    ``incident``) for one that is resolved or already acknowledged, changing nothing."""
    audit = AuditNote("incident.ack", detail={"incident": incident_id})
    with audited(app, actor, audit) as session:
        actor.authorize_in("incident.ack")
        if len(note) > NOTE_MAX:
            raise InvalidInput(
                f"note: at most {NOTE_MAX} characters (got {len(note)})",
                field="note",
                value=len(note),
                allowed=f"0..{NOTE_MAX} characters",
            )
        incident = _get(session, actor, incident_id)
        audit.job_id, audit.job_name = incident.job_id, incident.job_name
        if incident.status != "open":
            raise InvalidInput(
                f"incident: #{incident_id} is resolved; only an open incident can be acknowledged",
                field="incident",
                value=incident_id,
                allowed="an open incident (fleetcron alert list)",
            )
        if incident.acked_at is not None:
            raise InvalidInput(
                f"incident: #{incident_id} was already acknowledged by {incident.acked_by}",
                field="incident",
                value=incident_id,
                allowed="an unacknowledged incident",
            )
        incident.acked_at = app.now()
        incident.acked_by = actor.name
        incident.ack_note = note or None
        audit.detail.update({"cause": incident.cause, "note": note})
        session.flush()
        return _view(session, incident)


def incidents_reading(app: App) -> IncidentsReading:
    """The open incidents as the metrics' incident gauges show them at scrape time: per
    incident its project, job, cause, open targets, acknowledged, and silenced (muted as
    its messages are: every open target under a silence of its project in force,
    ``core.is_silenced``). Four statements, one more when a silence is in force."""
    now = app.now()
    with app.db.read() as session:
        found = list(session.scalars(select(Incident).where(Incident.status == "open")))
        members = _open_members(session, [i.id for i in found])
        silences = active_silences(session, now)
        labels = (
            target_labels(session, (t for rows in members.values() for t in rows))
            if silences
            else {}
        )
        projects = dict(session.execute(select(Project.id, Project.name)).all())
    return IncidentsReading(
        CAUSES,
        [
            IncidentReading(
                i.job_name,
                i.cause,
                len(members[i.id]),
                acknowledged=i.acked_at is not None,
                silenced=is_silenced(
                    of_project(silences, i.project_id),
                    i.job_id,
                    [(t, labels.get(t, {})) for t in members[i.id]],
                    now,
                ),
                target=i.target_name or "",
                project=projects.get(i.project_id, ""),
            )
            for i in found
        ],
    )


def _open_members(session: Session, ids: list[int]) -> dict[int, list[int]]:
    """Incident -> the targets still open in it."""
    members: dict[int, list[int]] = {i: [] for i in ids}
    for start in range(0, len(ids), 500):
        for incident_id, target_id in session.execute(
            select(IncidentTarget.incident_id, IncidentTarget.target_id).where(
                IncidentTarget.incident_id.in_(ids[start : start + 500]),
                IncidentTarget.recovered_at.is_(None),
            )
        ):
            members[incident_id].append(target_id)
    return members


def _get(session: Session, actor: Actor, incident_id: int) -> Incident:
    """The incident of the actor's project; NotFound for a missing one or another
    project's, so ids cannot be probed."""
    incident = session.get(Incident, incident_id)
    if incident is None or incident.project_id != place(session, actor):
        raise NotFound("incident", incident_id, field="incident")
    return incident


def _view(session: Session, incident: Incident) -> IncidentView:
    open_count, all_count = session.execute(
        select(
            func.count().filter(IncidentTarget.recovered_at.is_(None)),
            func.count(),
        ).where(IncidentTarget.incident_id == incident.id)
    ).one()
    cause: Cause = "failing"
    for known in CAUSES:
        if incident.cause == known:
            cause = known
    host = incident.target_name if incident.target_id is not None else None
    return IncidentView(
        id=incident.id,
        # A host incident has no job: it shows as the host it is about.
        job=f"host {host}" if host is not None else incident.job_name,
        cause=incident.cause,
        status=incident.status,
        opened_at=incident.opened_at,
        resolved_at=incident.resolved_at,
        acked_at=incident.acked_at,
        acked_by=incident.acked_by,
        ack_note=incident.ack_note,
        reason=incident.reason,
        open_targets=int(open_count or 0),
        all_targets=int(all_count or 0),
        link=host_link(host) if host is not None else job_link(incident.job_name, cause),
    )


__all__ = [
    "LIST_STATUSES",
    "IncidentDetail",
    "IncidentView",
    "MessageRow",
    "TargetRow",
    "acknowledge",
    "count_open",
    "incidents_reading",
    "list_incidents",
    "show_incident",
]
