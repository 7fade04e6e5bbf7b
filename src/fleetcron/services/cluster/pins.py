"""Operator pins of shards to nodes (``fleetcron cluster shard move S --to NODE``,
``cluster shard unpin S``; ``FLEETCRON_SHARD_PLACEMENT=members`` only).

A pin is a row of ``shard_pins`` and nothing else: it changes the placement every node
computes (:func:`fleetcron.core.members.decide`), and the shard then moves as any other
by :mod:`fleetcron.coordination.shard_moves` (its owner drains it and hands it over once
its claims are done). A pin to a node that is not an eligible live member (not running,
drained, fenced, no longer approved) is ignored and the shard placed as any other;
:func:`pin_standings` reads what :func:`fleetcron.core.members.pin_ignored` needs to say
why. Both commands are admin actions (``cluster.manage``, as ``cluster drain``), audited as
``shard.pin`` and ``shard.unpin`` with the shard and the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.coordination.shard_moves import NODE_WORKER, eligible_members
from fleetcron.coordination.shard_rows import shard_count
from fleetcron.core.members import NodeStanding, member_name, pin_ignored
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.schema import ClusterNode, ClusterOwnership, ShardPin

__all__ = ["PinResult", "pin_shard", "pin_standings", "unpin_shard"]


@dataclass(frozen=True)
class PinResult:
    """A pin as a command leaves it: the shard, its node (None: unpinned), whether the
    command changed anything, the shard's owner now, and why the pin is ignored (None:
    the placement follows it)."""

    shard: int
    node: str | None
    changed: bool
    owner: str | None
    ignored: str | None = None


def pin_shard(app: App, actor: Actor, shard: int, node_id: str) -> PinResult:
    """Pin ``shard`` to ``node_id`` (an approved node): the placement moves it there by a
    draining handoff while that node is an eligible live member."""
    note = AuditNote("shard.pin", detail={"shard": shard, "node": node_id})
    with audited(app, actor, note) as session:
        _check(app, actor, session, shard, "move")
        _check_node(session, node_id)
        row = session.get(ShardPin, shard)
        previous = row.node_id if row is not None else None
        if row is None:
            session.add(
                ShardPin(shard=shard, node_id=node_id, pinned_by=actor.name, pinned_at=app.now())
            )
        elif row.node_id != node_id:
            row.node_id, row.pinned_by, row.pinned_at = node_id, actor.name, app.now()
        note.detail |= {"previous": previous, "changed": previous != node_id}
        session.flush()
        ignored = pin_ignored(pin_standings(session, [node_id]).get(node_id))
        return PinResult(shard, node_id, previous != node_id, _owner(session, shard), ignored)


def unpin_shard(app: App, actor: Actor, shard: int) -> PinResult:
    """Remove ``shard``'s pin: the placement decides again (sticky: the shard stays where
    it is until a join, a leave or a drain moves it)."""
    note = AuditNote("shard.unpin", detail={"shard": shard})
    with audited(app, actor, note) as session:
        _check(app, actor, session, shard, "unpin")
        row = session.get(ShardPin, shard)
        previous = row.node_id if row is not None else None
        if row is not None:
            session.delete(row)
        note.detail |= {"node": previous, "changed": row is not None}
        return PinResult(shard, None, row is not None, _owner(session, shard))


def _check(app: App, actor: Actor, session: Session, shard: int, what: str) -> None:
    """The refusals both commands share: the role, the placement, the shard's range."""
    actor.authorize("cluster.manage")
    if app.settings.shard_placement != "members":
        raise Conflict(
            f"shard_placement: shard {what} only with FLEETCRON_SHARD_PLACEMENT=members (the "
            "nodes share the shards); with one owner every shard moves with the jobs: "
            "`fleetcron cluster transfer --to NODE`",
            field="shard_placement",
        )
    count = shard_count(session)
    if not 0 <= shard < count:
        raise InvalidInput(
            f"shard: {shard} is not a shard of this installation (0 to {count - 1})",
            field="shard",
            value=shard,
            allowed=f"0 to {count - 1}",
        )


def _check_node(session: Session, node_id: str) -> None:
    row = session.scalar(select(ClusterNode).where(ClusterNode.node_id == node_id))
    if row is None:
        raise InvalidInput(
            f"to: no node {node_id!r} (`fleetcron cluster nodes` lists them)",
            field="to",
            value=node_id,
            allowed="an approved node's id",
        )
    if row.state != "approved":
        raise Conflict(
            f"to: node {node_id} is {row.state}; only an approved node may be pinned a shard",
            field="to",
        )


def _owner(session: Session, shard: int) -> str | None:
    return session.scalar(
        select(ClusterOwnership.owner_node_id).where(ClusterOwnership.shard == shard)
    )


def pin_standings(session: Session, node_ids: Iterable[str]) -> dict[str, NodeStanding]:
    """What the placement knows of each of ``node_ids`` that the registry knows (a node
    missing from the answer is not registered): its state, fenced, drained, and whether its
    member is eligible and live, as the placement step reads it."""
    wanted = sorted(set(node_ids))
    if not wanted:
        return {}
    # Members exist on PostgreSQL only (the members placement needs it).
    shared = session.get_bind().dialect.name == "postgresql"
    live = {m.name for m in eligible_members(session) if m.weight > 0} if shared else set()
    rows = session.execute(
        select(
            ClusterNode.node_id, ClusterNode.state, ClusterNode.fenced_at, ClusterNode.drained_at
        ).where(ClusterNode.node_id.in_(wanted))
    ).all()
    return {
        node_id: NodeStanding(
            state,
            fenced=fenced_at is not None,
            drained=drained_at is not None,
            live=member_name(node_id, NODE_WORKER) in live,
        )
        for node_id, state, fenced_at, drained_at in rows
    }
