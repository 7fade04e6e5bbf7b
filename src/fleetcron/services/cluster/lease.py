"""Automatic failover (opt-in, ``FLEETCRON_LEASE_S``): the owner renews a lease in the
ownership rows of its shards (one statement for all of them); a standby takes over once
it has expired by the database clock.

The lease only decides *when* to change the owner; the change itself is the one a forced
takeover makes (:func:`fleetcron.coordination.ownership_change.change_owner`), and safety
still comes from the guard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from fleetcron.app import SYSTEM, App
from fleetcron.coordination.node import Node
from fleetcron.coordination.ownership_change import (
    change_owner,
    eligible,
    end_expired_owner_sessions,
    get_node,
    lease_expired,
    locked_ownership,
    renew_lease,
    waiting_detail,
)
from fleetcron.coordination.shard_moves import ShardMove, placement_step
from fleetcron.coordination.shard_rows import Ownership, renew_leases
from fleetcron.core.ownership import self_fence_after
from fleetcron.services.audit import AuditNote, record

__all__ = ["Lease"]

log = logging.getLogger(__name__)

#: What :meth:`Lease.step` returns when it renewed this node's lease (as owner, or by
#: taking over an expired one).
RENEWED = frozenset({"renewed", "draining", "took over"})


@dataclass
class Lease:
    """Opt-in automatic failover: the owner renews a lease in the ownership row; when it
    has expired by the database clock, an approved standby takes over with generation+1.
    Safety still comes from the guard: the lease only decides *when* to take over. An owner
    that could not renew within its lease stops claiming at once (:meth:`holds`)."""

    app: App
    node: Node
    #: End the sessions of an owner whose lease has expired before taking its lock
    #: (:func:`~fleetcron.coordination.ownership_change.end_sessions_of`).
    terminate_expired_owner: bool = True
    #: Renewed in each step's transaction besides the lease: this worker's member row
    #: (``--workers``; :class:`~fleetcron.services.cluster.workers.WorkerMembership`).
    also_renew: Callable[[Session], None] | None = None
    #: The members placement (``FLEETCRON_SHARD_PLACEMENT=members``): the nodes share the
    #: shards; no node takes every shard over, each takes and gives single shards.
    shared: bool = False
    #: This process places the node's shards after each renewal (worker 0 of a node with
    #: the members placement; :func:`~fleetcron.coordination.shard_moves.placement_step`).
    places_shards: bool = False
    _renewed_at: float | None = None

    @property
    def duration(self) -> float:
        assert self.app.settings.lease_s is not None
        return self.app.settings.lease_s

    def holds(self) -> bool:
        """Whether this node renewed its lease recently enough to keep claiming and
        executing: until :func:`~fleetcron.core.ownership.self_fence_after` the start of its
        last successful renewal, safely before the lease can expire by the database clock.
        Past that the scheduler kills its in-flight runs (self-fencing)."""
        return (
            self._renewed_at is not None
            and time.monotonic() - self._renewed_at < self_fence_after(self.duration)
        )

    def step(self) -> str:
        """Renew (as owner) or take over an expired lease (as standby); returns what happened.

        A renewal counts from the start of this step, and only once its transaction has
        committed: a commit that fails (the link cut between the update and its commit)
        leaves the lease where the last renewal put it by the database clock, and so must
        :meth:`holds`, or this node would keep executing up to a renewal interval past it."""
        started = time.monotonic()
        if self.terminate_expired_owner:
            self._end_expired_owner_sessions()
        with self.app.db.session() as session:
            outcome = self._step_in(session)
            if self.also_renew is not None:
                self.also_renew(session)
        if outcome in RENEWED:
            self._renewed_at = started
        if self.places_shards:
            self._place_shards()
        return outcome

    def _step_in(self, session: Session) -> str:
        me = self.node.identity
        # The owner renews the lease of every shard it owns in one statement, whatever
        # the shard count. Renewed while draining for a handoff too: the lease says this
        # node is alive; without it the owner would fence itself and kill the runs the
        # handoff is waiting for.
        draining = renew_leases(session, me.node_id, self.duration)
        if self.shared:
            # Shards move one by one (placement); a draining shard is on its way.
            return "renewed"
        if draining is not None:
            return "draining" if draining else "renewed"
        ownership = locked_ownership(session)
        if ownership is None or ownership.owner_node_id is None:
            return "no owner"
        if ownership.owner_node_id == me.node_id:  # it became the owner since the update
            renew_lease(session, ownership, self.duration)
            return "draining" if ownership.draining else "renewed"
        if not lease_expired(session, ownership):
            return "standby"
        if not eligible(get_node(session, me.node_id), me):
            return "not eligible"
        return self._fail_over(session, ownership)

    def _place_shards(self) -> None:
        """Give, take and hand over single shards as the members placement says, in a
        transaction of its own after the renewal's (a step waiting for a row never delays
        a renewal); a failed step changes nothing and is tried again at the next one."""
        me = self.node.identity
        try:
            with self.app.db.session() as session:
                if not eligible(get_node(session, me.node_id), me):
                    return
                moves = placement_step(
                    session,
                    me.node_id,
                    lease_s=self.duration,
                    drain=self.node.policy.drain_before_move,
                )
                for move in moves:
                    record(session, self.app, SYSTEM, _move_note(move), success=True)
        except Exception:
            log.exception(
                "cluster: the shard placement step failed; trying again at the next renewal",
                extra={"action": "cluster.placement_error"},
            )
            return
        for move in moves:
            log.info(
                "cluster: shard %d %s (%s -> %s), generation %d",
                move.shard,
                move.kind,
                move.from_node,
                move.to_node,
                move.generation,
                extra={"action": "cluster.shard_move", "shard": move.shard, "kind": move.kind},
            )

    def _end_expired_owner_sessions(self) -> None:
        """As a standby, before waiting for the ownership lock: if the owner's lease has
        expired by the database clock, end that owner's sessions (they would otherwise
        hold their locks until the server's idle timeout) and audit it."""
        if self.app.db.dialect != "postgresql":
            return
        me = self.node.identity
        with self.app.db.session() as session:
            if not eligible(get_node(session, me.node_id), me):
                return
            ended = end_expired_owner_sessions(session, me.node_id)
            if ended is None or not ended.pids:
                return
            record(
                session,
                self.app,
                SYSTEM,
                AuditNote(
                    "cluster.end_sessions",
                    detail={
                        "node": ended.node_id,
                        "sessions": len(ended.pids),
                        "pids": ended.pids,
                        "lease_expired_at": ended.lease_expired_at.isoformat(),
                    },
                ),
                success=True,
            )
        log.warning(
            "cluster: lease of %s expired; ended %d of its database sessions",
            ended.node_id,
            len(ended.pids),
            extra={"action": "cluster.end_sessions", "node": ended.node_id},
        )

    def _fail_over(self, session: Session, ownership: Ownership) -> str:
        me = self.node.identity
        old = get_node(session, str(ownership.owner_node_id))
        change = change_owner(
            session,
            ownership,
            old,
            me.node_id,
            kind="failover",
            requested_by="system",
            note=f"lease of {old.node_id} expired at {ownership.lease_expires_at}",
            now=self.app.now(),
        )
        renew_lease(session, ownership, self.duration)
        record(
            session,
            self.app,
            SYSTEM,
            AuditNote(
                "cluster.failover",
                detail={
                    "from": old.node_id,
                    "to": me.node_id,
                    "generation": ownership.generation,
                    "revoked_claims": change.revoked,
                    **waiting_detail(change.waiting),
                },
            ),
            success=True,
        )
        log.warning(
            "cluster: lease of %s expired; this node took over at generation %d",
            old.node_id,
            ownership.generation,
            extra={"action": "cluster.failover"},
        )
        return "took over"


def _move_note(move: ShardMove) -> AuditNote:
    """The audit event of one shard move (``cluster.shard_<kind>``)."""
    detail: dict[str, object] = {
        "shard": move.shard,
        "from": move.from_node,
        "to": move.to_node,
        "generation": move.generation,
    }
    if move.kind == "takeover":
        detail["revoked_claims"] = move.revoked
    return AuditNote(f"cluster.shard_{move.kind}", detail=detail)
