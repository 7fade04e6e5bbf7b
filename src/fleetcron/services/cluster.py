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
"""

from __future__ import annotations

import hashlib
import logging
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, undefer

from fleetcron import __version__
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.coordination.guard import (
    UNFINISHED_CLAIM_STATES,
    CoordinatedGuard,
    current_verdict,
    db_now,
)
from fleetcron.coordination.identity import (
    NodeIdentity,
    node_identity,
    normalize_endpoint,
    read_machine_id,
)
from fleetcron.core.ownership import Verdict, self_fence_after
from fleetcron.core.planning import (
    CleanupClaim,
    TargetCleanup,
    claims_cleared_by,
    targets_to_clean,
)
from fleetcron.errors import Conflict, CoordinationError, InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited, record
from fleetcron.store.run_writes import fence_runs
from fleetcron.store.schema import (
    ClusterNode,
    ClusterOwnership,
    ClusterTransfer,
    ExecutionClaim,
    Run,
    Target,
)

log = logging.getLogger(__name__)


@dataclass
class Node:
    """This process's view of itself in the cluster."""

    app: App

    @cached_property
    def identity(self) -> NodeIdentity:
        settings = self.app.settings
        if not settings.endpoint:
            raise CoordinationError("this node has no FLEETCRON_ENDPOINT")
        with self.app.db.read() as session:
            system_id = str(
                session.scalar(text("SELECT system_identifier FROM pg_control_system()"))
            )
        return node_identity(
            read_machine_id(settings.machine_id_file),
            system_id,
            socket.gethostname(),
            __version__,
            settings.endpoint,
        )

    def guard(self, *, lease_holds: Callable[[], bool] | None = None) -> CoordinatedGuard:
        return CoordinatedGuard(
            self.identity.node_id,
            self.identity.fingerprint,
            unguarded=self.app.settings.unsafe_disable_guard,
            wait_for_old_claims=not self.app.settings.unsafe_disable_claim_wait,
            lease_holds=lease_holds,
        )


def ensure_ownership_row(session: Session, now: datetime) -> None:
    """Create the ownership row the first time a cluster node starts (never a second one)."""
    if session.scalar(select(func.count(ClusterOwnership.id))) == 0:
        session.add(
            ClusterOwnership(owner_node_id=None, generation=0, draining=False, updated_at=now)
        )


def announce(app: App, node: Node) -> ClusterNode:
    """Register this node as a candidate, or refresh its record when something changed.

    Discovery never approves: a new node stays a candidate until an admin approves it."""
    me = node.identity
    with app.db.session() as session:
        ensure_ownership_row(session, app.now())
        row = session.scalar(select(ClusterNode).where(ClusterNode.node_id == me.node_id))
        if row is None:
            row = ClusterNode(
                node_id=me.node_id,
                fingerprint=me.fingerprint,
                hostname=me.hostname,
                version=me.version,
                endpoint=me.endpoint,
                aliases=[],
                state="candidate",
                announced_at=app.now(),
            )
            session.add(row)
            record(
                session,
                app,
                SYSTEM,
                AuditNote("cluster.announce", detail=_node_detail(me)),
                success=True,
            )
        elif (row.hostname, row.version, row.endpoint) != (me.hostname, me.version, me.endpoint):
            if me.endpoint != row.endpoint and me.endpoint not in row.aliases:
                row.aliases = [*row.aliases, me.endpoint]
            row.hostname, row.version = me.hostname, me.version
        session.flush()
        return row


def _node_detail(me: NodeIdentity) -> dict[str, str]:
    return {
        "node": me.node_id,
        "hostname": me.hostname,
        "endpoint": me.endpoint,
        "version": me.version,
    }


def _get_node(session: Session, node_id: str) -> ClusterNode:
    row = session.scalar(select(ClusterNode).where(ClusterNode.node_id == node_id))
    if row is None:
        raise NotFound("node", node_id)
    return row


def _lock_ownership(session: Session) -> ClusterOwnership:
    rows = session.scalars(select(ClusterOwnership).with_for_update()).all()
    if len(rows) != 1:
        raise CoordinationError(
            f"coordination state has {len(rows)} ownership rows, expected 1; repair it first"
        )
    return rows[0]


def approve(app: App, actor: Actor, identity: NodeIdentity) -> ClusterNode:
    """Approve a candidate whose identity was verified (signed challenge to its endpoint).

    Refused when another live, approved record has the same node id with a different
    fingerprint (a cloned disk), or when the database identifiers differ."""
    note = AuditNote("cluster.approve", detail=_node_detail(identity))
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        row = _get_node(session, identity.node_id)
        if row.state == "retired":
            raise Conflict(f"node {row.node_id} is retired and can never be approved again")
        if row.fingerprint != identity.fingerprint:
            raise Conflict(
                f"node {row.node_id} answered with fingerprint {identity.fingerprint[:12]}…, "
                f"but registered with {row.fingerprint[:12]}…: a clone or another database; "
                "fence that host and give it a new machine id"
            )
        if row.state != "approved":
            row.state, row.approved_at, row.approved_by = "approved", app.now(), actor.name
        if identity.endpoint != row.endpoint and identity.endpoint not in row.aliases:
            row.aliases = [*row.aliases, identity.endpoint]
        session.flush()
        return row


def retire(app: App, actor: Actor, node_id: str) -> None:
    """Retire a node: kept for audit, never selectable again, its endpoint reusable."""
    note = AuditNote("cluster.retire", detail={"node": node_id})
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        ownership = _lock_ownership(session)
        row = _get_node(session, node_id)
        if ownership.owner_node_id == node_id:
            raise Conflict(f"node {node_id} owns the jobs; transfer ownership or take over first")
        row.state, row.retired_at = "retired", app.now()


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
        ownership = _lock_ownership(session)
        existing = session.scalar(
            select(ClusterTransfer).where(ClusterTransfer.idempotency_key == key)
        )
        if existing is not None:
            if existing.to_node_id != to_node:
                raise Conflict(
                    f"idempotency key {key} was used for a transfer to {existing.to_node_id}"
                )
            return _transfer_result(existing)
        target = _get_node(session, to_node)
        if target.state != "approved" or target.fenced_at is not None:
            raise InvalidInput(
                f"node {to_node} is {target.state}{' and fenced' if target.fenced_at else ''}; "
                "only an approved, unfenced node can own the jobs",
                field="to",
                value=to_node,
                allowed="an approved node",
            )
        now = app.now()
        transfer = ClusterTransfer(
            idempotency_key=key,
            from_node_id=ownership.owner_node_id,
            to_node_id=to_node,
            requested_by=actor.name,
            requested_at=now,
            state="pending",
            note="",
            kind="initial" if ownership.owner_node_id is None else "handoff",
        )
        session.add(transfer)
        session.flush()
        if ownership.owner_node_id is None or ownership.owner_node_id == to_node:
            _complete(session, ownership, transfer, now)
        else:
            _supersede_pending(session, ownership, transfer.id, now, keep=transfer.id)
            ownership.draining, ownership.transfer_id, ownership.updated_at = True, transfer.id, now
        note.detail.update({"transfer": transfer.id, "state": transfer.state})
        return _transfer_result(transfer)


def transfer_status(app: App, actor: Actor, idempotency_key: str) -> TransferResult:
    actor.authorize("cluster.read")
    with app.db.read() as session:
        t = session.scalar(
            select(ClusterTransfer).where(ClusterTransfer.idempotency_key == idempotency_key)
        )
        if t is None:
            raise NotFound("transfer", idempotency_key)
        return _transfer_result(t)


def _complete(
    session: Session, ownership: ClusterOwnership, transfer: ClusterTransfer, now: datetime
) -> None:
    if ownership.owner_node_id != transfer.to_node_id or ownership.generation == 0:
        ownership.generation += 1
    ownership.owner_node_id = transfer.to_node_id
    ownership.draining, ownership.transfer_id = False, None
    ownership.lease_expires_at = None
    ownership.updated_at = now
    transfer.state, transfer.completed_at = "completed", now
    transfer.generation_after = ownership.generation


def _supersede_pending(
    session: Session,
    ownership: ClusterOwnership,
    by: int,
    now: datetime,
    *,
    keep: int | None = None,
) -> None:
    for pending in session.scalars(
        select(ClusterTransfer).where(
            ClusterTransfer.state == "pending", ClusterTransfer.id != keep
        )
    ):
        pending.state, pending.completed_at = "superseded", now
        pending.note = f"superseded by transfer {by}"


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
    note = AuditNote(
        "cluster.takeover",
        detail={
            "to": me.node_id,
            "fenced_endpoint": fenced_endpoint,
            "targets_verified": targets_verified,
        },
    )
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        if not confirm_fenced:
            raise InvalidInput(
                "confirm with --confirm-fenced that the old owner is powered off or cut off",
                field="confirm_fenced",
                value=False,
                allowed="--confirm-fenced",
            )
        ownership = _lock_ownership(session)
        if ownership.owner_node_id is None:
            raise Conflict("there is no owner to take over from; use `fleetcron cluster transfer`")
        old = _get_node(session, ownership.owner_node_id)
        typed = normalize_endpoint(fenced_endpoint)
        if typed != old.endpoint:
            raise InvalidInput(
                f"fenced endpoint {typed!r} is not the owner's endpoint; type it exactly",
                field="fenced_endpoint",
                value=fenced_endpoint,
                allowed="the owner's exact endpoint",
            )
        mine = _get_node(session, me.node_id)
        if mine.state != "approved" or mine.fingerprint != me.fingerprint or mine.fenced_at:
            raise Conflict(f"this node ({me.node_id}) is not an approved, unfenced node")
        if old.node_id == me.node_id:
            raise Conflict("this node already owns the jobs")
        now = app.now()
        transfer = ClusterTransfer(
            idempotency_key=uuid.uuid4().hex,
            kind="takeover",
            from_node_id=old.node_id,
            to_node_id=me.node_id,
            requested_by=actor.name,
            requested_at=now,
            state="pending",
            note=f"forced; {old.endpoint} confirmed fenced by {actor.name}",
        )
        session.add(transfer)
        session.flush()
        _supersede_pending(session, ownership, transfer.id, now, keep=transfer.id)
        revoked = _revoke_claims(
            session, old.node_id, app, reason=f"revoked by forced takeover {transfer.id}"
        )
        waiting = _unfinished_claims(session, ownership.generation + 1)
        cleared = 0
        if targets_verified:
            cleared = _clear_claims(session, [c.id for c in waiting])
            waiting = []
        old.fenced_at = now
        _complete(session, ownership, transfer, now)
        note.detail.update(
            {
                "from": old.node_id,
                "generation": ownership.generation,
                "revoked_claims": revoked,
                "cleared_claims": cleared,
                **_waiting_detail(waiting),
            }
        )
        return _transfer_result(transfer)


def _unfinished_claims(session: Session, generation: int) -> list[ExecutionClaim]:
    """Claims below ``generation`` whose command may still run: not finished, deadline to come."""
    return list(
        session.scalars(
            select(ExecutionClaim).where(
                ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
                ExecutionClaim.generation < generation,
                ExecutionClaim.deadline_at > func.clock_timestamp(),
            )
        )
    )


def _clear_claims(session: Session, claim_ids: Sequence[int]) -> int:
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


def _waiting_detail(waiting: Sequence[ExecutionClaim]) -> dict[str, object]:
    """What the new owner will wait for: the audit says how long failover may take."""
    if not waiting:
        return {"waiting_claims": 0}
    return {
        "waiting_claims": len(waiting),
        "waiting_until": max(c.deadline_at for c in waiting).isoformat(),
    }


def _revoke_claims(session: Session, node_id: str, app: App, *, reason: str) -> int:
    run_ids = list(
        session.scalars(
            select(ExecutionClaim.run_id).where(
                ExecutionClaim.node_id == node_id, ExecutionClaim.state == "live"
            )
        )
    )
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
        app.now(),
        f"{reason}; its command ends by the claim deadline at the latest, and the new owner "
        "waits for that deadline before it starts this assignment",
    )
    return len(run_ids)


def verify_rejoin(app: App, actor: Actor, node: Node) -> Verdict:
    """Checks a node coming back must pass before its scheduler may claim work."""
    me = node.identity
    note = AuditNote("cluster.verify_rejoin", detail={"node": me.node_id})
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        ownership = _lock_ownership(session)
        row = _get_node(session, me.node_id)
        problems = []
        if row.state != "approved":
            problems.append(f"node is {row.state}, not approved")
        if row.fingerprint != me.fingerprint:
            problems.append("fingerprint differs from the approved record")
        if ownership.owner_node_id is None:
            problems.append("no current owner is visible")
        live = session.scalar(
            select(func.count(ExecutionClaim.id)).where(
                ExecutionClaim.node_id == me.node_id, ExecutionClaim.state == "live"
            )
        )
        if live:
            problems.append(
                f"{live} live claim(s) of this node remain; run `fleetcron cluster maintain`"
            )
        if problems:
            raise CoordinationError("rejoin refused: " + "; ".join(problems))
        row.fenced_at = None
        note.detail.update({"owner": ownership.owner_node_id, "generation": ownership.generation})
    with app.db.read() as session:
        return current_verdict(session, me.node_id, me.fingerprint, lock=False)


@dataclass
class MaintenanceResult:
    expired_claims: int = 0
    completed_transfers: list[int] = field(default_factory=list)


def maintain(app: App) -> MaintenanceResult:
    """Expire claims past their deadline (their runs become ``fenced``) and complete a
    handoff whose old owner has no live claims left. Writes only on such a transition."""
    result = MaintenanceResult()
    with app.db.session() as session:
        expired = session.execute(
            select(ExecutionClaim.run_id, ExecutionClaim.node_id, ExecutionClaim.generation)
            .where(
                ExecutionClaim.state == "live", ExecutionClaim.deadline_at < func.clock_timestamp()
            )
            .with_for_update(skip_locked=True)
        ).all()
        if expired:
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
                    app.now(),
                    f"claim of node {r.node_id} (generation {r.generation}) expired before the run "
                    "was recorded as finished",
                )
            result.expired_claims = len(expired)
    with app.db.session() as session:
        rows = session.scalars(select(ClusterOwnership).with_for_update()).all()
        if len(rows) == 1 and rows[0].draining and rows[0].transfer_id is not None:
            ownership = rows[0]
            live = session.scalar(
                select(func.count(ExecutionClaim.id)).where(
                    ExecutionClaim.node_id == ownership.owner_node_id,
                    ExecutionClaim.state == "live",
                )
            )
            transfer = session.get(ClusterTransfer, ownership.transfer_id)
            if not live and transfer is not None and transfer.state == "pending":
                _complete(session, ownership, transfer, app.now())
                record(
                    session,
                    app,
                    SYSTEM,
                    AuditNote(
                        "cluster.transfer.complete",
                        detail={
                            "transfer": transfer.id,
                            "to": transfer.to_node_id,
                            "generation": ownership.generation,
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
        if self.waiting_claims and self.waiting_until is not None:
            line += (
                f"; waiting for {self.waiting_claims} claim(s) of the previous owner until "
                f"{self.waiting_until.isoformat(timespec='seconds')}"
            )
        return line


def status(app: App, actor: Actor, node: Node | None) -> ClusterStatus:
    """Read-only: status reads never write."""
    actor.authorize("cluster.read")
    if node is None:
        return ClusterStatus("standalone", None, None, 0, False, None, None, [], {})
    me = node.identity
    with app.db.read() as session:
        rows = session.scalars(select(ClusterOwnership)).all()
        ownership = rows[0] if len(rows) == 1 else None
        running: dict[str, int] = {
            node_id: count
            for node_id, count in session.execute(
                select(ExecutionClaim.node_id, func.count(ExecutionClaim.id))
                .where(ExecutionClaim.state == "live")
                .group_by(ExecutionClaim.node_id)
            )
        }

        pending = None
        if ownership is not None and ownership.transfer_id is not None:
            t = session.get(ClusterTransfer, ownership.transfer_id)
            pending = _transfer_result(t) if t else None
        nodes = [
            NodeStatus(
                n.node_id,
                n.hostname,
                n.endpoint,
                n.state,
                n.fenced_at is not None,
                running.get(n.node_id, 0),
            )
            for n in session.scalars(select(ClusterNode).order_by(ClusterNode.id))
        ]
        verdict = current_verdict(session, me.node_id, me.fingerprint, lock=False)
        waiting = _unfinished_claims(session, ownership.generation) if ownership else []
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
    )


@dataclass
class Lease:
    """Opt-in automatic failover: the owner renews a lease in the ownership row; when it
    has expired by the database clock, an approved standby takes over with generation+1.
    Safety still comes from the guard: the lease only decides *when* to take over. An owner
    that could not renew within its lease stops claiming at once (:meth:`holds`)."""

    app: App
    node: Node
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
        """Renew (as owner) or take over an expired lease (as standby); returns what happened."""
        me = self.node.identity
        started = time.monotonic()
        with self.app.db.session() as session:
            rows = session.scalars(select(ClusterOwnership).with_for_update()).all()
            if len(rows) != 1 or rows[0].owner_node_id is None:
                return "no owner"
            ownership = rows[0]
            if ownership.owner_node_id == me.node_id:
                # Renewed while draining for a handoff too: the lease says this node is
                # alive; without it the owner would fence itself and kill the runs the
                # handoff is waiting for.
                ownership.lease_expires_at = db_now(session) + timedelta(seconds=self.duration)
                self._renewed_at = started
                return "draining" if ownership.draining else "renewed"
            if ownership.lease_expires_at is None or ownership.lease_expires_at > db_now(session):
                return "standby"
            mine = _get_node(session, me.node_id)
            if mine.state != "approved" or mine.fingerprint != me.fingerprint or mine.fenced_at:
                return "not eligible"
            return self._fail_over(session, ownership)

    def _fail_over(self, session: Session, ownership: ClusterOwnership) -> str:
        me = self.node.identity
        old = _get_node(session, str(ownership.owner_node_id))
        now = self.app.now()
        transfer = ClusterTransfer(
            idempotency_key=uuid.uuid4().hex,
            kind="failover",
            from_node_id=old.node_id,
            to_node_id=me.node_id,
            requested_by="system",
            requested_at=now,
            state="pending",
            note=f"lease of {old.node_id} expired at {ownership.lease_expires_at}",
        )
        session.add(transfer)
        session.flush()
        _supersede_pending(session, ownership, transfer.id, now, keep=transfer.id)
        revoked = _revoke_claims(
            session, old.node_id, self.app, reason=f"revoked by failover {transfer.id}"
        )
        waiting = _unfinished_claims(session, ownership.generation + 1)
        old.fenced_at = now
        _complete(session, ownership, transfer, now)
        ownership.lease_expires_at = db_now(session) + timedelta(seconds=self.duration)
        self._renewed_at = time.monotonic()
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
                    "revoked_claims": revoked,
                    **_waiting_detail(waiting),
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


# -- active cleanup after a change of owner ---------------------------------------------------


def mark_scope(app: App) -> str:
    """The name under which this installation keeps its highest-generation mark on targets.

    Derived from the database (the cluster's system identifier, the database's name and
    oid), so every node of one cluster uses the same mark, two installations sharing a
    target user never read each other's generations, and a database created again under
    the same name (a new installation, generations from 1) does not inherit old marks."""
    with app.db.read() as session:
        row = session.execute(
            text(
                "SELECT (SELECT system_identifier FROM pg_control_system()), d.datname, d.oid "
                "FROM pg_database d WHERE d.datname = current_database()"
            )
        ).one()
    seed = f"fleetcron-mark:{row[0]}:{row[1]}:{row[2]}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CleanupTarget:
    """An SSH target to clean, with what is needed to connect (the key still encrypted)."""

    target_id: int
    name: str
    host: str | None
    port: int | None
    user: str | None
    private_key_enc: bytes | None
    host_key: str | None


@dataclass(frozen=True)
class CleanupPlan:
    """What a new owner at ``generation`` cleans: the older generations' unfinished claims
    (every kind of target) and the SSH targets they run on."""

    generation: int
    claims: tuple[CleanupClaim, ...]
    targets: tuple[CleanupTarget, ...]


def active_cleanup_plan(
    app: App, node_id: str, fingerprint: str, done_generation: int | None
) -> CleanupPlan | None:
    """The cleanup this node should run now: ``None`` unless it is the owner at a
    generation other than ``done_generation`` (cleanup runs once per generation). A plan
    with no targets means nothing to clean (no older claim runs on an SSH target).

    Read-only; the claims are written by :func:`finish_active_cleanup` under the lock."""
    with app.db.read() as session:
        owner = session.execute(
            select(ClusterOwnership.owner_node_id, ClusterOwnership.generation)
        ).all()
        if len(owner) != 1 or owner[0][0] != node_id or owner[0][1] == done_generation:
            return None
        verdict = current_verdict(session, node_id, fingerprint, lock=False)
        if verdict.kind != "owner":
            return None
        generation = verdict.generation
        rows = session.execute(
            select(
                ExecutionClaim.id,
                ExecutionClaim.generation,
                Target.id,
                Target.kind,
                Run.assignment_id,
            )
            .join(Run, Run.id == ExecutionClaim.run_id)
            .join(Target, Target.id == Run.target_id)
            .where(
                ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
                ExecutionClaim.generation < generation,
                ExecutionClaim.deadline_at > func.clock_timestamp(),
            )
        ).all()
        claims = tuple(CleanupClaim(r[0], r[2], r[3], r[1], r[4]) for r in rows)
        wanted = targets_to_clean(claims, generation)
        targets = (
            tuple(
                CleanupTarget(t.id, t.name, t.host, t.port, t.user, t.private_key_enc, t.host_key)
                for t in session.scalars(
                    select(Target)
                    .where(Target.id.in_(wanted))
                    .options(undefer(Target.private_key_enc))
                    .order_by(Target.id)
                )
            )
            if wanted
            else ()
        )
    return CleanupPlan(generation, claims, targets)


@dataclass(frozen=True)
class CleanupResult:
    cleared_claims: int
    waiting_claims: int
    refused: str | None = None


def clear_cleaned_claims(
    app: App,
    node_id: str,
    fingerprint: str,
    plan: CleanupPlan,
    outcomes: Sequence[TargetCleanup],
) -> tuple[int, str | None]:
    """Mark ``cleared``, in one transaction under the ownership lock, the older claims on
    the targets ``outcomes`` report cleaned (their assignments start on the next tick).
    Returns ``(cleared, None)``, or ``(0, why)`` when this node is no longer the owner at
    the plan's generation (nothing is cleared then). Called as each target finishes, so a
    slow or unreachable target never delays the others."""
    with app.db.session() as session:
        verdict = current_verdict(session, node_id, fingerprint, lock=True)
        if verdict.kind != "owner" or verdict.generation != plan.generation:
            return 0, (
                f"this node is no longer the owner at generation {plan.generation} "
                f"({verdict.reason}); nothing cleared"
            )
        ids = claims_cleared_by(plan.claims, plan.generation, outcomes)
        return _clear_claims(session, ids), None


def finish_active_cleanup(
    app: App,
    plan: CleanupPlan,
    outcomes: Sequence[TargetCleanup],
    *,
    cleared: int,
    refused: str | None = None,
) -> CleanupResult:
    """Record what active cleanup did: one audit event ``cluster.active_cleanup`` per
    generation with the counts, the targets cleaned and those that failed (their
    assignments wait for the claims' deadlines), and the claims still waited for."""
    names = {t.target_id: t.name for t in plan.targets}
    clean = {o.target_id for o in outcomes if o.error is None and o.mark is not None}
    detail: dict[str, object] = {
        "generation": plan.generation,
        "targets": len(plan.targets),
        "targets_cleaned": sorted(names[t] for t in clean if t in names),
        "targets_failed": {
            names.get(o.target_id, str(o.target_id)): o.error or "unknown"
            for o in outcomes
            if o.target_id not in clean
        },
        "killed_groups": sum(o.killed for o in outcomes if o.target_id in clean),
        "cleared_claims": cleared,
    }
    if refused:
        detail["refused"] = refused
    with app.db.session() as session:
        waiting = _unfinished_claims(session, plan.generation)
        detail.update(_waiting_detail(waiting))
        record(
            session,
            app,
            SYSTEM,
            AuditNote("cluster.active_cleanup", detail=detail),
            success=refused is None,
        )
    log.warning(
        "cluster: active cleanup at generation %d: %d of %d target(s) cleaned, %d claim(s) "
        "cleared, %d still waited for",
        plan.generation,
        len(clean),
        len(plan.targets),
        cleared,
        len(waiting),
        extra={
            "action": "cluster.active_cleanup",
            "generation": plan.generation,
            "cleared_claims": cleared,
            "failed_targets": len(plan.targets) - len(clean),
        },
    )
    return CleanupResult(cleared, len(waiting), refused)
