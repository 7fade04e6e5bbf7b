"""The audit log: every operator action, successful or not, appended and never changed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.permissions import allowed
from fleetcron.core.topology import Topology
from fleetcron.errors import FleetcronError
from fleetcron.store.audit import append_event
from fleetcron.store.schema import AuditEvent

log = logging.getLogger(__name__)

COMMAND_EXCERPT = 120
#: The actor of failed and refused logins. The name typed at the log-in form may be a
#: password typed into the wrong field, so only admins see it (``detail["user"]``).
ANONYMOUS_ACTOR = "anonymous"


def command_excerpt(command: str) -> str:
    return command if len(command) <= COMMAND_EXCERPT else command[: COMMAND_EXCERPT - 1] + "…"


@dataclass
class AuditNote:
    """What an action will record; filled in as the action learns its objects."""

    action: str
    job_id: int | None = None
    job_name: str | None = None
    target_id: int | None = None
    target_name: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def record(session: Session, app: App, actor: Actor, note: AuditNote, *, success: bool) -> None:
    """Append the event of ``note`` to the caller's transaction (the store's writer)."""
    append_event(
        session,
        at=app.now(),
        actor=actor.name,
        action=note.action,
        success=success,
        job_id=note.job_id,
        job_name=note.job_name,
        target_id=note.target_id,
        target_name=note.target_name,
        detail=note.detail,
    )


@contextmanager
def audited(app: App, actor: Actor, note: AuditNote) -> Iterator[Session]:
    """A write transaction whose success is audited inside it, and whose failure is audited
    in a separate transaction after the rollback, so that failed attempts leave a trace."""
    try:
        with app.db.session() as session:
            if app.settings.topology is Topology.REPLICATED_PAIR:
                from fleetcron.services.writer import require_config_writer

                require_config_writer(app, session, note.action)
            yield session
            record(session, app, actor, note, success=True)
    except FleetcronError as exc:
        note.detail = {**note.detail, "error": exc.message}
        with app.db.session() as session:
            record(session, app, actor, note, success=False)
        log.info(
            "refused %s by %s: %s",
            note.action,
            actor.name,
            exc.message,
            extra={"action": note.action, "actor": actor.name},
        )
        raise


def record_failure(app: App, actor: Actor, note: AuditNote, error: FleetcronError) -> None:
    """Audit an attempt that failed before any transaction began (e.g. bad input)."""
    note.detail = {**note.detail, "error": error.message}
    with app.db.session() as session:
        record(session, app, actor, note, success=False)


def record_refused(
    app: App, actor: Actor, action: str, *, refused: int, reason: str, error: str
) -> None:
    """Audit ``actor``'s refused ``action`` (refused before the action began, e.g. by a
    route's role check). The caller writes one row for the 1st, 10th, 100th ... refusal of
    the same actor and action within a window, each with the count so far."""
    detail = {"refused": refused, "reason": reason, "error": error}
    with app.db.session() as session:
        record(session, app, actor, AuditNote(action, detail=detail), success=False)


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    action: str | None = None
    target: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def _filtered(query: Select[Any], f: AuditFilter) -> Select[Any]:
    if f.actor:
        query = query.where(AuditEvent.actor == f.actor)
    if f.action:
        query = query.where(AuditEvent.action.startswith(f.action, autoescape=True))
    if f.target:
        query = query.where(AuditEvent.target_name == f.target)
    if f.since:
        query = query.where(AuditEvent.at >= f.since)
    if f.until:
        query = query.where(AuditEvent.at < f.until)
    return query


@dataclass(frozen=True)
class AuditView:
    """One audit event as shown."""

    id: int
    at: datetime
    actor: str
    action: str
    success: bool
    job_name: str | None
    target_name: str | None
    detail: dict[str, Any]

    @classmethod
    def of(cls, row: AuditEvent) -> AuditView:
        return cls(
            row.id,
            row.at,
            row.actor,
            row.action,
            row.success,
            row.job_name,
            row.target_name,
            dict(row.detail),
        )


def list_event_views(
    app: App, actor: Actor, f: AuditFilter, *, limit: int = 100, offset: int = 0
) -> tuple[list[AuditView], int]:
    """Events matching the filter as shown, newest first, and how many match in all. The
    user name an anonymous refusal was tried with is left out for a caller who may not
    read users."""
    actor.authorize("audit.read")
    with app.db.read() as session:
        total: int = session.scalar(_filtered(select(func.count(AuditEvent.id)), f)) or 0
        rows = session.scalars(
            _filtered(select(AuditEvent), f)
            .order_by(AuditEvent.at.desc(), AuditEvent.id.desc())
            .limit(limit)
            .offset(offset)
        ).all()
        views = [AuditView.of(row) for row in rows]
    if not allowed(actor.role, "user.read"):
        for view in views:
            if view.actor == ANONYMOUS_ACTOR:
                view.detail.pop("user", None)
    return views, total
