"""A node's worker processes (``fleetcron scheduler --workers N``): which shards each one
executes, and its row among the members.

The node owns the shards (the ownership guard, claims and generations are the node's, as
with one process); its workers split their execution: worker ``i`` claims and starts only
the runs of the shards :func:`fleetcron.core.members.worker_shards` gives it, each with
its own event loop, database connections and pooled SSH connections, so every core of
the machine executes. Whatever the split, every run write is still decided by the guard
under the lock of its shards' rows, and a due slot is still claimed by one transaction
only (its assignment row is locked, skipping rows another worker holds, and a run's slot
is unique), so a wrong or overlapping split could cost affinity, never a second run.

Each worker registers in ``cluster_members`` (``fleetcron cluster members`` lists it with
its heartbeat) and renews its row in the lease renewal's transaction (or, without
automatic failover, in one of its own); a worker that stops cleanly removes it. Its row
is for operators to see, and with the members placement worker 0's row (weighted by the
worker count) stands for its node (:mod:`fleetcron.coordination.shard_moves`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.coordination import members
from fleetcron.coordination.shard_rows import DEFAULT_SHARDS, fixed_count, shard_count
from fleetcron.core.members import Worker, worker_shards
from fleetcron.core.topology import Topology
from fleetcron.errors import InvalidInput

__all__ = ["WorkerMembership", "default_count", "shards_of", "usable_cores"]

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and
    ``taskset`` narrow), not the machine's count."""
    return len(os.sched_getaffinity(0))


def default_count(app: App, cores: int) -> int:
    """How many worker processes ``--workers`` left unset starts: on a cluster sharing
    PostgreSQL, one per core (``cores``), at most the installation's shard count (or, before
    it is fixed, the count it will get); one on SQLite and in a replicated pair (one shard:
    nothing to split) and outside a cluster."""
    settings = app.settings
    if (
        not settings.cluster
        or app.db.dialect != "postgresql"
        or settings.topology is Topology.REPLICATED_PAIR
    ):
        return 1
    with app.db.read() as session:
        shards = fixed_count(session) or settings.shards or DEFAULT_SHARDS
    return max(1, min(cores, shards))


def shards_of(app: App, node_id: str, worker: Worker) -> frozenset[int]:
    """The shards ``worker`` of node ``node_id`` executes."""
    with app.db.read() as session:
        count = shard_count(session)
    if worker.count > count:
        raise InvalidInput(
            f"workers: {worker.count} worker processes need at least as many shards; this "
            f"installation has {count} (fixed when it was created): use --workers {count} "
            "or fewer",
            field="workers",
            value=str(worker.count),
            allowed=f"1 to {count}",
        )
    return worker_shards(node_id, worker.count, count)[worker.index]


@dataclass
class WorkerMembership:
    """The worker's row in ``cluster_members``: joined at start, renewed as a periodic
    task, removed at a clean stop. Losing it never stops the worker (it is a view)."""

    app: App
    node_id: str
    worker: Worker

    @property
    def weight(self) -> float:
        """Worker 0 stands for its node among the members, weighted by the node's worker
        count (its share of the shards with the members placement); the others, 0."""
        return float(self.worker.count) if self.worker.first else 0.0

    def _lease_s(self) -> float:
        settings = self.app.settings
        return settings.lease_s or 3 * settings.maintenance_interval_s

    def join(self) -> None:
        with self.app.db.session() as session:
            members.join(
                session,
                self.node_id,
                self.worker.index,
                weight=self.weight,
                lease_s=self._lease_s(),
            )

    def heartbeat(self) -> None:
        """Renew the row in a transaction of its own (a node without automatic failover:
        no lease to share a transaction with)."""
        with self.app.db.session() as session:
            self.renew_in(session)

    def renew_in(self, session: Session) -> None:
        """Renew the row in the caller's transaction (the lease step's, with automatic
        failover: one transaction, so a heartbeat stuck on a cut link never delays the
        lease renewal that keeps the node from fencing itself); join again if it is gone."""
        index, lease_s = self.worker.index, self._lease_s()
        if not members.heartbeat(session, self.node_id, index, lease_s):
            members.join(session, self.node_id, index, weight=self.weight, lease_s=lease_s)

    def leave(self) -> None:
        try:
            with self.app.db.session() as session:
                members.leave(session, self.node_id, self.worker.index)
        except Exception:
            log.exception(
                "cluster: could not remove worker %d's member row",
                self.worker.index,
                extra={"action": "cluster.member_leave"},
            )
