"""/api/v1/claims/{token}: a running command asks whether its claim is still live.

No user: the caller proves it is the run by the secret the scheduler handed its command
(``FLEETCRON_CLAIM_SECRET``, sent as the ``X-Fleetcron-Claim-Secret`` header; never
logged). The route's dependency is marked ``run_secret`` for the route-enumerating
permission test, in place of ``requires(action)``. A node that is not in cluster mode
answers 404, as if the route did not exist (a standalone run has no claim to ask about:
its command asks the claim file on the target). A claim that has ended answers 410 Gone
with the same JSON body as a live one, so ``curl -fs`` alone says live (exit 0) or not.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from fleetcron.services.cluster.claims import claim_status
from fleetcron.web.deps import the_app

router = APIRouter(tags=["cluster"])

SECRET_HEADER = "X-Fleetcron-Claim-Secret"


def run_secret(request: Request) -> None:
    """Marks a route a run opens with its own secret (404 outside cluster mode)."""
    if not the_app(request).settings.cluster:
        raise StarletteHTTPException(status_code=404)


run_secret.run_secret = True  # type: ignore[attr-defined]


@router.get(
    "/claims/{token}",
    dependencies=[Depends(run_secret)],
    responses={410: {"description": "the claim has ended: expired, superseded or finished"}},
)
async def claim(
    request: Request,
    token: str,
    secret: Annotated[str | None, Header(alias=SECRET_HEADER)] = None,
) -> JSONResponse:
    """200 while the claim is ``live``; 410 once it is ``expired``, ``superseded`` or
    ``finished`` (the same body), so ``curl -f`` answers with its exit status; 401
    without the run's secret, 404 for an unknown claim."""
    view = await run_in_threadpool(claim_status, the_app(request), token, secret)
    body: dict[str, Any] = {
        "token": view.token,
        "state": view.state,
        "live": view.live,
        "deadline_at": view.deadline_at.isoformat(),
        "seconds_left": view.seconds_left,
        "reason": view.reason,
    }
    return JSONResponse(body, status_code=200 if view.live else 410)
