"""Members in the database: a scheduler process registers (``cluster_members``), keeps its
heartbeat lease, and reads what it should own (:func:`decision`).

A member is live while its lease, renewed by :func:`heartbeat` on the database clock (one
``UPDATE``), is ahead of that clock; every member reads the same live members and the same
shard owners, and :func:`fleetcron.core.members.decide` turns them into one placement.
Nothing here takes or gives up a shard: that is
:mod:`fleetcron.coordination.shard_moves` (the members placement). Every function works
in the caller's transaction.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from fleetcron.coordination.guard import db_now
from fleetcron.coordination.shard_rows import lease_until, shard_count
from fleetcron.core.members import Decision, decide, member_name
from fleetcron.core.shards import Member
from fleetcron.store.schema import ClusterMember, ClusterOwnership

__all__ = ["decision", "heartbeat", "join", "leave", "live_members", "set_weight", "shard_owners"]


def join(session: Session, node_id: str, worker: int, *, weight: float, lease_s: float) -> None:
    """Register worker ``worker`` of node ``node_id`` as a member with ``weight``, live for
    ``lease_s``; a member registered before (a restarted process) starts afresh."""
    if weight < 0:
        raise ValueError(f"weight must be 0 or more, got {weight}")
    member_name(node_id, worker)  # the same checks as its name
    now = db_now(session)
    row = session.scalars(
        select(ClusterMember)
        .where(ClusterMember.node_id == node_id, ClusterMember.worker == worker)
        .with_for_update()
    ).one_or_none()
    if row is None:
        row = ClusterMember(node_id=node_id, worker=worker)
        session.add(row)
    row.weight, row.started_at, row.heartbeat_at = weight, now, now
    row.lease_expires_at = lease_until(session, lease_s)
    session.flush()


def heartbeat(session: Session, node_id: str, worker: int, lease_s: float) -> bool:
    """Renew the member's lease to ``lease_s`` from now by the database clock, in one
    statement; False when the member is not registered (it left, or was removed: it must
    :func:`join` again)."""
    renewed = session.scalars(
        update(ClusterMember)
        .where(ClusterMember.node_id == node_id, ClusterMember.worker == worker)
        .values(heartbeat_at=func.clock_timestamp(), lease_expires_at=lease_until(session, lease_s))
        .returning(ClusterMember.id)
        .execution_options(synchronize_session=False)
    ).all()
    return bool(renewed)


def set_weight(session: Session, node_id: str, worker: int, weight: float) -> bool:
    """Change the member's weight (0: it drains, its shards are placed on the others);
    False when it is not registered."""
    if weight < 0:
        raise ValueError(f"weight must be 0 or more, got {weight}")
    changed = session.scalars(
        update(ClusterMember)
        .where(ClusterMember.node_id == node_id, ClusterMember.worker == worker)
        .values(weight=weight)
        .returning(ClusterMember.id)
        .execution_options(synchronize_session=False)
    ).all()
    return bool(changed)


def leave(session: Session, node_id: str, worker: int) -> None:
    """Remove the member (a process that stops cleanly); its shards are placed afresh."""
    session.execute(
        delete(ClusterMember).where(
            ClusterMember.node_id == node_id, ClusterMember.worker == worker
        )
    )


def live_members(session: Session) -> list[Member]:
    """The members whose lease is ahead of the database clock, by name."""
    rows = session.execute(
        select(ClusterMember.node_id, ClusterMember.worker, ClusterMember.weight)
        .where(ClusterMember.lease_expires_at > func.clock_timestamp())
        .order_by(ClusterMember.node_id, ClusterMember.worker)
    ).all()
    return [Member(member_name(node_id, worker), float(weight)) for node_id, worker, weight in rows]


def shard_owners(session: Session) -> dict[int, str | None]:
    """Each shard's owner as its ownership row names it (read without a lock)."""
    rows = session.execute(select(ClusterOwnership.shard, ClusterOwnership.owner_node_id))
    return {shard: owner for shard, owner in rows}


def decision(session: Session, node_id: str, worker: int) -> Decision:
    """What member ``worker`` of ``node_id`` should own now, from the live members and the
    shards' owners read in this transaction (:func:`fleetcron.core.members.decide`)."""
    return decide(
        member_name(node_id, worker),
        shard_count(session),
        live_members(session),
        shard_owners(session),
    )
