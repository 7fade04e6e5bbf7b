"""Asking the other node of a replicated pair: a signed call to its endpoint with the
coordination secret (:func:`call`), and the owner and generation each side's own database
holds (:func:`local_ownership`, :func:`peer_ownership`), which a returning node compares
before it starts its scheduler."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from fleetcron.app import App
from fleetcron.coordination.node import Node
from fleetcron.coordination.peer_calls import (
    OWNERSHIP_PATH,
    OWNERSHIP_PURPOSE,
    OWNERSHIP_RESPONSE,
    signed_call,
)
from fleetcron.coordination.secrets import current_and_accepted
from fleetcron.coordination.shard_rows import shard_rows
from fleetcron.coordination.signing import MemoryNonceStore
from fleetcron.errors import CoordinationError
from fleetcron.store.schema import ClusterNode

PEER_TIMEOUT_S = 10.0


def call(app: App, endpoint: str, path: str, purpose: str, response: str, payload: Any) -> Any:
    current, accepted = current_and_accepted(app)
    return signed_call(
        endpoint,
        path,
        purpose,
        response,
        payload,
        secret=current,
        accepted=accepted,
        seen=MemoryNonceStore(),
        now=app.now(),
        timeout_s=PEER_TIMEOUT_S,
    )


def local_ownership(app: App) -> tuple[str | None, int]:
    """The owner of every shard and the highest generation in this node's own database
    (None, 0 without rows or with shards of different owners)."""
    with app.db.read() as session:
        rows = shard_rows(session, lock=False)
    if not rows or len({r.owner_node_id for r in rows}) != 1:
        return None, 0
    return rows[0].owner_node_id, max(r.generation for r in rows)


def peer_ownership(app: App) -> tuple[str, str | None, int]:
    """Ask the other approved node of the pair (signed query) for the owner and generation
    in its database; returns (its endpoint, owner, generation). Raises
    :class:`CoordinationError` when there is no such node or it does not answer."""
    me = Node(app).identity.node_id
    with app.db.read() as session:
        endpoints = session.scalars(
            select(ClusterNode.endpoint).where(
                ClusterNode.node_id != me, ClusterNode.state == "approved"
            )
        ).all()
    if len(endpoints) != 1:
        raise CoordinationError(
            f"a replicated pair has one other approved node; this node's registry has "
            f"{len(endpoints)}"
        )
    answer = call(app, endpoints[0], OWNERSHIP_PATH, OWNERSHIP_PURPOSE, OWNERSHIP_RESPONSE, {})
    generation = answer.get("generation")
    if not isinstance(generation, int):
        raise CoordinationError(f"the peer at {endpoints[0]} gave no generation")
    owner = answer.get("owner")
    return endpoints[0], owner if isinstance(owner, str) else None, generation
