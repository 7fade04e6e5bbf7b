"""The FastAPI application: API under /api/v1, pages at /, static files, security headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from importlib.resources import files

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from sqlalchemy import func, select
from starlette.exceptions import HTTPException as StarletteHTTPException

from fleetcron import __version__
from fleetcron.coordination.guard import current_verdict
from fleetcron.errors import FleetcronError
from fleetcron.metrics import Metrics, StateReading
from fleetcron.services.cluster import Node
from fleetcron.services.context import App
from fleetcron.services.health import late_count
from fleetcron.store.schema import ClusterOwnership, Run
from fleetcron.web import errors
from fleetcron.web.api import cluster_peer, health, jobs, runs, targets, users
from fleetcron.web.pages import auth, views
from fleetcron.web.ratelimit import LoginLimiter

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def create_app(app: App, *, metrics: Metrics | None = None) -> FastAPI:
    """The web application over ``app``; the scheduler, when in the same process, is
    attached by the caller as ``state.scheduler`` and shares ``metrics``."""
    web = FastAPI(
        title="fleetcron",
        version=__version__,
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    web.state.fleetcron = app
    web.state.login_limiter = LoginLimiter()
    web.state.scheduler = None
    web.state.ownership = ownership_reader(app)
    web.state.metrics = metrics or Metrics()
    web.state.metrics.watch_state(lambda: state_reading(app, web.state.ownership))

    web.add_exception_handler(FleetcronError, errors.fleetcron_error)
    web.add_exception_handler(RequestValidationError, errors.validation_error)
    web.add_exception_handler(StarletteHTTPException, errors.http_error)

    @web.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if request.url.path.startswith("/api/") or request.method != "GET":
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    for router in (targets.router, jobs.router, runs.router, users.router, cluster_peer.router):
        web.include_router(router, prefix="/api/v1")
    web.include_router(health.router)
    web.include_router(auth.router)
    web.include_router(views.router)
    web.mount(
        "/static", StaticFiles(directory=str(files("fleetcron.web") / "static")), name="static"
    )
    return web


def ownership_reader(app: App) -> Callable[[], str]:
    """A function telling this node's ownership state: standalone, owner, standby, ..."""
    if not app.settings.cluster:
        return lambda: "standalone"
    node = Node(app)

    def read() -> str:
        with app.db.read() as session:
            return current_verdict(
                session, node.identity.node_id, node.identity.fingerprint, lock=False
            ).kind

    return read


def state_reading(app: App, ownership: Callable[[], str]) -> StateReading:
    with app.db.read() as session:
        late = late_count(session, app.now(), timedelta(seconds=app.settings.misfire_grace_s))
        running = session.scalar(select(func.count(Run.id)).where(Run.status == "running")) or 0
        generation = session.scalar(select(func.max(ClusterOwnership.generation))) or 0
    return StateReading(late, running, ownership(), generation)
