"""The FastAPI application: API under /api/v1, pages at /, static files, security headers."""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib.resources import files
from urllib.parse import urlsplit, urlunsplit

from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import iter_route_contexts
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import StatementError
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope, Send

from fleetcron import __version__
from fleetcron.app import App
from fleetcron.coordination.guard import current_verdict
from fleetcron.errors import FleetcronError
from fleetcron.metrics import Metrics
from fleetcron.services.alerts.incident_ops import incidents_reading
from fleetcron.services.cluster.shards import member_readings, shard_readings
from fleetcron.services.cluster.status import Node
from fleetcron.services.health.report import state_reading
from fleetcron.services.identity.configs import LdapConfig, OidcConfig, warn_unknown_projects
from fleetcron.web import errors
from fleetcron.web.api import (
    alerts,
    blackouts,
    calendars,
    claims,
    cluster_peer,
    cluster_view,
    health,
    history,
    job_fleet,
    jobs,
    projects,
    runs,
    targets,
    users,
)
from fleetcron.web.api.cluster_pair import router as cluster_pair_router
from fleetcron.web.api.history import ChangeSource
from fleetcron.web.deps import SESSION_COOKIES, project_cookie
from fleetcron.web.middleware import AuthenticateFirst, BodyLimit, HttpMiddleware, TrustedProxies
from fleetcron.web.pages import auth, sso, views
from fleetcron.web.ratelimit import LoginLimiter, RefusalTally

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
        # The schema is public: it is the API's published contract and holds no data. The
        # Swagger UI is off: it needs a CDN and inline script, which the CSP (rightly) blocks.
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    _attach_state(web, app, metrics or Metrics())
    _add_error_handlers(web)
    include_routes(web)
    web.mount(
        "/static", StaticFiles(directory=str(files("fleetcron.web") / "static")), name="static"
    )

    # Innermost first: authenticate before reading a body, bound the body, then headers
    # on every answer (these refusals included), then the real client behind a proxy.
    web.add_middleware(AuthenticateFirst, open_paths=declared_open_paths())
    web.add_middleware(BodyLimit, limit=app.settings.max_body_bytes)
    web.add_middleware(ChangeSource)
    web.add_middleware(SecurityHeaders)
    web.add_middleware(TrustedProxies, networks=app.settings.trusted_proxy_networks)
    return web


def _attach_state(web: FastAPI, app: App, metrics: Metrics) -> None:
    """What the routes share: the app, the login limiter, the refusal tally, the
    ownership reader and the metrics (which read the state)."""
    web.state.fleetcron = app
    web.state.oidc = OidcConfig.of(app.settings)
    web.state.ldap = LdapConfig.of(app.settings)
    warn_unknown_projects(app, web.state.oidc, web.state.ldap)
    web.state.login_limiter = LoginLimiter(hash_slots=app.settings.login_hash_concurrency)
    web.state.refusals = RefusalTally()
    web.state.scheduler = None
    web.state.ownership = ownership_reader(app)
    web.state.metrics = metrics
    web.state.metrics.watch_state(lambda: state_reading(app, web.state.ownership))
    web.state.metrics.watch_incidents(lambda: incidents_reading(app))
    node = Node(app) if app.settings.cluster else None
    web.state.metrics.watch_shards(lambda: shard_readings(app, node))
    if node is not None:
        web.state.metrics.watch_members(lambda: member_readings(app))


def _add_error_handlers(web: FastAPI) -> None:
    web.add_exception_handler(FleetcronError, errors.fleetcron_error)
    web.add_exception_handler(RequestValidationError, errors.validation_error)
    web.add_exception_handler(StarletteHTTPException, errors.http_error)
    web.add_exception_handler(OverflowError, errors.out_of_range)
    # SQLAlchemy wraps an OverflowError met while binding a parameter (a date that does
    # not fit once converted to UTC, an id beyond 64 bits)
    web.add_exception_handler(StatementError, errors.out_of_range)


class SecurityHeaders(HttpMiddleware):
    """The security headers on every answer; no caching of what a caller with credentials
    sees; redirects made relative; a browser's newly chosen project kept.

    Pure ASGI, as the other middleware (``web/middleware.py``): it changes only the start
    of the answer, so the body (a live run's output stream included) passes through as the
    route sends it. Starlette's ``BaseHTTPMiddleware`` ran every answer through a task
    group and a memory stream of its own: 0.3-0.7 of a short API request's 4 CPU-ms, and
    0.7-1.0 of the log-in page's 2-3."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", []))
                _finish_headers(request, message["status"], MutableHeaders(scope=message))
            await send(message)

        await self.app(scope, receive, with_headers)


def _finish_headers(request: Request, status: int, headers: MutableHeaders) -> None:
    if cookie := project_cookie(request, status):
        headers.append("set-cookie", cookie)
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    if (
        request.url.path.startswith("/api/")
        or request.method != "GET"
        or getattr(request.state, "caller", None) is not None
        or has_credentials(request)
    ):
        # Pages of a logged-in caller (run output, users) must not come back from the
        # browser's cache after logout.
        headers.setdefault("Cache-Control", "no-store")
    if location := headers.get("location"):
        headers["location"] = relative_location(location, request)


def has_credentials(request: Request) -> bool:
    return bool(request.headers.get("authorization")) or any(
        name in request.cookies for name in SESSION_COOKIES
    )


def relative_location(location: str, request: Request) -> str:
    """A redirect to this same server, made relative: Starlette's trailing-slash redirects
    are absolute URLs built from the Host header, which a client controls."""
    parsed = urlsplit(location)
    if parsed.scheme and parsed.netloc and parsed.netloc == request.headers.get("host"):
        return urlunsplit(("", "", parsed.path or "/", parsed.query, parsed.fragment))
    return location


def include_routes(web: FastAPI) -> None:
    """Every router of the API and the pages, at its prefix."""
    for router in (targets.router, jobs.router, runs.router, users.router, cluster_peer.router):
        web.include_router(router, prefix="/api/v1")
    web.include_router(claims.router, prefix="/api/v1")
    web.include_router(cluster_view.router, prefix="/api/v1")
    web.include_router(job_fleet.router, prefix="/api/v1")
    web.include_router(cluster_pair_router, prefix="/api/v1")
    web.include_router(history.router, prefix="/api/v1")
    web.include_router(alerts.router, prefix="/api/v1")
    web.include_router(blackouts.router, prefix="/api/v1")
    web.include_router(calendars.router, prefix="/api/v1")
    web.include_router(projects.router, prefix="/api/v1")
    web.include_router(health.router)
    web.include_router(auth.router)
    web.include_router(sso.router)
    web.include_router(views.router)


@functools.cache
def declared_open_paths() -> frozenset[str]:
    """:func:`open_paths` of the routes :func:`include_routes` declares, found once per
    process: the routes are module-level declarations, the same for every application
    built, and finding them resolves every route's dependencies (a large part of the cost
    of building an application)."""
    web = FastAPI()
    include_routes(web)
    return frozenset(open_paths(web))


def open_paths(web: FastAPI) -> set[str]:
    """Routes that authenticate otherwise than by a user's credentials: the log-in form and
    the cluster's signed peer routes (their dependency is marked ``.peer``)."""

    def marked(dependant: Dependant) -> bool:
        return any(
            getattr(dep.call, "peer", False) or marked(dep) for dep in dependant.dependencies
        )

    found = {"/login", "/logout"}
    # Included routers stay nested in web.routes: walk their effective routes.
    for route in iter_route_contexts(web.routes):
        dependant: Dependant | None = getattr(route, "dependant", None)
        if dependant is not None and marked(dependant):
            found.add(str(route.path))
    return found


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
