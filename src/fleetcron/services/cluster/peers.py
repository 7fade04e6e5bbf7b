"""Approving a node through its endpoint, and checking that a node still answers there.

A node announces itself as a candidate when it starts
(:func:`fleetcron.services.cluster.status.announce`);
discovery never approves it. An admin approves a node by giving its endpoint: this node
sends it a signed identity challenge, and only an answer signed with the cluster's secret,
from a node on the same database cluster that has announced itself, is passed to
:func:`fleetcron.services.cluster.status.approve` (which refuses a fingerprint other than the
registered one: a cloned disk). An unreachable endpoint or an unsigned answer is refused
with a message that names the endpoint.
"""

from __future__ import annotations

import dataclasses
import logging

from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.coordination.identity import NodeIdentity, normalize_endpoint
from fleetcron.coordination.peer import challenge
from fleetcron.coordination.secrets import current_and_accepted
from fleetcron.coordination.signing import MemoryNonceStore
from fleetcron.core.topology import Topology
from fleetcron.errors import Conflict, CoordinationError, FleetcronError
from fleetcron.services.audit import AuditNote, record_failure
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.secrets import ensure_secret
from fleetcron.services.cluster.status import Node
from fleetcron.store.schema import ClusterNode

__all__ = [
    "APPROVE_TIMEOUT_S",
    "REACHABILITY_TIMEOUT_S",
    "approve_endpoint",
    "node_reachability",
    "peers_reachable",
]

log = logging.getLogger(__name__)

APPROVE_TIMEOUT_S = 10.0
"""How long an approval waits for the node's answer (per connection step)."""

REACHABILITY_TIMEOUT_S = 3.0
"""How long the status panel waits for a node's answer (per connection step)."""


def approve_endpoint(app: App, actor: Actor, endpoint: str) -> ClusterNode:
    """Approve the node that answers a signed identity challenge at ``endpoint``.

    Admin only (``cluster.manage``); audited as ``cluster.approve``, refusals too. Creates
    the cluster's coordination secret if there is none yet. Returns the node's record, now
    ``approved``; an endpoint other than the one it registered is kept as an alias.

    Raises :class:`~fleetcron.errors.PermissionDenied` for another role,
    :class:`~fleetcron.errors.InvalidInput` for a malformed endpoint,
    :class:`~fleetcron.errors.CoordinationError` when this node is not in cluster mode or
    the endpoint is unreachable or gives no valid signed identity, and
    :class:`~fleetcron.errors.Conflict` for a node on another database cluster, one that
    has not announced itself, a retired one, or one whose fingerprint differs from its
    registration.
    """
    note = AuditNote("cluster.approve", detail={"endpoint": str(endpoint)[:255]})
    try:
        actor.authorize("cluster.manage")
        if not app.settings.cluster:
            raise CoordinationError(
                "this node is not in cluster mode; nodes are approved from a cluster node"
            )
        url = normalize_endpoint(endpoint)
        note.detail["endpoint"] = url
        mine = Node(app).identity
        ensure_secret(app, actor)
        identity = _challenge(app, url, timeout_s=APPROVE_TIMEOUT_S)
        note.detail["node"] = identity.node_id
        _check_database_cluster(app, url, identity, mine)
        _check_announced(app, url, identity)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    # The endpoint that answered is recorded (as an alias if the node registered another).
    return cluster.approve(app, actor, dataclasses.replace(identity, endpoint=url))


def _check_database_cluster(app: App, url: str, identity: NodeIdentity, mine: NodeIdentity) -> None:
    """The nodes of a shared-database cluster use one PostgreSQL; each node of a replicated
    pair its own."""
    if app.settings.topology is Topology.REPLICATED_PAIR:
        # Each node of a pair has its own PostgreSQL: the same identifier would be a copy
        # of this node's cluster (a clone), whose node identities are not its own.
        if identity.db_system_id == mine.db_system_id and identity.node_id != mine.node_id:
            raise Conflict(
                f"the node at {url} ({identity.node_id}) uses the same database cluster "
                f"({identity.db_system_id}) as this node; in a replicated pair each node "
                "has its own PostgreSQL (a copied cluster needs a new initdb)"
            )
    elif identity.db_system_id != mine.db_system_id:
        raise Conflict(
            f"the node at {url} ({identity.node_id}) uses database cluster "
            f"{identity.db_system_id}, this node uses {mine.db_system_id}; every node of "
            "a cluster must use the same PostgreSQL"
        )


def _check_announced(app: App, url: str, identity: NodeIdentity) -> None:
    """A node is approved once it has announced itself (registered its record)."""
    with app.db.read() as session:
        announced = session.scalar(
            select(ClusterNode.id).where(ClusterNode.node_id == identity.node_id)
        )
    if announced is None:
        raise Conflict(
            f"the node at {url} ({identity.node_id}, {identity.hostname}) has not announced "
            "itself; start it in cluster mode, then approve it again"
        )


def peers_reachable(app: App, status: cluster.ClusterStatus) -> dict[str, bool]:
    """Whether each approved node but this one answers at its endpoint, by node id (the
    status panel's column; checked when asked, never in the background)."""
    wanted = [
        n.node_id for n in status.nodes if n.state == "approved" and n.node_id != status.this_node
    ]
    if not wanted:
        return {}
    with app.db.read() as session:
        rows = {
            n.node_id: n
            for n in session.scalars(select(ClusterNode).where(ClusterNode.node_id.in_(wanted)))
        }
    return {node_id: node_reachability(app, rows[node_id]) for node_id in wanted}


def node_reachability(app: App, node_row: ClusterNode) -> bool:
    """True when the node at ``node_row.endpoint`` answers a signed identity challenge
    within :data:`REACHABILITY_TIMEOUT_S` as that node (same node id and fingerprint).

    Read-only on the registry, for the status panel; a failure is logged, not raised.
    """
    try:
        identity = _challenge(app, node_row.endpoint, timeout_s=REACHABILITY_TIMEOUT_S)
    except CoordinationError as exc:
        log.info(
            "cluster: node %s is unreachable: %s",
            node_row.node_id,
            exc.message,
            extra={"action": "cluster.reachability", "node": node_row.node_id},
        )
        return False
    if (identity.node_id, identity.fingerprint) != (node_row.node_id, node_row.fingerprint):
        log.warning(
            "cluster: %s answered as node %s, not as node %s",
            node_row.endpoint,
            identity.node_id,
            node_row.node_id,
            extra={"action": "cluster.reachability", "node": node_row.node_id},
        )
        return False
    return True


def _challenge(app: App, url: str, *, timeout_s: float) -> NodeIdentity:
    current, accepted = current_and_accepted(app)
    # The answer is bound to this challenge's fresh nonce, so a replayed answer is refused
    # without a shared store: remembering its nonce for this one call is enough.
    return challenge(
        url,
        secret=current,
        accepted=accepted,
        seen=MemoryNonceStore(),
        now=app.now(),
        timeout_s=timeout_s,
    )
