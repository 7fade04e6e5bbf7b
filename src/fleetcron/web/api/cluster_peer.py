"""/api/v1/cluster/identity: routes other nodes call, authenticated by a signed envelope.

These routes have no user: the caller proves it holds the cluster's coordination secret
by signing its request (:mod:`fleetcron.coordination.signing`), and the answer is signed
the same way. Each declares the dependency made by :func:`signed_peer`, whose ``peer``
attribute marks it for the route-enumerating permission test, in place of
``requires(action)``. A refused request gets 401 ``unauthenticated``; a node that is not
in cluster mode answers 404, as if the route did not exist.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from fleetcron.app import App
from fleetcron.coordination.nonces import DbNonceStore
from fleetcron.coordination.peer import CHALLENGE_PURPOSE, RESPONSE_PURPOSE
from fleetcron.coordination.secrets import current_and_accepted
from fleetcron.coordination.signing import DEFAULT_WINDOW, response_for, verify
from fleetcron.errors import AuthenticationFailed, CoordinationError, InvalidInput
from fleetcron.services.cluster.status import Node
from fleetcron.web.deps import app_of, the_app

log = logging.getLogger(__name__)

router = APIRouter(tags=["cluster"])
AppDep = Annotated[App, Depends(app_of)]

MAX_BODY_BYTES = 16 * 1024
"""A signed challenge is a few hundred bytes; anything far longer is refused unread."""

_NONCE_STORE = "peer_nonces"  # attribute of the web app's state: one store per process


@dataclass(frozen=True)
class PeerRequest:
    """A verified request from another node."""

    envelope: dict[str, Any]
    payload: dict[str, Any]
    secret: bytes = field(repr=False)
    """The current coordination secret, to sign the answer with."""


def signed_peer(purpose: str) -> Callable[[Request], Awaitable[PeerRequest]]:
    """A dependency that admits only a request signed for ``purpose`` with an accepted
    coordination secret, within the clock window, whose nonce no node has seen."""

    async def dependency(request: Request) -> PeerRequest:
        app = the_app(request)
        if not app.settings.cluster:
            raise StarletteHTTPException(status_code=404)
        envelope = await _json_body(request)
        store = getattr(request.app.state, _NONCE_STORE, None)
        if store is None:
            store = DbNonceStore(app, DEFAULT_WINDOW)
            setattr(request.app.state, _NONCE_STORE, store)
        caller = request.client.host if request.client else "?"
        return await run_in_threadpool(_verify, app, store, envelope, purpose, caller)

    dependency.peer = True  # type: ignore[attr-defined]
    dependency.purpose = purpose  # type: ignore[attr-defined]
    return dependency


async def _json_body(request: Request) -> Any:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise AuthenticationFailed(
                f"refused coordination message: longer than {MAX_BODY_BYTES} bytes"
            )
    try:
        return json.loads(body)
    except ValueError:
        raise AuthenticationFailed(
            "refused coordination message: the body is not a JSON signed envelope"
        ) from None


def _verify(app: App, store: DbNonceStore, envelope: Any, purpose: str, caller: str) -> PeerRequest:
    try:
        current, accepted = current_and_accepted(app)
        payload = verify(envelope, secrets=accepted, purpose=purpose, now=app.now(), seen=store)
    except CoordinationError as exc:
        log.warning(
            "cluster: %s from %s: %s",
            purpose,
            caller,
            exc.message,
            extra={"action": "cluster.peer.refused", "purpose": purpose},
        )
        raise AuthenticationFailed(exc.message) from exc
    return PeerRequest(dict(envelope), payload, current)


@router.post("/cluster/identity")
def identity(
    app: AppDep,
    peer: Annotated[PeerRequest, Depends(signed_peer(CHALLENGE_PURPOSE))],
) -> JSONResponse:
    """Answer a signed identity challenge with this node's identity, signed and bound to
    the challenge's nonce."""
    endpoint = peer.payload.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise InvalidInput(
            "endpoint: the challenge must name the endpoint it was sent to",
            field="endpoint",
            value=endpoint,
            allowed="the URL the challenger used",
        )
    me = Node(app).identity
    answer = response_for(peer.envelope, peer.secret, RESPONSE_PURPOSE, me.as_dict(), now=app.now())
    log.info(
        "cluster: answered an identity challenge sent to %r",
        endpoint,
        extra={"action": "cluster.identity", "node": me.node_id},
    )
    return JSONResponse(answer)
