"""Every change of the ``cluster_ownership`` row, beside the guard that checks it.

:mod:`fleetcron.coordination.guard` reads the row under its lock in every run write; this
module is the only code that writes it, always under the same lock
(:func:`lock_ownership`), so a change of owner never interleaves with a run write:

- who may own the jobs (:func:`may_own`, :func:`eligible`);
- a transfer completing (:func:`complete_transfer`: the owner, and the generation when it
  changes) and the pending ones it supersedes;
- a forced change of owner (:func:`change_owner`), shared by the operator's forced
  takeover and the lease failover: the old owner's live claims are revoked and their runs
  fenced, the old owner is fenced, and the new owner waits for the older claims still
  before their deadline (unless they are cleared);
- maintenance (:func:`expire_claims`, :func:`complete_drained_handoff`);
- the lease (:func:`renew_lease`, :func:`lease_expired`) and the sessions of an owner whose
  lease has expired (:func:`end_expired_owner_sessions`).

Authorization, audit and logging are the callers' (:mod:`fleetcron.services.cluster.status`);
every function here works in the caller's transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from fleetcron.coordination.guard import UNFINISHED_CLAIM_STATES, db_now
from fleetcron.coordination.identity import NodeIdentity
from fleetcron.coordination.shard_rows import Ownership, shard_count, shard_rows
from fleetcron.errors import CoordinationError, NotFound
from fleetcron.store.db import application_name
from fleetcron.store.run_writes import fence_runs
from fleetcron.store.schema import ClusterNode, ClusterOwnership, ClusterTransfer, ExecutionClaim

log = logging.getLogger(__name__)

__all__ = [
    "LockHolder",
    "OwnerChange",
    "change_owner",
    "clear_claims",
    "complete_drained_handoff",
    "complete_transfer",
    "eligible",
    "end_expired_owner_sessions",
    "ensure_ownership_row",
    "expire_claims",
    "get_node",
    "lease_expired",
    "live_claims_of",
    "lock_ownership",
    "locked_ownership",
    "may_own",
    "ownership_lock_holders",
    "renew_lease",
    "supersede_pending",
    "unfinished_claims",
    "waiting_detail",
]


# -- the row and its lock ---------------------------------------------------------------------


def ensure_ownership_row(session: Session, now: datetime, *, shards: int | None = None) -> None:
    """Create the shards' ownership rows the first time a cluster node starts (one per
    shard, never a second one): ``shards`` is the installation's fixed count (read when
    not given)."""
    count = shards if shards is not None else shard_count(session)
    existing = set(session.scalars(select(ClusterOwnership.shard)))
    if existing:
        return
    session.add_all(
        ClusterOwnership(
            shard=shard, owner_node_id=None, generation=0, draining=False, updated_at=now
        )
        for shard in range(count)
    )


def locked_ownership(session: Session) -> Ownership | None:
    """Every shard's ownership row, locked for the rest of the transaction; None unless
    there is exactly one per shard (the guard then fails closed)."""
    rows = shard_rows(session, lock=True)
    if [r.shard for r in rows] != list(range(shard_count(session))):
        return None
    return Ownership(rows)


def lock_ownership(session: Session) -> Ownership:
    """Every shard's ownership row, locked; raises :class:`CoordinationError` unless there
    is exactly one per shard."""
    rows = shard_rows(session, lock=True)
    count = shard_count(session)
    if [r.shard for r in rows] != list(range(count)):
        raise CoordinationError(
            f"coordination state has {len(rows)} ownership rows, expected one for each of "
            f"the {count} shard(s); repair it first"
        )
    return Ownership(rows)


@dataclass(frozen=True)
class LockHolder:
    """A PostgreSQL session holding the ownership row's lock (``pg_locks``,
    ``pg_stat_activity``): what a standby waits for during a takeover."""

    pid: int
    application_name: str
    state: str
    since: datetime | None
    """When its transaction began."""
    blocking: int
    """How many sessions wait for it."""


def ownership_lock_holders(session: Session) -> list[LockHolder]:
    """Other sessions that lock ``cluster_ownership`` for update (PostgreSQL; none on
    SQLite), oldest transaction first."""
    if session.get_bind().dialect.name != "postgresql":
        return []
    rows = session.execute(
        text(
            "SELECT a.pid, a.application_name, a.state, a.xact_start, "
            "(SELECT count(*) FROM pg_stat_activity w "
            " WHERE a.pid = ANY(pg_blocking_pids(w.pid))) AS blocking "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'relation' AND l.granted "
            "AND l.relation = 'cluster_ownership'::regclass AND l.mode = 'RowShareLock' "
            "AND a.pid <> pg_backend_pid() ORDER BY a.xact_start"
        )
    ).all()
    return [
        LockHolder(
            int(r.pid), str(r.application_name or ""), str(r.state), r.xact_start, int(r.blocking)
        )
        for r in rows
    ]


def get_node(session: Session, node_id: str) -> ClusterNode:
    row = session.scalar(select(ClusterNode).where(ClusterNode.node_id == node_id))
    if row is None:
        raise NotFound("node", node_id)
    return row


# -- eligibility --------------------------------------------------------------------------------


def may_own(row: ClusterNode) -> bool:
    """Whether the node ``row`` may be handed the jobs: approved and not fenced."""
    return row.state == "approved" and row.fenced_at is None


def eligible(row: ClusterNode, me: NodeIdentity) -> bool:
    """Whether this node (``me``, registered as ``row``) may take the jobs over: it may own
    them and its fingerprint is the approved one."""
    return may_own(row) and row.fingerprint == me.fingerprint


# -- claims ---------------------------------------------------------------------------------------


def unfinished_claims(session: Session, generations: Mapping[int, int]) -> list[ExecutionClaim]:
    """Claims below their shard's generation in ``generations`` (shard -> generation) whose
    command may still run: not finished, deadline to come."""
    below = case(dict(generations), value=ExecutionClaim.shard, else_=max(generations.values()))
    return list(
        session.scalars(
            select(ExecutionClaim).where(
                ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
                ExecutionClaim.generation < below,
                ExecutionClaim.deadline_at > func.clock_timestamp(),
            )
        )
    )


def clear_claims(session: Session, claim_ids: Sequence[int]) -> int:
    """Mark claims ``cleared``: their commands are known to be gone before the deadline."""
    if not claim_ids:
        return 0
    result = session.execute(
        update(ExecutionClaim)
        .where(
            ExecutionClaim.id.in_(claim_ids),
            ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
        )
        .values(state="cleared", released_at=func.clock_timestamp())
    )
    return int(getattr(result, "rowcount", 0) or 0)


def waiting_detail(waiting: Sequence[ExecutionClaim]) -> dict[str, object]:
    """What the new owner will wait for: the audit says how long failover may take."""
    if not waiting:
        return {"waiting_claims": 0}
    return {
        "waiting_claims": len(waiting),
        "waiting_until": max(c.deadline_at for c in waiting).isoformat(),
    }


def live_claims_of(session: Session, node_id: str | None) -> int:
    """How many live claims the node holds."""
    return (
        session.scalar(
            select(func.count(ExecutionClaim.id)).where(
                ExecutionClaim.node_id == node_id, ExecutionClaim.state == "live"
            )
        )
        or 0
    )


def revoke_claims(
    session: Session,
    node_id: str,
    now: datetime,
    *,
    reason: str,
    shards: Collection[int] | None = None,
) -> int:
    """Revoke the node's live claims (of ``shards`` only, when given: a single shard
    moving) so its late writes are refused, and fence their runs."""
    query = select(ExecutionClaim.run_id).where(
        ExecutionClaim.node_id == node_id, ExecutionClaim.state == "live"
    )
    if shards is not None:
        query = query.where(ExecutionClaim.shard.in_(sorted(shards)))
    run_ids = list(session.scalars(query))
    if not run_ids:
        return 0
    session.execute(
        update(ExecutionClaim)
        .where(ExecutionClaim.run_id.in_(run_ids), ExecutionClaim.state == "live")
        .values(state="revoked", released_at=func.clock_timestamp())
    )
    fence_runs(
        session,
        run_ids,
        now,
        f"{reason}; its command ends by the claim deadline at the latest, and the new owner "
        "waits for that deadline before it starts this assignment",
    )
    return len(run_ids)


# -- transfers --------------------------------------------------------------------------------


def complete_transfer(
    session: Session, ownership: Ownership, transfer: ClusterTransfer, now: datetime
) -> None:
    """Make ``transfer``'s node the owner of every shard (each shard's generation + 1 when
    the owner changes, and for the first owner)."""
    if ownership.owner_node_id != transfer.to_node_id or ownership.generation == 0:
        ownership.advance()
    ownership.owner_node_id = transfer.to_node_id
    ownership.draining, ownership.transfer_id = False, None
    ownership.lease_expires_at = None
    ownership.updated_at = now
    transfer.state, transfer.completed_at = "completed", now
    transfer.generation_after = ownership.generation


def supersede_pending(session: Session, by: int, now: datetime, *, keep: int | None = None) -> None:
    """Mark every pending transfer but ``keep`` superseded by transfer ``by``."""
    for pending in session.scalars(
        select(ClusterTransfer).where(
            ClusterTransfer.state == "pending", ClusterTransfer.id != keep
        )
    ):
        pending.state, pending.completed_at = "superseded", now
        pending.note = f"superseded by transfer {by}"


@dataclass(frozen=True)
class OwnerChange:
    """What a forced change of owner did."""

    transfer: ClusterTransfer
    revoked: int
    """Live claims of the old owner revoked (their runs fenced)."""
    cleared: int
    """Older claims cleared because the operator verified the targets."""
    waiting: list[ExecutionClaim]
    """Older claims the new owner waits for (their deadline has not come)."""


def change_owner(
    session: Session,
    ownership: Ownership,
    old: ClusterNode,
    to_node_id: str,
    *,
    kind: str,
    requested_by: str,
    note: str,
    now: datetime,
    clear_waiting: bool = False,
) -> OwnerChange:
    """Move the jobs from ``old`` to ``to_node_id`` at once, under the lock (``ownership``
    locked by the caller): a transfer of ``kind`` (``takeover`` or ``failover``) recorded
    completed, pending ones superseded, the old owner's live claims revoked and their runs
    fenced, the old owner fenced (it must pass ``verify-rejoin``), the generation raised.
    With ``clear_waiting`` the older claims still before their deadline are cleared (the
    operator verified no command of theirs runs); otherwise the new owner waits for them."""
    transfer = ClusterTransfer(
        idempotency_key=uuid.uuid4().hex,
        kind=kind,
        from_node_id=old.node_id,
        to_node_id=to_node_id,
        requested_by=requested_by,
        requested_at=now,
        state="pending",
        note=note,
    )
    session.add(transfer)
    session.flush()
    supersede_pending(session, transfer.id, now, keep=transfer.id)
    label = "forced takeover" if kind == "takeover" else kind
    revoked = revoke_claims(session, old.node_id, now, reason=f"revoked by {label} {transfer.id}")
    waiting = unfinished_claims(session, {s: g + 1 for s, g in ownership.generations.items()})
    cleared = 0
    if clear_waiting:
        cleared = clear_claims(session, [c.id for c in waiting])
        waiting = []
    old.fenced_at = now
    complete_transfer(session, ownership, transfer, now)
    return OwnerChange(transfer, revoked, cleared, waiting)


# -- maintenance ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Expired:
    run_id: int
    node_id: str
    generation: int


def expire_claims(session: Session, now: datetime) -> int:
    """Expire the live claims past their deadline (database clock) and fence their runs;
    returns how many expired. Claims another maintainer holds locked are left to it."""
    expired = [
        _Expired(r.run_id, r.node_id, r.generation)
        for r in session.execute(
            select(ExecutionClaim.run_id, ExecutionClaim.node_id, ExecutionClaim.generation)
            .where(
                ExecutionClaim.state == "live", ExecutionClaim.deadline_at < func.clock_timestamp()
            )
            .with_for_update(skip_locked=True)
        )
    ]
    if not expired:
        return 0
    ids = [r.run_id for r in expired]
    session.execute(
        update(ExecutionClaim)
        .where(ExecutionClaim.run_id.in_(ids), ExecutionClaim.state == "live")
        .values(state="expired", released_at=func.clock_timestamp())
    )
    for r in expired:
        fence_runs(
            session,
            [r.run_id],
            now,
            f"claim of node {r.node_id} (generation {r.generation}) expired before the run "
            "was recorded as finished",
        )
    return len(expired)


def complete_drained_handoff(session: Session, now: datetime) -> ClusterTransfer | None:
    """Complete the pending handoff once the draining owner holds no live claim; returns
    the completed transfer, or None when there is nothing to complete."""
    ownership = locked_ownership(session)
    if ownership is None or not ownership.draining or ownership.transfer_id is None:
        return None
    live = live_claims_of(session, ownership.owner_node_id)
    transfer = session.get(ClusterTransfer, ownership.transfer_id)
    if live or transfer is None or transfer.state != "pending":
        return None
    complete_transfer(session, ownership, transfer, now)
    return transfer


# -- the lease ----------------------------------------------------------------------------------


def renew_lease(session: Session, ownership: Ownership, lease_s: float) -> None:
    """Extend the owner's lease on every shard to ``lease_s`` from now by the database
    clock (the rows already locked; the owner's periodic renewal is
    :func:`~fleetcron.coordination.shard_rows.renew_leases`, one statement)."""
    ownership.lease_expires_at = db_now(session) + timedelta(seconds=lease_s)


def lease_expired(session: Session, ownership: Ownership) -> bool:
    """Whether the owner's lease has expired by the database clock (no lease: never; the
    earliest shard's lease counts)."""
    return ownership.lease_expires_at is not None and ownership.lease_expires_at <= db_now(session)


@dataclass(frozen=True)
class EndedSessions:
    """The sessions of an expired owner that a standby ended."""

    node_id: str
    lease_expired_at: datetime
    pids: list[int]


def end_expired_owner_sessions(session: Session, me: str) -> EndedSessions | None:
    """End (``pg_terminate_backend``) the PostgreSQL sessions of the owner when its lease
    has expired by the database clock and it is not ``me``; None when it has not.

    Safe: the owner stopped claiming and killed its runs before its lease could expire
    (self-fencing), so what its sessions still hold is an open transaction whose rollback
    is the safe outcome (it wrote nothing), or a commit that either happened or did not.
    Its sessions are recognized by their ``application_name`` (``fleetcron:<node id>:``).
    PostgreSQL lets a role end the sessions of the same role, or any non-superuser's with
    ``pg_signal_backend``; without the privilege nothing is ended (the server's idle and
    statement timeouts still release the locks within half the lease)."""
    row = session.execute(
        select(ClusterOwnership.owner_node_id, ClusterOwnership.lease_expires_at)
        .order_by(ClusterOwnership.lease_expires_at.asc().nulls_last())
        .limit(1)
    ).one_or_none()
    if row is None or row.owner_node_id in (None, me) or row.lease_expires_at is None:
        return None
    if row.lease_expires_at > db_now(session):
        return None
    pids = end_sessions_of(session, str(row.owner_node_id))
    return EndedSessions(str(row.owner_node_id), row.lease_expires_at, pids)


def end_sessions_of(session: Session, node_id: str) -> list[int]:
    """End the PostgreSQL sessions of node ``node_id`` in this database, recognized by
    their ``application_name`` (``fleetcron:<node id>:``); the pids ended. Without the
    privilege to end them, none (logged): the server's timeouts still release their locks."""
    prefix = application_name(node_id, "")
    try:
        with session.begin_nested():
            return [
                int(pid)
                for pid, ended in session.execute(
                    text(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE starts_with(application_name, :prefix) "
                        "AND pid <> pg_backend_pid() AND datname = current_database()"
                    ),
                    {"prefix": prefix},
                )
                if ended
            ]
    except DBAPIError as exc:  # e.g. permission denied
        log.warning(
            "cluster: cannot end the sessions of %s: %s",
            node_id,
            exc.orig,
            extra={"action": "cluster.end_sessions_refused"},
        )
        return []
