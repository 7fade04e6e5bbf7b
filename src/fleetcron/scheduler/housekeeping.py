"""Periodic work beside the ticks: lease renewal, cluster maintenance, retention
(runs, audit events when configured, expired web sessions), compaction of the run counts.

Called before every tick on the scheduler's database thread; each task has its own
interval and is guarded so that one failing never stops the others or the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fleetcron.app import SYSTEM, App
from fleetcron.services.accounts import sessions
from fleetcron.services.cluster import status as cluster
from fleetcron.services.runs import retention
from fleetcron.services.runs.count_compaction import compact_counts

log = logging.getLogger(__name__)

#: Retention runs at most this often (seconds): pruning is cheap but need not be constant.
PRUNE_EVERY_S = 3600.0
#: How long one retention round may hold the database thread before a tick (seconds). A
#: round with more to delete stops at it (between two chunks of ``prune_batch`` rows) and
#: the next call continues, so an hour of a large fleet's runs (300,000 rows at 5,000
#: targets every minute) is deleted over a few hundred ticks instead of holding the claim
#: of due runs for half a minute.
PRUNE_BUDGET_S = 0.25
#: The run counts' shards of old minutes are folded this often (seconds), in rounds of at
#: most ``COMPACT_BUDGET_S`` (a round with more to fold continues at the next call).
COMPACT_EVERY_S = 60.0
COMPACT_BUDGET_S = 0.1


@dataclass
class _Periodic:
    name: str
    every_s: float
    task: Callable[[], object]
    due: float = 0.0


@dataclass
class Housekeeping:
    app: App
    lease: cluster.Lease | None = None
    extra: list[tuple[str, float, Callable[[], object]]] = field(default_factory=list)
    #: The time source of the intervals and of the retention budget (tests inject one).
    clock: Callable[[], float] = time.monotonic
    #: False in a node's workers other than worker 0 (``--workers``): each renews its
    #: lease, and worker 0 alone does the node's maintenance and retention.
    node_wide: bool = True

    def __post_init__(self) -> None:
        s = self.app.settings
        self._tasks: list[_Periodic] = []
        self._lease: list[_Periodic] = []
        if self.lease is not None:
            self._lease.append(_Periodic("lease", s.lease_renew_s, self.lease.step))
            self._tasks.extend(self._lease)
        self._tasks.extend(_Periodic(name, every, task) for name, every, task in self.extra)
        if not self.node_wide:
            return
        if s.cluster:
            self._tasks.append(
                _Periodic(
                    "cluster maintenance",
                    s.maintenance_interval_s,
                    lambda: cluster.maintain(self.app),
                )
            )
        self._retention = _Periodic("retention", PRUNE_EVERY_S, self._prune)
        self._tasks.append(self._retention)
        self._compaction = _Periodic("run counts compaction", COMPACT_EVERY_S, self._compact)
        self._tasks.append(self._compaction)

    def _compact(self) -> None:
        if not compact_counts(self.app, budget_s=COMPACT_BUDGET_S, clock=self.clock):
            self._compaction.due = 0.0  # more to fold: continue at the next call

    def _prune(self) -> None:
        result = retention.prune(self.app, SYSTEM, budget_s=PRUNE_BUDGET_S, clock=self.clock)
        if not result.complete:
            self._retention.due = 0.0  # more to delete: continue at the next call
            return
        sessions.prune_expired(self.app)

    def __call__(self) -> None:
        self._run_due(self._tasks)

    def renew_if_due(self) -> float | None:
        """The lease renewal alone, when it is due: what the scheduler runs on its database
        thread between a tick's claim batches, so that a tick claiming thousands of slots
        never holds the renewal back past the lease (the node would fence itself). Returns
        the seconds until it is due again (by :attr:`clock`), the time the scheduler's
        renewal task may sleep: a renewal made meanwhile before a tick only moves that
        time later, and the task then sleeps again. ``None`` without a lease."""
        if not self._lease:
            return None
        self._run_due(self._lease)
        (lease,) = self._lease
        return max(lease.due - self.clock(), 0.0)

    def _run_due(self, periodics: list[_Periodic]) -> None:
        now = self.clock()
        for periodic in periodics:
            if now < periodic.due:
                continue
            periodic.due = now + periodic.every_s
            try:
                periodic.task()
            except Exception:
                log.exception(
                    "housekeeping: %s failed; will retry",
                    periodic.name,
                    extra={"action": "housekeeping.error"},
                )
