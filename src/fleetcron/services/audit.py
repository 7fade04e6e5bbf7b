"""The audit log: every operator action, successful or not, appended and never changed.

Each event carries the project of the object it is about (``audit_events.project_id``,
migration 0037; None: the whole install): the note's own, else its object's
(``store.audit.object_project``), else, for an action on a project's objects, the project
the actor acted in (where the object was looked up: a removed job's, a refused attempt's).
A global role reads every event; a role in a project reads that project's events only
(``core.permissions``: ``audit.read`` is weighed in the project).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVarTuple

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.permissions import allowed, demand, is_project_action, visible_projects
from fleetcron.core.topology import Topology
from fleetcron.errors import FleetcronError, NotFound
from fleetcron.store.audit import append_event, object_project, project_ids
from fleetcron.store.schema import AuditEvent, Project

log = logging.getLogger(__name__)
Columns = TypeVarTuple("Columns")

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
    #: the project the event is about, when the action knows it (else found by
    #: :func:`project_of`)
    project_id: int | None = None


#: the nouns of the actions on a project's objects besides core.permissions' project
#: actions (stored per project, still authorized globally)
PROJECT_OBJECT_NOUNS = ("silence.", "blackout.", "notify.rule.")


def project_of(session: Session, actor: Actor, note: AuditNote) -> int | None:
    """The project ``note`` is about: its own, its object's, else for an action on a
    project's objects the project ``actor`` acted in; None: the whole install."""
    if note.project_id is not None:
        return note.project_id
    found = object_project(
        session, note.action, job_id=note.job_id, target_id=note.target_id, detail=note.detail
    )
    if found is not None:
        return found
    if is_project_action(note.action) or note.action.startswith(PROJECT_OBJECT_NOUNS):
        return project_ids(session, [actor.project]).get(actor.project)
    return None


def record(session: Session, app: App, actor: Actor, note: AuditNote, *, success: bool) -> None:
    """Append the event of ``note`` to the caller's transaction (the store's writer)."""
    event = AuditEvent(
        at=app.now(),
        actor=actor.name,
        action=note.action,
        success=success,
        job_id=note.job_id,
        job_name=note.job_name,
        target_id=note.target_id,
        target_name=note.target_name,
        detail=note.detail,
        project_id=project_of(session, actor, note),
    )
    append_event(session, event)


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
    #: only the events about this project's objects
    project: str | None = None


def _filtered(query: Select[*Columns], f: AuditFilter, project_id: int | None) -> Select[*Columns]:
    if project_id is not None:
        query = query.where(AuditEvent.project_id == project_id)
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
    #: the project the event is about; None: the whole install
    project: str | None = None

    @classmethod
    def of(cls, row: AuditEvent, project: str | None = None) -> AuditView:
        return cls(
            row.id,
            row.at,
            row.actor,
            row.action,
            row.success,
            row.job_name,
            row.target_name,
            dict(row.detail),
            project,
        )


def list_event_views(
    app: App, actor: Actor, f: AuditFilter, *, limit: int = 100, offset: int = 0
) -> tuple[list[AuditView], int]:
    """Events matching the filter as shown, newest first, and how many match in all: for
    a global role every event (``f.project``: that project's), for a role in projects only
    the events of the project named (else the one it acts in; NotFound for one it does not
    see). The user name an anonymous refusal was tried with is left out for a caller who
    may not read users."""
    with app.db.read() as session:
        pid = _readable_project(session, actor, f.project)
        total: int = session.scalar(_filtered(select(func.count(AuditEvent.id)), f, pid)) or 0
        listed = select(AuditEvent, Project.name).outerjoin(
            Project, Project.id == AuditEvent.project_id
        )
        rows = session.execute(
            _filtered(listed, f, pid)
            .order_by(AuditEvent.at.desc(), AuditEvent.id.desc())
            .limit(limit)
            .offset(offset)
        ).all()
        views = [AuditView.of(row[0], row[1]) for row in rows]
    if not allowed(actor.role, "user.read"):
        for view in views:
            if view.actor == ANONYMOUS_ACTOR:
                view.detail.pop("user", None)
    return views, total


def _readable_project(session: Session, actor: Actor, project: str | None) -> int | None:
    """The id of the project whose events ``actor`` reads (None: every event, for a
    global role naming no project); raises when it may not read them."""
    if project is None and visible_projects(actor) is None:
        actor.authorize("audit.read")
        return None
    name = project or actor.project
    demand(actor, "audit.read", name)
    found = project_ids(session, [name]).get(name)
    if found is None:
        raise NotFound("project", name, field="project")
    return found
