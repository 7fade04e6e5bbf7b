"""Compaction of the run counts: the shards of minutes older than a few minutes folded
into one row per minute and status (:func:`fleetcron.store.run_counts.compact`), so
health's day of counts reads about 1,440 rows per status, not one per shard as well.

Run by the scheduler's housekeeping (node-wide tasks), in small batches, each its own
transaction, within a time budget: it never holds the claim of due runs for long, and on
PostgreSQL it skips the count rows a writer holds. In a replicated pair only the owner
compacts: the counts travel as rows, and two nodes folding the same minute would write
the same compacted row.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from fleetcron.app import App
from fleetcron.store import run_counts

#: Minutes younger than this keep one row per shard (their writers are busy with them).
COMPACT_AFTER = timedelta(minutes=5)
#: Count rows folded per transaction.
BATCH = 500


def compact_counts(
    app: App, *, budget_s: float, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Fold batches of old count rows until none is left (True) or ``budget_s`` seconds
    have passed (False: the caller continues later)."""
    from fleetcron.services.writer import pair_standby

    if pair_standby(app):
        return True
    now = app.now()
    before = now.replace(second=0, microsecond=0) - COMPACT_AFTER
    deadline = clock() + budget_s
    while True:
        with app.db.session() as session:
            folded = run_counts.compact(session, before=before, limit=BATCH)
        if folded < BATCH:
            return True
        if clock() >= deadline:
            return False
