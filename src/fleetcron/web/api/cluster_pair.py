"""Routes the other node of a replicated pair calls: a transfer prepared on the owner, and
its status (to recover a lost acknowledgement). Authenticated by a signed envelope, as
:mod:`fleetcron.web.api.cluster_peer`; the answers are signed and bound to the request."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from fleetcron.app import App
from fleetcron.coordination.peer_calls import (
    OWNERSHIP_PURPOSE,
    OWNERSHIP_RESPONSE,
    TRANSFER_PURPOSE,
    TRANSFER_RESPONSE,
    TRANSFER_STATUS_PURPOSE,
    TRANSFER_STATUS_RESPONSE,
)
from fleetcron.coordination.signing import response_for
from fleetcron.services.cluster import pair_transfer
from fleetcron.services.pair import peer as pair_peer
from fleetcron.web.api.cluster_peer import PeerRequest, signed_peer
from fleetcron.web.deps import app_of

router = APIRouter(tags=["cluster"])
AppDep = Annotated[App, Depends(app_of)]


@router.post("/cluster/pair/transfer")
def prepare_transfer(
    app: AppDep,
    peer: Annotated[PeerRequest, Depends(signed_peer(TRANSFER_PURPOSE))],
) -> JSONResponse:
    """The owner records (or, for a known idempotency key, returns) a transfer the other
    node requested; it drains and then commits owner + generation in its own database."""
    result = pair_transfer.prepare_from_peer(app, peer.payload)
    return JSONResponse(
        response_for(peer.envelope, peer.secret, TRANSFER_RESPONSE, asdict(result), now=app.now())
    )


@router.post("/cluster/pair/transfer-status")
def transfer_status(
    app: AppDep,
    peer: Annotated[PeerRequest, Depends(signed_peer(TRANSFER_STATUS_PURPOSE))],
) -> JSONResponse:
    """The state of a transfer by its idempotency key, as this node's database has it."""
    result = pair_transfer.status_for_peer(app, peer.payload)
    return JSONResponse(
        response_for(
            peer.envelope, peer.secret, TRANSFER_STATUS_RESPONSE, asdict(result), now=app.now()
        )
    )


@router.post("/cluster/pair/ownership")
def ownership(
    app: AppDep,
    peer: Annotated[PeerRequest, Depends(signed_peer(OWNERSHIP_PURPOSE))],
) -> JSONResponse:
    """The owner and generation in this node's database (a returning node compares)."""
    owner, generation = pair_peer.local_ownership(app)
    return JSONResponse(
        response_for(
            peer.envelope,
            peer.secret,
            OWNERSHIP_RESPONSE,
            {"owner": owner, "generation": generation},
            now=app.now(),
        )
    )
