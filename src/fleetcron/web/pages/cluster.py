"""The cluster panel (admin): owner, this node, generation, transfers, nodes, shards and
members."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from fleetcron.app import App
from fleetcron.errors import FleetcronError
from fleetcron.services.cluster import peers as cluster_peers
from fleetcron.services.cluster import status as svc
from fleetcron.services.cluster.shards import member_view, shard_view
from fleetcron.services.cluster.status import Node
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, checked, page, redirect, text

router = APIRouter(include_in_schema=False)
HERE = "/cluster"


def cluster_node(app: App) -> Node | None:
    return Node(app) if app.settings.cluster else None


@router.get("/cluster", response_class=HTMLResponse)
def panel(
    request: Request, caller: Annotated[Caller, Depends(requires("cluster.read"))]
) -> Response:
    """Reachability is checked when the page is loaded, never in the background."""
    app = the_app(request)
    node = cluster_node(app)
    status = svc.status(app, caller.actor, node)
    reachable = cluster_peers.peers_reachable(app, status) if node is not None else {}
    return page(
        request,
        "cluster.html",
        status=status,
        shards=shard_view(app, caller.actor, node),
        members=member_view(app, caller.actor),
        reachable=reachable,
        idempotency_key=uuid.uuid4().hex,
    )


def _act(action: str, done: str, run: Callable[[], object]) -> Response:
    try:
        result = run()
    except FleetcronError as exc:
        return redirect(HERE, f"{action} refused: {exc.message}", error=True)
    return redirect(HERE, done.format(result=result))


@router.post("/cluster/transfer", response_class=HTMLResponse)
def transfer(
    request: Request, form: Posted, caller: Annotated[Caller, Depends(requires("cluster.manage"))]
) -> Response:
    app = the_app(request)
    to_node, key = text(form, "to").strip(), text(form, "idempotency_key").strip() or None
    return _act(
        "Transfer",
        "Transfer {result.id} to {result.to_node}: {result.state}.",
        lambda: svc.request_transfer(app, caller.actor, to_node, idempotency_key=key),
    )


@router.post("/cluster/takeover", response_class=HTMLResponse)
def takeover(
    request: Request, form: Posted, caller: Annotated[Caller, Depends(requires("cluster.manage"))]
) -> Response:
    app = the_app(request)
    node = cluster_node(app)
    if node is None:
        return redirect(HERE, "This node is standalone.", error=True)
    return _act(
        "Takeover",
        "This node took over: generation {result.generation_after}.",
        lambda: svc.takeover(
            app,
            caller.actor,
            node,
            text(form, "fenced_endpoint").strip(),
            confirm_fenced=checked(form, "confirm_fenced"),
            targets_verified=checked(form, "targets_verified"),
        ),
    )


@router.post("/cluster/approve", response_class=HTMLResponse)
def approve(
    request: Request, form: Posted, caller: Annotated[Caller, Depends(requires("cluster.manage"))]
) -> Response:
    app = the_app(request)
    return _act(
        "Approval",
        "Node {result.node_id} at {result.endpoint} approved.",
        lambda: cluster_peers.approve_endpoint(app, caller.actor, text(form, "endpoint").strip()),
    )


@router.post("/cluster/retire", response_class=HTMLResponse)
def retire(
    request: Request, form: Posted, caller: Annotated[Caller, Depends(requires("cluster.manage"))]
) -> Response:
    app = the_app(request)
    node_id = text(form, "node").strip()
    return _act(
        "Retirement", f"Node {node_id} retired.", lambda: svc.retire(app, caller.actor, node_id)
    )
