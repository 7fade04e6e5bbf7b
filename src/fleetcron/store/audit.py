"""The audit log's writer: the append-only insert, and retention's delete of old events.

There is no update path. Who may act and what an action records is decided above (in
:mod:`fleetcron.services.audit`); this module only writes the row, in the caller's
transaction, so that layers below the services (coordination) can audit too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from fleetcron.store.db import Database, Pruned, count_selected, delete_in_rounds
from fleetcron.store.schema import (
    AuditEvent,
    Blackout,
    Job,
    NotificationRule,
    Project,
    Run,
    Silence,
    Target,
)

__all__ = ["append_event", "object_project", "project_ids", "prune_events_older_than"]

#: (action prefix, detail key, the project of the object the key names by id): the objects
#: an event names in its detail only (migration 0037 fills the old events the same way)
BY_DETAIL: tuple[tuple[str, str, Callable[[int], Select[Any]]], ...] = (
    (
        "",
        "run_id",
        lambda i: select(Job.project_id).join(Run, Run.job_id == Job.id).where(Run.id == i),
    ),
    (
        "notify.rule.",
        "rule",
        lambda i: select(NotificationRule.project_id).where(NotificationRule.id == i),
    ),
    ("silence.", "silence", lambda i: select(Silence.project_id).where(Silence.id == i)),
    ("blackout.", "blackout", lambda i: select(Blackout.project_id).where(Blackout.id == i)),
)


def append_event(session: Session, event: AuditEvent) -> None:
    """Append one audit event to the caller's transaction."""
    if event.detail is None:
        event.detail = {}
    session.add(event)


def object_project(
    session: Session,
    action: str,
    *,
    job_id: int | None,
    target_id: int | None,
    detail: dict[str, Any],
) -> int | None:
    """The project of the object an event is about, as it is now: its job's, its
    target's, or that of the run, rule, silence or blackout window its detail names by
    id; None when it names none that exists."""
    if job_id is not None:
        found = session.scalar(select(Job.project_id).where(Job.id == job_id))
        if found is not None:
            return found
    if target_id is not None:
        found = session.scalar(select(Target.project_id).where(Target.id == target_id))
        if found is not None:
            return found
    for prefix, key, statement in BY_DETAIL:
        value = detail.get(key)
        if action.startswith(prefix) and isinstance(value, int) and not isinstance(value, bool):
            found = session.scalar(statement(value))
            if found is not None:
                return int(found)
    return None


def project_ids(session: Session, names: list[str]) -> dict[str, int]:
    """The ids of the projects ``names`` that exist."""
    if not names:
        return {}
    rows = session.execute(select(Project.name, Project.id).where(Project.name.in_(names)))
    return {name: pid for name, pid in rows}


def prune_events_older_than(
    db: Database,
    cutoff: datetime,
    *,
    batch: int,
    dry_run: bool,
    more: Callable[[], bool] | None = None,
) -> Pruned:
    """Delete (``dry_run``: count) the audit events recorded before ``cutoff``, ``batch``
    per transaction, oldest first through the ``at`` index; with ``more``, stop when it
    answers False before a chunk (the same budgeted rounds as the runs' retention)."""
    ids = select(AuditEvent.id).where(AuditEvent.at < cutoff).order_by(AuditEvent.at)
    if dry_run:
        return Pruned(count_selected(db, ids))
    return delete_in_rounds(db, AuditEvent, ids, batch, more)
