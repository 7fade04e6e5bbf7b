"""Retention: prune old runs (by age, and beyond a count per assignment) and, when
configured, old audit events — in small batches, so no single delete holds a long lock.

This module is the only place that deletes runs or audit events. Runs still queued or
running are never pruned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.schema import AuditEvent, Run

log = logging.getLogger(__name__)

ACTIVE = statuses.ACTIVE


@dataclass(frozen=True)
class PruneResult:
    runs_by_age: int
    runs_by_count: int
    audit_events: int
    dry_run: bool

    @property
    def total(self) -> int:
        return self.runs_by_age + self.runs_by_count + self.audit_events


def _old_runs(cutoff: datetime) -> Any:
    return select(Run.id).where(Run.scheduled_for < cutoff, Run.status.not_in(ACTIVE))


def _excess_runs(keep: int) -> Any:
    ranked = (
        select(
            Run.id,
            func.row_number()
            .over(
                partition_by=Run.assignment_id, order_by=(Run.scheduled_for.desc(), Run.id.desc())
            )
            .label("n"),
        )
        .where(Run.status.not_in(ACTIVE))
        .subquery()
    )
    return select(ranked.c.id).where(ranked.c.n > keep)


def _old_audit(cutoff: datetime) -> Any:
    return select(AuditEvent.id).where(AuditEvent.at < cutoff)


def _count(app: App, ids: Any) -> int:
    with app.db.read() as session:
        return session.scalar(select(func.count()).select_from(ids.subquery())) or 0


def _delete_in_batches(app: App, model: Any, ids: Any, batch: int) -> int:
    removed = 0
    while True:
        with app.db.session() as session:
            chunk = list(session.scalars(ids.limit(batch)))
            if not chunk:
                return removed
            session.execute(delete(model).where(model.id.in_(chunk)))
        removed += len(chunk)
        if len(chunk) < batch:
            return removed


def prune(app: App, actor: Actor, *, dry_run: bool = False) -> PruneResult:
    """Apply the retention settings once; with ``dry_run`` only count."""
    actor.authorize("settings.manage")
    s = app.settings
    now = app.now()
    queries: list[tuple[Any, Any]] = [
        (Run, _old_runs(now - timedelta(days=s.retention_days))),
        (Run, _excess_runs(s.retention_max_runs)),
    ]
    if s.audit_retention_days is not None:
        queries.append((AuditEvent, _old_audit(now - timedelta(days=s.audit_retention_days))))
    if dry_run:
        counts = [_count(app, ids) for _, ids in queries]
    else:
        counts = [_delete_in_batches(app, model, ids, s.prune_batch) for model, ids in queries]
    result = PruneResult(counts[0], counts[1], counts[2] if len(counts) > 2 else 0, dry_run)
    if not dry_run and result.total:
        note = AuditNote(
            "retention.prune",
            detail={
                "runs_by_age": result.runs_by_age,
                "runs_by_count": result.runs_by_count,
                "audit_events": result.audit_events,
            },
        )
        with audited(app, actor, note):
            pass
        log.info("retention: pruned %d row(s)", result.total, extra={"action": "retention.prune"})
    return result
