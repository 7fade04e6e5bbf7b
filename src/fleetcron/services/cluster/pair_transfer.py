"""A handoff requested on either node of a replicated pair, made by the owner.

In a replicated pair the ownership row has one writer, the owner (see
:func:`fleetcron.services.writer.require_writer_here`). A transfer asked for on the
other node is sent to the owner as a signed, idempotent prepare request
(:data:`~fleetcron.coordination.peer_calls.TRANSFER_PATH`): the owner records it and drains
at once (no new claims); when its running claims have finished it commits the new owner and
generation + 1 in its own database. The requesting node learns the outcome from the answer;
its own database receives the ownership transaction through replication, and the new owner
starts claiming only once that transaction has arrived in its database (its guard reads the
local row). If the answer is lost, a signed status query by the same idempotency key tells
what the owner recorded; retrying the request with the key returns the same transfer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.coordination.peer_calls import (
    TRANSFER_PATH,
    TRANSFER_PURPOSE,
    TRANSFER_RESPONSE,
    TRANSFER_STATUS_PATH,
    TRANSFER_STATUS_PURPOSE,
    TRANSFER_STATUS_RESPONSE,
)
from fleetcron.coordination.shard_rows import sole_owner
from fleetcron.errors import Conflict, CoordinationError, InvalidInput
from fleetcron.services.audit import AuditNote, record
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.status import Node, TransferResult
from fleetcron.services.pair import peer as pair_peer
from fleetcron.store.schema import ClusterNode

log = logging.getLogger(__name__)

__all__ = ["prepare_from_peer", "request_transfer", "status_for_peer"]


def _owner(app: App) -> tuple[str | None, str | None]:
    with app.db.read() as session:
        owner = sole_owner(session)
        endpoint = session.scalar(select(ClusterNode.endpoint).where(ClusterNode.node_id == owner))
    return owner, endpoint


def _result(answer: Mapping[str, Any]) -> TransferResult:
    try:
        return TransferResult(
            id=int(answer["id"]),
            kind=str(answer["kind"]),
            state=str(answer["state"]),
            from_node=answer["from_node"],
            to_node=str(answer["to_node"]),
            generation_after=answer["generation_after"],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CoordinationError(f"the owner's answer is not a transfer: {exc}") from exc


def request_transfer(
    app: App, actor: Actor, to_node: str, *, idempotency_key: str | None = None
) -> TransferResult:
    """Hand the jobs to ``to_node`` from either node of the pair: on the owner directly,
    elsewhere through the owner (signed prepare request; a lost answer is recovered with
    a signed status query). Idempotent by ``idempotency_key``."""
    actor.authorize("cluster.manage")
    key = idempotency_key or uuid.uuid4().hex
    me = Node(app).identity
    owner, endpoint = _owner(app)
    if owner is None or owner == me.node_id:
        return cluster.request_transfer(app, actor, to_node, idempotency_key=key)
    if endpoint is None:
        raise Conflict(f"the owner {owner} has no endpoint in this node's registry")
    payload = {
        "to": to_node,
        "idempotency_key": key,
        "requested_by": actor.name,
        "from_node": me.node_id,
    }
    result = _result(_ask_owner(app, endpoint, payload, key))
    with app.db.session() as session:
        record(
            session,
            app,
            actor,
            AuditNote(
                "cluster.transfer.forwarded",
                detail={
                    "to": to_node,
                    "idempotency_key": key,
                    "owner": owner,
                    "state": result.state,
                },
            ),
            success=True,
        )
    return result


def _ask_owner(app: App, endpoint: str, payload: dict[str, Any], key: str) -> Any:
    """The owner's answer to a forwarded transfer: the signed prepare request, or, when its
    answer is lost, the signed status query of the same ``key``."""
    try:
        return pair_peer.call(
            app, endpoint, TRANSFER_PATH, TRANSFER_PURPOSE, TRANSFER_RESPONSE, payload
        )
    except CoordinationError as lost:
        log.warning(
            "cluster: no answer from the owner to transfer %s: %s; asking its status",
            key,
            lost.message,
            extra={"action": "cluster.pair.transfer.retry", "idempotency_key": key},
        )
        try:
            return pair_peer.call(
                app,
                endpoint,
                TRANSFER_STATUS_PATH,
                TRANSFER_STATUS_PURPOSE,
                TRANSFER_STATUS_RESPONSE,
                {"idempotency_key": key},
            )
        except CoordinationError as exc:
            raise CoordinationError(
                f"the owner ({endpoint}) did not confirm transfer {key}: {lost.message}; "
                f"retry with --idempotency-key {key} (it returns the same transfer)"
            ) from exc


def _text(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value or len(value) > 128:
        raise InvalidInput(
            f"{name}: the signed request must carry it as text of 1 to 128 characters",
            field=name,
            value=value,
            allowed="text of 1 to 128 characters",
        )
    return value


def prepare_from_peer(app: App, payload: Mapping[str, Any]) -> TransferResult:
    """On the owner: record the transfer the other node sent (signature already checked).
    The requester was authorized on its node; here it acts as that admin, audited with the
    node it came from."""
    actor = Actor(f"{_text(payload, 'requested_by')} via {_text(payload, 'from_node')}", "admin")
    return cluster.request_transfer(
        app, actor, _text(payload, "to"), idempotency_key=_text(payload, "idempotency_key")
    )


def status_for_peer(app: App, payload: Mapping[str, Any]) -> TransferResult:
    return cluster.transfer_status(app, Actor("peer", "viewer"), _text(payload, "idempotency_key"))


def transfer_status(app: App, actor: Actor, idempotency_key: str) -> TransferResult:
    """The transfer's state as the owner has it (signed status query), else as here."""
    actor.authorize("cluster.read")
    me = Node(app).identity
    owner, endpoint = _owner(app)
    if owner is None or owner == me.node_id or endpoint is None:
        return cluster.transfer_status(app, actor, idempotency_key)
    answer = pair_peer.call(
        app,
        endpoint,
        TRANSFER_STATUS_PATH,
        TRANSFER_STATUS_PURPOSE,
        TRANSFER_STATUS_RESPONSE,
        {"idempotency_key": idempotency_key},
    )
    return _result(answer)
