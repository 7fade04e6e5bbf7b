"""High availability: nodes, ownership, handoff, forced takeover, maintenance.

Several nodes share one PostgreSQL. At most one approved node — the owner — runs jobs; the
owner and a generation that increases on every change of owner live in the
``cluster_ownership`` row, and every run write is rechecked against them under that row's
lock (:mod:`fleetcron.coordination.guard`). Changing the owner takes the same lock:

- **handoff**: the owner is marked draining (no new claims) and, once its live claims have
  finished or expired, the owner and generation change in one transaction;
- **forced takeover**: for an unreachable owner that the operator has fenced; generation
  goes up at once, the old owner's live claims are revoked (its late writes are refused)
  and it must pass ``verify-rejoin`` before it may work again;
- after a takeover or a lease failover the new owner does not start an assignment while a
  claim of the old owner on it has not reached its deadline (its command may still run
  until then; the watchdog on the executing machine ends it by the deadline), unless the
  operator confirmed ``--targets-verified`` or active cleanup killed the old generation's
  processes on that target;
- the first owner is chosen with a transfer too (generation 0 -> 1).

The database row is the source of truth: a node learns it is draining or fenced from the
row, under the lock, on its next write. Status reads never write; maintenance writes only
when a claim expires or a transfer completes.

This module authorizes, audits and orchestrates; the changes of the ownership row are
:mod:`fleetcron.coordination.ownership_change`. The node registry is
:mod:`~fleetcron.services.cluster.registry`, the lease :mod:`~fleetcron.services.cluster.lease`
and active cleanup :mod:`~fleetcron.services.cluster.cleanup`; their names are re-exported
here, where the adapters find them.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import SYSTEM, Actor, App
from fleetcron.coordination.guard import current_verdict, db_now
from fleetcron.coordination.identity import NodeIdentity, normalize_endpoint
from fleetcron.coordination.node import Node as Node
from fleetcron.coordination.ownership_change import (
    LockHolder,
    OwnerChange,
    change_owner,
    complete_drained_handoff,
    complete_transfer,
    eligible,
    end_sessions_of,
    expire_claims,
    get_node,
    lock_ownership,
    may_own,
    ownership_lock_holders,
    supersede_pending,
    unfinished_claims,
    waiting_detail,
)
from fleetcron.coordination.shard_rows import Ownership, shard_rows
from fleetcron.core.ownership import Verdict
from fleetcron.core.topology import Topology
from fleetcron.errors import Conflict, InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited, record
from fleetcron.services.cluster.cleanup import CleanupPlan as CleanupPlan
from fleetcron.services.cluster.cleanup import CleanupResult as CleanupResult
from fleetcron.services.cluster.cleanup import CleanupTarget as CleanupTarget
from fleetcron.services.cluster.cleanup import active_cleanup_plan as active_cleanup_plan
from fleetcron.services.cluster.cleanup import clear_cleaned_claims as clear_cleaned_claims
from fleetcron.services.cluster.cleanup import finish_active_cleanup as finish_active_cleanup
from fleetcron.services.cluster.cleanup import installation_shards as installation_shards
from fleetcron.services.cluster.cleanup import mark_scope as mark_scope
from fleetcron.services.cluster.lease import Lease as Lease
from fleetcron.services.cluster.registry import announce as announce
from fleetcron.services.cluster.registry import approve as approve
from fleetcron.services.cluster.registry import retire as retire
from fleetcron.services.cluster.registry import set_drained as set_drained
from fleetcron.services.cluster.registry import verify_rejoin as verify_rejoin
from fleetcron.store.schema import ClusterNode, ClusterOwnership, ClusterTransfer, ExecutionClaim

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransferResult:
    id: int
    kind: str
    state: str
    from_node: str | None
    to_node: str
    generation_after: int | None


def _transfer_result(t: ClusterTransfer) -> TransferResult:
    return TransferResult(t.id, t.kind, t.state, t.from_node_id, t.to_node_id, t.generation_after)


def request_transfer(
    app: App, actor: Actor, to_node: str, *, idempotency_key: str | None = None
) -> TransferResult:
    """Hand the jobs to ``to_node``. Idempotent: the same key returns the same transfer."""
    key = idempotency_key or uuid.uuid4().hex
    note = AuditNote("cluster.transfer", detail={"to": to_node, "idempotency_key": key})
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        ownership = lock_ownership(session)
        _require_writer_here(app, session, ownership.owner_node_id, "transfer")
        existing = _transfer_by_key(session, key, to_node)
        if existing is not None:
            return _transfer_result(existing)
        _check_may_own(session, to_node)
        _check_one_owner(app, "transfer")
        transfer = _start_transfer(
            session, ownership, to_node, key=key, requested_by=actor.name, now=app.now()
        )
        note.detail.update({"transfer": transfer.id, "state": transfer.state})
        return _transfer_result(transfer)


def _check_one_owner(app: App, action: str) -> None:
    """A transfer hands every shard to one node: with the members placement, which moves
    the shards between the live nodes itself, it would be undone at once."""
    if app.settings.shard_placement == "members":
        raise Conflict(
            f"{action}: with FLEETCRON_SHARD_PLACEMENT=members the nodes share the shards and "
            "the placement moves them; to move work off a node use `fleetcron cluster drain "
            "NODE`"
        )


def _transfer_by_key(session: Session, key: str, to_node: str) -> ClusterTransfer | None:
    """The transfer already requested with idempotency key ``key``, if any; a conflict
    when that one went to another node."""
    existing = session.scalar(select(ClusterTransfer).where(ClusterTransfer.idempotency_key == key))
    if existing is not None and existing.to_node_id != to_node:
        raise Conflict(f"idempotency key {key} was used for a transfer to {existing.to_node_id}")
    return existing


def _check_may_own(session: Session, to_node: str) -> None:
    """Only an approved, unfenced node may be handed the jobs."""
    target = get_node(session, to_node)
    if not may_own(target):
        raise InvalidInput(
            f"node {to_node} is {target.state}{' and fenced' if target.fenced_at else ''}; "
            "only an approved, unfenced node can own the jobs",
            field="to",
            value=to_node,
            allowed="an approved node",
        )


def _start_transfer(
    session: Session,
    ownership: Ownership,
    to_node: str,
    *,
    key: str,
    requested_by: str,
    now: datetime,
) -> ClusterTransfer:
    """Record the transfer to ``to_node``: completed at once when there is no owner yet or
    ``to_node`` owns already, otherwise pending (superseding any other pending one) while
    the owner drains."""
    transfer = ClusterTransfer(
        idempotency_key=key,
        from_node_id=ownership.owner_node_id,
        to_node_id=to_node,
        requested_by=requested_by,
        requested_at=now,
        state="pending",
        note="",
        kind="initial" if ownership.owner_node_id is None else "handoff",
    )
    session.add(transfer)
    session.flush()
    if ownership.owner_node_id is None or ownership.owner_node_id == to_node:
        complete_transfer(session, ownership, transfer, now)
    else:
        supersede_pending(session, transfer.id, now, keep=transfer.id)
        ownership.draining, ownership.transfer_id, ownership.updated_at = True, transfer.id, now
    return transfer


def _require_writer_here(app: App, session: object, owner: str | None, action: str) -> None:
    from fleetcron.services.writer import require_writer_here

    require_writer_here(app, session, owner, action)


def transfer_status(app: App, actor: Actor, idempotency_key: str) -> TransferResult:
    actor.authorize("cluster.read")
    with app.db.read() as session:
        t = session.scalar(
            select(ClusterTransfer).where(ClusterTransfer.idempotency_key == idempotency_key)
        )
        if t is None:
            raise NotFound("transfer", idempotency_key)
        return _transfer_result(t)


def takeover(
    app: App,
    actor: Actor,
    node: Node,
    fenced_endpoint: str,
    *,
    confirm_fenced: bool,
    targets_verified: bool = False,
) -> TransferResult:
    """Forced takeover by this node of an unreachable owner the operator has fenced.

    The new owner then waits, per assignment, for the old owner's claims to reach their
    deadlines, unless ``targets_verified``: the operator confirms no command of the old
    owner is still running on any target, and the old claims are cleared (audited)."""
    me = node.identity
    note = _takeover_note(me, fenced_endpoint, targets_verified)
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        _check_takeover_confirmed(app, confirm_fenced=confirm_fenced, verified=targets_verified)
        ended = _end_fenced_sessions(session, me, fenced_endpoint)
        ownership = lock_ownership(session)
        old = _fenced_owner(session, ownership, me, fenced_endpoint)
        note.detail["ended_sessions"] = len(ended)
        change = change_owner(
            session,
            ownership,
            old,
            me.node_id,
            kind="takeover",
            requested_by=actor.name,
            note=f"forced; {old.endpoint} confirmed fenced by {actor.name}",
            now=app.now(),
            clear_waiting=targets_verified,
        )
        note.detail.update(_takeover_detail(change, old, ownership.generation))
        return _transfer_result(change.transfer)


def _end_fenced_sessions(session: Session, me: NodeIdentity, fenced_endpoint: str) -> list[int]:
    """End the database sessions of the owner the operator confirmed fenced, before the
    ownership rows are locked: a process of it that was paused inside a transaction
    (SIGSTOP, a frozen VM) holds its rows' locks for as long as it is paused, and would
    hold the takeover to its lock timeout. Ending a fenced owner's sessions is safe: what
    they hold is an open transaction, whose rollback writes nothing, and its commands on
    the targets are still bounded by their claims. Only the owner whose endpoint is the
    one typed; nothing when no owner has it (the checks after the lock then refuse)."""
    if session.get_bind().dialect.name != "postgresql":
        return []  # SQLite: one process, no sessions of another node
    typed = normalize_endpoint(fenced_endpoint)
    owners = session.execute(
        select(ClusterNode.node_id)
        .join(ClusterOwnership, ClusterOwnership.owner_node_id == ClusterNode.node_id)
        .where(ClusterNode.endpoint == typed, ClusterNode.node_id != me.node_id)
        .distinct()
    ).scalars()
    ended = [pid for owner in owners for pid in end_sessions_of(session, owner)]
    if ended:
        log.info(
            "cluster: takeover ended %d session(s) of the fenced owner at %s",
            len(ended),
            typed,
            extra={"action": "cluster.takeover_ended_sessions", "count": len(ended)},
        )
    return ended


def _takeover_note(me: NodeIdentity, fenced_endpoint: str, targets_verified: bool) -> AuditNote:
    """The takeover's audit note as asked: by whom, of which fenced endpoint, and whether
    the operator verified that no old command runs on a target."""
    return AuditNote(
        "cluster.takeover",
        detail={
            "to": me.node_id,
            "fenced_endpoint": fenced_endpoint,
            "targets_verified": targets_verified,
        },
    )


def _takeover_detail(change: OwnerChange, old: ClusterNode, generation: int) -> dict[str, Any]:
    """What the takeover's audit records of the change: the old owner, the new generation
    and the old owner's claims revoked, cleared and still waited for."""
    return {
        "from": old.node_id,
        "generation": generation,
        "revoked_claims": change.revoked,
        "cleared_claims": change.cleared,
        **waiting_detail(change.waiting),
    }


def _check_takeover_confirmed(app: App, *, confirm_fenced: bool, verified: bool) -> None:
    """A takeover needs the operator's word that the old owner is fenced (and, in a
    replicated pair, that no command of its is still running on a target)."""
    if not confirm_fenced:
        raise InvalidInput(
            "confirm with --confirm-fenced that the old owner is powered off or cut off",
            field="confirm_fenced",
            value=False,
            allowed="--confirm-fenced",
        )
    if app.settings.topology is Topology.REPLICATED_PAIR and not verified:
        from fleetcron.services.pair.replication import TAKEOVER_NEEDS_VERIFIED_TARGETS

        raise InvalidInput(
            TAKEOVER_NEEDS_VERIFIED_TARGETS,
            field="targets_verified",
            value=False,
            allowed="--targets-verified",
        )


def _fenced_owner(
    session: Session, ownership: Ownership, me: NodeIdentity, fenced_endpoint: str
) -> ClusterNode:
    """The owner taken over from: the one whose endpoint the operator typed, another node
    than this approved one."""
    if ownership.owner_node_id is None:
        raise Conflict("there is no owner to take over from; use `fleetcron cluster transfer`")
    old = get_node(session, ownership.owner_node_id)
    typed = normalize_endpoint(fenced_endpoint)
    if typed != old.endpoint:
        raise InvalidInput(
            f"fenced endpoint {typed!r} is not the owner's endpoint; type it exactly",
            field="fenced_endpoint",
            value=fenced_endpoint,
            allowed="the owner's exact endpoint",
        )
    if not eligible(get_node(session, me.node_id), me):
        raise Conflict(f"this node ({me.node_id}) is not an approved, unfenced node")
    if old.node_id == me.node_id:
        raise Conflict("this node already owns the jobs")
    return old


@dataclass
class MaintenanceResult:
    expired_claims: int = 0
    completed_transfers: list[int] = field(default_factory=list)


def maintain(app: App) -> MaintenanceResult:
    """Expire claims past their deadline (their runs become ``fenced``) and complete a
    handoff whose old owner has no live claims left. Writes only on such a transition."""
    result = MaintenanceResult()
    from fleetcron.services.writer import pair_standby

    if pair_standby(app):
        # In a replicated pair the owner alone writes claims and the ownership row.
        return result
    with app.db.session() as session:
        result.expired_claims = expire_claims(session, app.now())
    with app.db.session() as session:
        transfer = complete_drained_handoff(session, app.now())
        if transfer is not None:
            record(
                session,
                app,
                SYSTEM,
                AuditNote(
                    "cluster.transfer.complete",
                    detail={
                        "transfer": transfer.id,
                        "to": transfer.to_node_id,
                        "generation": transfer.generation_after,
                    },
                ),
                success=True,
            )
            result.completed_transfers.append(transfer.id)
    if result.expired_claims or result.completed_transfers:
        log.info(
            "cluster: maintenance expired %d claim(s), completed transfer(s) %s",
            result.expired_claims,
            result.completed_transfers,
            extra={"action": "cluster.maintain"},
        )
    return result


@dataclass(frozen=True)
class NodeStatus:
    node_id: str
    hostname: str
    endpoint: str
    state: str
    fenced: bool
    running: int
    #: Drained by an operator (``cluster drain``; the members placement gives it no shard).
    drained: bool = False


@dataclass(frozen=True)
class ShardStatus:
    """One shard's ownership row as status shows it."""

    shard: int
    owner: str | None
    generation: int
    draining: bool


@dataclass(frozen=True)
class ClusterStatus:
    mode: str
    this_node: str | None
    owner: str | None
    generation: int
    draining: bool
    pending_transfer: TransferResult | None
    verdict: Verdict | None
    nodes: list[NodeStatus]
    running_on: dict[str, int]
    #: Unfinished claims of older generations whose deadline has not come: the owner does
    #: not start their assignments until then (``waiting_until``, database clock).
    waiting_claims: int = 0
    waiting_until: datetime | None = None
    #: With automatic failover: seconds until the owner's lease expires by the database
    #: clock (negative: expired that long ago; None: no lease).
    lease_expires_in_s: float | None = None
    #: Sessions holding the ownership row's lock (a standby's takeover waits for them).
    lock_holders: list[LockHolder] = field(default_factory=list)
    #: Each shard's owner and generation, in shard order (the count fixed at creation).
    shards: list[ShardStatus] = field(default_factory=list)

    def one_line(self) -> str:
        if self.mode == "standalone":
            return "Standalone: this node runs every job"
        state = {
            "owner": "Draining" if self.draining else "Active on this node",
            "standby": "Standby",
        }.get(self.verdict.kind if self.verdict else "", "Not allowed to run jobs")
        running = ", ".join(f"{n}: {c}" for n, c in self.running_on.items()) or "nothing"
        owner = self.owner or "(none)"
        line = f"{state}; owner {owner}, generation {self.generation}; running: {running}"
        if len(self.shards) > 1:
            line += f"; {len(self.shards)} shards ({self.shard_summary()})"
        if self.waiting_claims and self.waiting_until is not None:
            line += (
                f"; waiting for {self.waiting_claims} claim(s) of the previous owner until "
                f"{self.waiting_until.isoformat(timespec='seconds')}"
            )
        if self.lease_expires_in_s is not None:
            left = self.lease_expires_in_s
            line += (
                f"; lease expires in {left:.1f} s"
                if left > 0
                else f"; lease expired {-left:.1f} s ago"
            )
        for h in self.lock_holders:
            since = h.since.isoformat(timespec="seconds") if h.since else "?"
            line += (
                f"; ownership lock held by {h.application_name or '(unnamed)'} "
                f"(pid {h.pid}, {h.state}) since {since}, {h.blocking} waiting"
            )
        return line

    def shard_summary(self) -> str:
        """The shards grouped by owner and generation: ``0-63 node-a gen 3``."""
        groups: list[tuple[int, int, str | None, int]] = []
        for sh in self.shards:
            last = groups[-1] if groups else None
            if last and (last[2], last[3]) == (sh.owner, sh.generation) and last[1] == sh.shard - 1:
                groups[-1] = (last[0], sh.shard, sh.owner, sh.generation)
            else:
                groups.append((sh.shard, sh.shard, sh.owner, sh.generation))
        return ", ".join(
            f"{a if a == b else f'{a}-{b}'} {owner or '(none)'} gen {g}"
            for a, b, owner, g in groups
        )


def _live_claims_per_node(session: Session) -> dict[str, int]:
    """How many live execution claims each node holds: the runs it is running."""
    return {
        node_id: count
        for node_id, count in session.execute(
            select(ExecutionClaim.node_id, func.count(ExecutionClaim.id))
            .where(ExecutionClaim.state == "live")
            .group_by(ExecutionClaim.node_id)
        )
    }


def _node_statuses(session: Session, running: dict[str, int]) -> list[NodeStatus]:
    return [
        NodeStatus(
            n.node_id,
            n.hostname,
            n.endpoint,
            n.state,
            n.fenced_at is not None,
            running.get(n.node_id, 0),
            n.drained_at is not None,
        )
        for n in session.scalars(select(ClusterNode).order_by(ClusterNode.id))
    ]


def status(app: App, actor: Actor, node: Node | None) -> ClusterStatus:
    """Read-only: status reads never write."""
    actor.authorize("cluster.read")
    if node is None:
        return ClusterStatus("standalone", None, None, 0, False, None, None, [], {})
    me = node.identity
    with app.db.read() as session:
        rows = shard_rows(session, lock=False)
        ownership = Ownership(rows) if rows else None
        running = _live_claims_per_node(session)
        pending = None
        if ownership is not None and ownership.transfer_id is not None:
            t = session.get(ClusterTransfer, ownership.transfer_id)
            pending = _transfer_result(t) if t else None
        nodes = _node_statuses(session, running)
        verdict = current_verdict(session, me.node_id, me.fingerprint, lock=False)
        waiting = unfinished_claims(session, ownership.generations) if ownership else []
        lease_left = (
            (ownership.lease_expires_at - db_now(session)).total_seconds()
            if ownership is not None and ownership.lease_expires_at is not None
            else None
        )
        holders = ownership_lock_holders(session)
    return ClusterStatus(
        "cluster",
        me.node_id,
        ownership.owner_node_id if ownership else None,
        ownership.generation if ownership else 0,
        bool(ownership and ownership.draining),
        pending,
        verdict,
        nodes,
        running,
        len(waiting),
        max((c.deadline_at for c in waiting), default=None),
        lease_left,
        holders,
        [ShardStatus(r.shard, r.owner_node_id, r.generation, r.draining) for r in rows],
    )
