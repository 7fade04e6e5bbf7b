"""Which node of a replicated pair writes what, so that no row has two writers.

The coordination rows (ownership, transfers, approvals, retirements) and the operators'
edits are written by one node: the owner, or before there is one, the first node of the
pair (:func:`require_writer_here`, :func:`require_config_writer`, which the audited write
transaction asks). The owner's periodic writes are left to it by the other node
(:func:`pair_standby`). For a shared database every check is a no-op.
"""

from __future__ import annotations

from typing import Any

from fleetcron.app import App
from fleetcron.core.topology import Topology
from fleetcron.errors import Conflict
from fleetcron.store import replication as sql


def require_writer_here(app: App, session: Any, owner_node_id: str | None, action: str) -> None:
    """In a replicated pair, the changes of the coordination rows (ownership, transfers,
    approvals, retirements) are written by one node only, so they cannot conflict: the
    owner, or before there is one, the first node (the one whose ids are odd). Elsewhere
    this raises :class:`Conflict` naming where to do it. No-op for a shared database."""
    if app.settings.topology is not Topology.REPLICATED_PAIR:
        return
    from fleetcron.coordination.node import Node
    from fleetcron.store.schema import ClusterNode

    me = Node(app).identity.node_id
    if owner_node_id is not None:
        if owner_node_id == me:
            return
        from sqlalchemy import select

        endpoint = session.scalar(
            select(ClusterNode.endpoint).where(ClusterNode.node_id == owner_node_id)
        )
        raise Conflict(
            f"{action}: in a replicated pair this is done on the owner, node "
            f"{owner_node_id} ({endpoint or 'endpoint unknown'}); run it there"
        )
    states = sql.sequence_state(session.connection(), ["cluster_transfers"])
    if not states or states[0].increment != 2:
        raise Conflict(
            f"{action}: replication is not set up on this node: run "
            "`fleetcron cluster replication setup` first"
        )
    if states[0].next_value % 2 != 1:
        raise Conflict(
            f"{action}: there is no owner yet, and until there is one this is done on the "
            "first node of the pair (where `fleetcron cluster replication setup` ran)"
        )


def pair_standby(app: App) -> bool:
    """Whether this node is in a replicated pair and not the owner in its own database:
    then it leaves the owner's periodic writes (claim expiry, handoff completion, alert
    evaluation and deliveries) to the owner, so that no row gets a second writer."""
    if app.settings.topology is not Topology.REPLICATED_PAIR:
        return False
    from fleetcron.coordination.node import Node
    from fleetcron.coordination.shard_rows import sole_owner

    with app.db.read() as session:
        owner = sole_owner(session)
    return owner is None or owner != Node(app).identity.node_id


PAIR_ANYWHERE = frozenset({"job.run", "login", "login.refused", "logout", "token.create"})


"""Audited actions either node of a pair may write: each inserts new rows only (a queued
manual run, a session, a token), with node-scoped ids and random keys."""


def require_config_writer(app: App, session: Any, action: str) -> None:
    """In a replicated pair, operator edits are made on the owner (before there is one, on
    the first node). Logical replication applies whole rows: an edit of a row on one node
    and the owner's write of the same row (a job's assignments advance on every fire) would
    overwrite each other, and two nodes creating the same name at once would stop
    replication at the second. The actions of :data:`PAIR_ANYWHERE` are allowed anywhere;
    the other ``cluster.*`` actions check their own writer (a secret rotation is the
    owner's). Before replication is set up, the
    node is not yet paired and everything is allowed."""
    if action in PAIR_ANYWHERE or (
        action.startswith("cluster.") and action != "cluster.rotate_secret"
    ):
        return
    states = sql.sequence_state(session.connection(), ["audit_events"])
    if not states or states[0].increment != 2:
        return  # not paired yet
    from fleetcron.coordination.shard_rows import sole_owner

    require_writer_here(app, session, sole_owner(session), action)
