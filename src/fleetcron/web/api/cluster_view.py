"""/api/v1/cluster/shards and /api/v1/cluster/members: what an operator sees of the shards
and the members (read-only, the ``cluster.read`` permission of ``cluster status``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from fleetcron.services.cluster.shards import member_view, shard_view
from fleetcron.services.cluster.status import Node
from fleetcron.web.deps import Caller, requires, the_app

router = APIRouter(tags=["cluster"])


@router.get("/cluster/shards")
def shards(
    request: Request, caller: Annotated[Caller, Depends(requires("cluster.read"))]
) -> dict[str, Any]:
    """Each shard: owner, generation, lease, draining, targets, running and waiting runs,
    its pin (`pinned_to`) with why the placement ignores it (`pin_ignored`), and with the
    members placement the node it puts the shard on now (`placed_on`)."""
    app = the_app(request)
    node = Node(app) if app.settings.cluster else None
    return asdict(shard_view(app, caller.actor, node))


@router.get("/cluster/members")
def members(
    request: Request, caller: Annotated[Caller, Depends(requires("cluster.read"))]
) -> list[dict[str, Any]]:
    """Every registered member: weight, heartbeat age, lease, live or not."""
    return [asdict(m) for m in member_view(the_app(request), caller.actor)]
