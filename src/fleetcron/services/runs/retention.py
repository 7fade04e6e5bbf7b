"""Retention: prune old runs (by age, and beyond a count per assignment), when configured
old audit events, and incidents resolved longer ago than ``incident_retention_days`` (with
their targets and notices) — in small batches, so no single delete holds a long lock,
and, when the caller gives a time budget, in rounds that stop at it (the scheduler's
housekeeping gives one, so an hour of a large fleet's runs never holds its database
thread for long: the next tick continues).

This module is the only operation that deletes runs, audit events or incidents; the
deletes themselves are the store's (:mod:`fleetcron.store.run_writes`,
:mod:`fleetcron.store.audit`, ``delete_in_rounds`` for incidents). Runs still queued or
running and open incidents are never pruned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.audit import prune_events_older_than
from fleetcron.store.db import count_selected, delete_in_rounds
from fleetcron.store.run_writes import Pruned, prune_runs_beyond, prune_runs_older_than
from fleetcron.store.schema import Incident, IncidentNotice, IncidentTarget

log = logging.getLogger(__name__)

ACTIVE = statuses.ACTIVE


@dataclass(frozen=True)
class PruneResult:
    runs_by_age: int
    runs_by_count: int
    audit_events: int
    dry_run: bool
    #: False when the round stopped at its time budget with rows left to delete: the next
    #: round continues (the scheduler's housekeeping calls it again at its next tick).
    complete: bool = True
    #: Resolved incidents pruned (their targets and notices went with them).
    incidents: int = 0

    @property
    def total(self) -> int:
        return self.runs_by_age + self.runs_by_count + self.audit_events + self.incidents


def prune(
    app: App,
    actor: Actor,
    *,
    dry_run: bool = False,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PruneResult:
    """Apply the retention settings once; with ``dry_run`` only count.

    Runs and audit events are deleted ``prune_batch`` per transaction. With ``budget_s``,
    no chunk starts once ``budget_s`` seconds (by ``clock``) have passed since the call
    began: the round stops, ``complete`` is False, and the next call continues where it
    left off (the oldest rows first; nothing newer than the limits is touched either way).
    Audit events are pruned only in a round whose runs were all done, in the same chunks
    under the same budget."""
    actor.authorize("settings.manage")
    result = _passes(app, dry_run=dry_run, more=_within(budget_s, clock))
    if not dry_run and result.total:
        _note(app, actor, result)
    return result


def _within(budget_s: float | None, clock: Callable[[], float]) -> Callable[[], bool] | None:
    """Whether the round's budget allows another chunk (None: no budget)."""
    if budget_s is None:
        return None
    deadline = clock() + budget_s

    def within_budget() -> bool:
        return clock() < deadline

    return within_budget


def _passes(app: App, *, dry_run: bool, more: Callable[[], bool] | None) -> PruneResult:
    """Runs by age, then beyond the per-assignment cap, then audit events (when
    configured), then resolved incidents: each pass only once the ones before it are
    done, all under the same budget."""
    s = app.settings
    now = app.now()
    batch = s.prune_batch
    by_age = prune_runs_older_than(
        app.db, now - timedelta(days=s.retention_days), batch=batch, dry_run=dry_run, more=more
    )
    by_count = Pruned(0, complete=False)
    if by_age.complete:
        by_count = prune_runs_beyond(
            app.db, s.retention_max_runs, batch=batch, dry_run=dry_run, more=more
        )
    audit = Pruned(0)
    complete = by_age.complete and by_count.complete
    if complete and s.audit_retention_days is not None:
        cutoff = now - timedelta(days=s.audit_retention_days)
        audit = prune_events_older_than(app.db, cutoff, batch=batch, dry_run=dry_run, more=more)
        complete = audit.complete
    incidents = Pruned(0)
    if complete:
        cutoff = now - timedelta(days=s.incident_retention_days)
        incidents = prune_incidents(app, cutoff, batch=batch, dry_run=dry_run, more=more)
        complete = incidents.complete
    return PruneResult(
        by_age.count, by_count.count, audit.count, dry_run, complete, incidents.count
    )


def _note(app: App, actor: Actor, result: PruneResult) -> None:
    """The audit note and the log line of a round that deleted something."""
    note = AuditNote(
        "retention.prune",
        detail={
            "runs_by_age": result.runs_by_age,
            "runs_by_count": result.runs_by_count,
            "audit_events": result.audit_events,
            "incidents": result.incidents,
            "complete": result.complete,
        },
    )
    with audited(app, actor, note):
        pass
    log.info("retention: pruned %d row(s)", result.total, extra={"action": "retention.prune"})


def prune_incidents(
    app: App,
    cutoff: datetime,
    *,
    batch: int,
    dry_run: bool,
    more: Callable[[], bool] | None = None,
) -> Pruned:
    """Delete (``dry_run``: count) the incidents resolved before ``cutoff``, oldest first
    through ``ix_incidents_resolved_at``, ``batch`` per transaction, each with its
    targets and notices in the same transaction; with ``more``, stop when it answers False
    before a chunk. Open incidents are never touched; the delivery log keeps its rows
    (their ``incident_id`` then names an incident no longer kept)."""
    ids = (
        select(Incident.id)
        .where(Incident.status == "resolved", Incident.resolved_at < cutoff)
        .order_by(Incident.resolved_at)
    )
    if dry_run:
        return Pruned(count_selected(app.db, ids))

    def delete_chunk(session: Session, chunk: list[int]) -> None:
        session.execute(delete(IncidentTarget).where(IncidentTarget.incident_id.in_(chunk)))
        session.execute(delete(IncidentNotice).where(IncidentNotice.incident_id.in_(chunk)))
        session.execute(delete(Incident).where(Incident.id.in_(chunk)))

    return delete_in_rounds(app.db, Incident, ids, batch, more, delete_chunk=delete_chunk)
