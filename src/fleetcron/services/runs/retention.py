"""Retention: prune old runs (by age, and beyond a count per assignment) and, when
configured, old audit events — in small batches, so no single delete holds a long lock,
and, when the caller gives a time budget, in rounds that stop at it (the scheduler's
housekeeping gives one, so an hour of a large fleet's runs never holds its database
thread for long: the next tick continues).

This module is the only operation that deletes runs or audit events; the deletes
themselves are the store's (:mod:`fleetcron.store.run_writes`, :mod:`fleetcron.store.audit`).
Runs still queued or running are never pruned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.audit import prune_events_older_than
from fleetcron.store.run_writes import Pruned, prune_runs_beyond, prune_runs_older_than

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

    @property
    def total(self) -> int:
        return self.runs_by_age + self.runs_by_count + self.audit_events


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
    s = app.settings
    now = app.now()
    batch = s.prune_batch
    more: Callable[[], bool] | None = None
    if budget_s is not None:
        deadline = clock() + budget_s

        def within_budget() -> bool:
            return clock() < deadline

        more = within_budget
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
    result = PruneResult(by_age.count, by_count.count, audit.count, dry_run, complete)
    if not dry_run and result.total:
        note = AuditNote(
            "retention.prune",
            detail={
                "runs_by_age": result.runs_by_age,
                "runs_by_count": result.runs_by_count,
                "audit_events": result.audit_events,
                "complete": result.complete,
            },
        )
        with audited(app, actor, note):
            pass
        log.info("retention: pruned %d row(s)", result.total, extra={"action": "retention.prune"})
    return result
