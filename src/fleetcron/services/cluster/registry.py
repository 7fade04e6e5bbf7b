"""The cluster's node registry: this node's announcement, approval, retirement
and the checks before a fenced node may rejoin.

Discovery never approves: a node announces itself as a candidate and an admin approves it
after its identity was verified (:mod:`fleetcron.services.cluster.peers`).
"""

from __future__ import annotations

from sqlalchemy import select

from fleetcron.app import SYSTEM, Actor, App
from fleetcron.coordination.guard import current_verdict
from fleetcron.coordination.identity import NodeIdentity
from fleetcron.coordination.node import Node
from fleetcron.coordination.ownership_change import (
    ensure_ownership_row,
    get_node,
    live_claims_of,
    lock_ownership,
)
from fleetcron.coordination.shard_rows import fixed_shards
from fleetcron.core.ownership import Verdict
from fleetcron.core.topology import Topology
from fleetcron.errors import Conflict, CoordinationError
from fleetcron.services.audit import AuditNote, audited, record
from fleetcron.store.schema import ClusterNode

__all__ = ["announce", "approve", "retire", "verify_rejoin"]


def announce(app: App, node: Node) -> ClusterNode:
    """Register this node as a candidate, or refresh its record when something changed.

    Discovery never approves: a new node stays a candidate until an admin approves it."""
    me = node.identity
    with app.db.session() as session:
        if app.settings.topology is not Topology.REPLICATED_PAIR:
            # In a replicated pair the row is created once, by replication setup on the
            # first node, and copied to the other: two nodes creating it would make two.
            ensure_ownership_row(session, app.now(), shards=fixed_shards(app, session))
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


def approve(app: App, actor: Actor, identity: NodeIdentity) -> ClusterNode:
    """Approve a candidate whose identity was verified (signed challenge to its endpoint).

    Refused when another live, approved record has the same node id with a different
    fingerprint (a cloned disk), or when the database identifiers differ."""
    note = AuditNote("cluster.approve", detail=_node_detail(identity))
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        if app.settings.topology is Topology.REPLICATED_PAIR:
            from fleetcron.coordination.ownership_change import locked_ownership
            from fleetcron.services.writer import require_writer_here

            ownership = locked_ownership(session)
            owner = ownership.owner_node_id if ownership else None
            require_writer_here(app, session, owner, "approve")
        row = get_node(session, identity.node_id)
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
        ownership = lock_ownership(session)
        if app.settings.topology is Topology.REPLICATED_PAIR:
            from fleetcron.services.writer import require_writer_here

            require_writer_here(app, session, ownership.owner_node_id, "retire")
        row = get_node(session, node_id)
        if ownership.owner_node_id == node_id:
            raise Conflict(f"node {node_id} owns the jobs; transfer ownership or take over first")
        row.state, row.retired_at = "retired", app.now()


def set_drained(app: App, actor: Actor, node_id: str, *, drained: bool) -> bool:
    """Drain a node (``cluster drain``) or end its drain (``cluster undrain``): with the
    members placement a drained node takes no shard, and the shards it holds are handed
    to the other live nodes by draining handoffs (each once its runs ended); it stays
    drained across its restarts. Returns whether anything changed."""
    note = AuditNote("cluster.drain" if drained else "cluster.undrain", detail={"node": node_id})
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        if app.settings.shard_placement != "members":
            raise Conflict(
                f"{'drain' if drained else 'undrain'}: only with FLEETCRON_SHARD_PLACEMENT="
                "members (the nodes share the shards); with one owner, hand the jobs to "
                "another node: `fleetcron cluster transfer --to NODE`"
            )
        row = get_node(session, node_id)
        if drained and row.state != "approved":
            raise Conflict(f"drain: node {node_id} is {row.state}; it holds no shard")
        changed = (row.drained_at is not None) != drained
        if changed:
            row.drained_at = app.now() if drained else None
        note.detail["changed"] = changed
        return changed


def verify_rejoin(app: App, actor: Actor, node: Node) -> Verdict:
    """Checks a node coming back must pass before its scheduler may claim work."""
    me = node.identity
    note = AuditNote("cluster.verify_rejoin", detail={"node": me.node_id})
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        ownership = lock_ownership(session)
        row = get_node(session, me.node_id)
        problems = []
        if app.settings.topology is Topology.REPLICATED_PAIR:
            from fleetcron.services.pair.replication import rejoin_problems

            # A newer owner and generation may be on its way from the peer: not before
            # replication from it runs and is current.
            problems.extend(rejoin_problems(app))
        if row.state != "approved":
            problems.append(f"node is {row.state}, not approved")
        if row.fingerprint != me.fingerprint:
            problems.append("fingerprint differs from the approved record")
        if ownership.owner_node_id is None:
            problems.append("no current owner is visible")
        live = live_claims_of(session, me.node_id)
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
