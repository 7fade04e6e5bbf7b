"""The audit log's writer: the append-only insert, and retention's delete of old events.

There is no update path. Who may act and what an action records is decided above (in
:mod:`fleetcron.services.audit`); this module only writes the row, in the caller's
transaction, so that layers below the services (coordination) can audit too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.store.db import Database, Pruned, count_selected, delete_in_rounds
from fleetcron.store.schema import AuditEvent

__all__ = ["append_event", "prune_events_older_than"]


def append_event(
    session: Session,
    *,
    at: datetime,
    actor: str,
    action: str,
    success: bool,
    job_id: int | None = None,
    job_name: str | None = None,
    target_id: int | None = None,
    target_name: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append one audit event to the caller's transaction."""
    session.add(
        AuditEvent(
            at=at,
            actor=actor,
            action=action,
            success=success,
            job_id=job_id,
            job_name=job_name,
            target_id=target_id,
            target_name=target_name,
            detail=detail if detail is not None else {},
        )
    )


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
