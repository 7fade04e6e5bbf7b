"""Retention: prune old runs (by age, and beyond a count per assignment) and, when
configured, old audit events — in small batches, so no single delete holds a long lock.

This module is the only operation that deletes runs or audit events; the deletes
themselves are the store's (:mod:`fleetcron.store.run_writes`, :mod:`fleetcron.store.audit`).
Runs still queued or running are never pruned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.audit import prune_events_older_than
from fleetcron.store.run_writes import prune_runs_beyond, prune_runs_older_than

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


def prune(app: App, actor: Actor, *, dry_run: bool = False) -> PruneResult:
    """Apply the retention settings once; with ``dry_run`` only count."""
    actor.authorize("settings.manage")
    s = app.settings
    now = app.now()
    batch = s.prune_batch
    counts = [
        prune_runs_older_than(
            app.db, now - timedelta(days=s.retention_days), batch=batch, dry_run=dry_run
        ),
        prune_runs_beyond(app.db, s.retention_max_runs, batch=batch, dry_run=dry_run),
    ]
    if s.audit_retention_days is not None:
        cutoff = now - timedelta(days=s.audit_retention_days)
        counts.append(prune_events_older_than(app.db, cutoff, batch=batch, dry_run=dry_run))
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
