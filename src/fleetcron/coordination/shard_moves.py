"""Shards moving between nodes one by one: the members placement
(``FLEETCRON_SHARD_PLACEMENT=members``).

Every live, approved node registers as a member (worker 0's row in ``cluster_members``,
weighted by its worker count, renewed with its lease) and, after each lease step, runs
:func:`placement_step` in a transaction of its own: it reads the live members and each
shard's owner, asks :func:`fleetcron.core.members.decide` what it should hold, and acts on
its own shards and on the shards placed on it, never on another live node's. The
operator's pins (``shard_pins``, :func:`pinned_members`) are one more reading: a pin only
changes the placement, and a pinned shard moves by the same drain and handoff as any other:

- **give**: a shard it holds that is placed elsewhere starts **draining** (its scheduler
  claims nothing new there); once no claim of that shard is unfinished (every run ended,
  or its claim's deadline passed), the giver hands it to the placed member in one
  statement: owner, generation + 1, not draining, a fresh lease for the receiver. A shard
  placed back on the giver before that stops draining.
- **take**: a shard placed on it that nobody owns is taken (generation + 1). One whose
  owner is no longer a live member **and** whose lease has expired by the database clock
  is taken over: generation + 1, the old owner's live claims of that shard revoked (their
  late writes refused), and the new owner waits per assignment for the old claims'
  deadlines (the guard's per-shard rule) before it starts anything there. A shard whose
  owner is still live is waited for: its owner drains and hands it over.

Each change locks the shard's row and checks its condition again under the lock (a node
locks its own shards' rows in one ordered statement, and the rows it takes skipping those
another transaction holds, so two steps never wait for each other in a cycle), so two
nodes racing (two rebalances computed from different readings) never both take a shard,
and a moving shard never executes on two nodes at once: the giver stops claiming before it
hands over, and the receiver's generation refuses whatever the giver still writes. The
decision's readings are taken without a lock: a claim transaction, which locks only its
own shards' rows, waits only for the rows a step changes.

``drain=False`` (the fault tests' negative control only, by composition) hands a shard
over at once without waiting for its claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from fleetcron.coordination.guard import UNFINISHED_CLAIM_STATES, db_now
from fleetcron.coordination.ownership_change import revoke_claims
from fleetcron.coordination.shard_rows import lease_until, shard_count
from fleetcron.core.members import Decision, decide, member_name, parse_member, placement
from fleetcron.core.shards import Member
from fleetcron.store.schema import (
    ClusterMember,
    ClusterNode,
    ClusterOwnership,
    ExecutionClaim,
    ShardPin,
)

__all__ = ["ShardMove", "eligible_members", "pinned_members", "placement_step"]

MoveKind = Literal["take", "takeover", "drain", "undrain", "handoff"]

#: The worker whose member row stands for its node in the placement between nodes.
NODE_WORKER = 0


@dataclass(frozen=True)
class ShardMove:
    """One change a step made: ``take`` (nobody owned it), ``takeover`` (its owner's
    lease lapsed; ``revoked`` of its claims revoked), ``drain`` / ``undrain`` (a handoff
    started or called off), ``handoff`` (drained, given to ``to_node``)."""

    shard: int
    kind: MoveKind
    from_node: str | None
    to_node: str | None
    generation: int
    revoked: int = 0


def eligible_members(session: Session) -> list[Member]:
    """The live members that stand for a node (worker 0's row) whose node may own work:
    approved, not fenced, not drained by an operator; by name."""
    rows = session.execute(
        select(ClusterMember.node_id, ClusterMember.weight)
        .join(ClusterNode, ClusterNode.node_id == ClusterMember.node_id)
        .where(
            ClusterMember.worker == NODE_WORKER,
            ClusterMember.lease_expires_at > func.clock_timestamp(),
            ClusterNode.state == "approved",
            ClusterNode.fenced_at.is_(None),
            ClusterNode.drained_at.is_(None),
        )
        .order_by(ClusterMember.node_id)
    ).all()
    return [Member(member_name(node_id, NODE_WORKER), float(weight)) for node_id, weight in rows]


def pins(session: Session) -> dict[int, str]:
    """The operator's pins (``shard_pins``): shard -> the pinned node's id. Read without
    a lock, as the other readings of a step: a pin made meanwhile counts from the next
    step."""
    return {
        shard: node for shard, node in session.execute(select(ShardPin.shard, ShardPin.node_id))
    }


def pinned_members(session: Session) -> dict[int, str]:
    """The pins as the placement takes them: shard -> the member that stands for the
    pinned node (its worker 0)."""
    return {shard: member_name(node_id, NODE_WORKER) for shard, node_id in pins(session).items()}


def placed_nodes(session: Session) -> dict[int, str]:
    """Where the members placement puts each shard now (shard -> node id; a shard no
    eligible member may take is absent), as every node's step computes it from these
    rows: a shard owned elsewhere is moving there, or the nodes disagree."""
    placed = placement(
        shard_count(session),
        eligible_members(session),
        _owners(_ownership(session)),
        pinned_members(session),
    )
    return {shard: parse_member(member)[0] for shard, member in placed.items()}


def _ownership(session: Session) -> Sequence[Row[int, str | None, bool]]:
    """Every shard's owner and whether it drains."""
    return session.execute(
        select(ClusterOwnership.shard, ClusterOwnership.owner_node_id, ClusterOwnership.draining)
    ).all()


def _owners(read: Sequence[Row[int, str | None, bool]]) -> dict[int, str | None]:
    """Each shard's owner as the placement names members (a node: its worker 0)."""
    return {shard: member_name(owner, NODE_WORKER) if owner else None for shard, owner, _ in read}


def placement_step(
    session: Session, node_id: str, *, lease_s: float, drain: bool = True
) -> list[ShardMove]:
    """Give, take and hand over shards as the placement says (see the module docstring);
    returns the changes made, in this transaction. This node's member row is renewed in
    its lease step, before (a transaction of its own: a step that waits for a row never
    delays the renewal)."""
    live = eligible_members(session)
    read = _ownership(session)
    me = member_name(node_id, NODE_WORKER)
    decision = decide(me, shard_count(session), live, _owners(read), pinned_members(session))
    draining = {shard for shard, owner, drains in read if owner == node_id and drains}
    now = db_now(session)
    moves = _give(session, node_id, decision, draining, now, lease_s=lease_s, drain=drain)
    moves += _take(
        session, node_id, decision, live={m.name for m in live}, now=now, lease_s=lease_s
    )
    return moves


def _locked(
    session: Session, shards: Sequence[int], *, skip_locked: bool = False
) -> list[ClusterOwnership]:
    """The rows of ``shards``, locked in shard order (one statement, so two steps never
    wait for each other in a cycle); with ``skip_locked``, without the rows another
    transaction holds (a shard placed here but held by its live owner, or taken at this
    moment by another node: left for the next step)."""
    if not shards:
        return []
    return list(
        session.scalars(
            select(ClusterOwnership)
            .where(ClusterOwnership.shard.in_(sorted(shards)))
            .order_by(ClusterOwnership.shard)
            .with_for_update(skip_locked=skip_locked)
        )
    )


def _give(
    session: Session,
    node_id: str,
    decision: Decision,
    draining: set[int],
    now: datetime,
    *,
    lease_s: float,
    drain: bool,
) -> list[ShardMove]:
    """Drain the shards placed elsewhere, call off the drains of shards placed back here
    (``draining``: this node's shards read draining), and hand over the drained ones."""
    destination = {mv.shard: mv.destination for mv in decision.give}
    moves: list[ShardMove] = []
    mine = _locked(session, [*destination, *(s for s in decision.keep if s in draining)])
    unfinished = _unfinished_by_shard(session, [r.shard for r in mine if r.shard in destination])
    for row in mine:
        if row.owner_node_id != node_id:
            continue  # it moved since the reading
        if row.shard not in destination:
            if row.draining and row.transfer_id is None:
                row.draining = False
                moves.append(ShardMove(row.shard, "undrain", node_id, node_id, row.generation))
            continue
        moves += _give_one(
            session,
            row,
            destination[row.shard],
            unfinished=unfinished.get(row.shard, 0),
            now=now,
            lease_s=lease_s,
            drain=drain,
        )
    return moves


def _give_one(
    session: Session,
    row: ClusterOwnership,
    to: str | None,
    *,
    unfinished: int,
    now: datetime,
    lease_s: float,
    drain: bool,
) -> list[ShardMove]:
    """One shard placed on ``to`` (None: no live member may take it: it keeps draining);
    ``unfinished``: its claims whose command may still run."""
    moves: list[ShardMove] = []
    if not row.draining:
        row.draining, row.updated_at = True, now
        moves.append(
            ShardMove(row.shard, "drain", row.owner_node_id, to and _node(to), row.generation)
        )
        if drain:
            return moves
    if to is None or (drain and unfinished):
        return moves
    giver = row.owner_node_id
    _own(session, row, _node(to), now, lease_s)
    moves.append(ShardMove(row.shard, "handoff", giver, row.owner_node_id, row.generation))
    return moves


def _take(
    session: Session,
    node_id: str,
    decision: Decision,
    *,
    live: set[str],
    now: datetime,
    lease_s: float,
) -> list[ShardMove]:
    """Take the shards placed here that nobody owns, and take over those whose owner is
    no longer a live member and whose lease has expired."""
    moves: list[ShardMove] = []
    wanted = {mv.shard for mv in decision.take}
    for row in _locked(session, sorted(wanted), skip_locked=True):
        owner = row.owner_node_id
        if owner == node_id:
            continue
        if owner is None:
            _own(session, row, node_id, now, lease_s)
            moves.append(ShardMove(row.shard, "take", None, node_id, row.generation))
            continue
        expired = row.lease_expires_at is None or row.lease_expires_at <= now
        if member_name(owner, NODE_WORKER) in live or not expired:
            continue  # its owner drains it and hands it over
        revoked = revoke_claims(
            session,
            owner,
            now,
            reason=f"revoked: shard {row.shard} taken over by {node_id}",
            shards=[row.shard],
        )
        _own(session, row, node_id, now, lease_s)
        moves.append(ShardMove(row.shard, "takeover", owner, node_id, row.generation, revoked))
    return moves


def _own(
    session: Session, row: ClusterOwnership, node_id: str, now: datetime, lease_s: float
) -> None:
    """Make ``node_id`` the owner of the locked ``row`` at the next generation, with a
    fresh lease by the database clock."""
    row.owner_node_id, row.generation = node_id, row.generation + 1
    row.draining, row.transfer_id, row.updated_at = False, None, now
    row.lease_expires_at = lease_until(session, lease_s)


def _unfinished_by_shard(session: Session, shards: Sequence[int]) -> dict[int, int]:
    """How many claims of each of ``shards`` may still have a command running: not
    finished, deadline to come (by the database clock)."""
    if not shards:
        return {}
    rows = session.execute(
        select(ExecutionClaim.shard, func.count())
        .where(
            ExecutionClaim.shard.in_(sorted(shards)),
            ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
            ExecutionClaim.deadline_at > func.clock_timestamp(),
        )
        .group_by(ExecutionClaim.shard)
    ).all()
    return {shard: count for shard, count in rows}


def _node(member: str) -> str:
    return parse_member(member)[0]
