"""Who is asking, and may they: one dependency per route, named by its action.

Every route declares ``Depends(requires("job.add"))`` (or ``"job.read"``, ...). The
dependency authenticates the request (bearer API token, or the session cookie), checks the
role against :mod:`fleetcron.core.permissions`, and, for a state change made with a session
cookie, checks the CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``).
A test enumerates every route and its action against the permission matrix.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request, Response

from fleetcron.app import Actor, App
from fleetcron.core.permissions import MATRIX, is_project_action, opening_project, sees
from fleetcron.errors import AuthenticationFailed, PermissionDenied
from fleetcron.services.accounts import sessions
from fleetcron.services.accounts.users import actor_for_token
from fleetcron.services.audit import record_refused
from fleetcron.web.ratelimit import RefusalTally, audit_at

SESSION_COOKIE = "fleetcron_session"
#: The name when the cookie is Secure: browsers accept a ``__Host-`` cookie only over https,
#: with Path=/ and no Domain, so a sibling subdomain cannot plant or shadow it.
SECURE_SESSION_COOKIE = "__Host-" + SESSION_COOKIE
SESSION_COOKIES = (SECURE_SESSION_COOKIE, SESSION_COOKIE)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The project a browser session chose last (see :func:`acting_project`).
PROJECT_COOKIE = "fleetcron_project"
#: A page form's hidden field: the project the page it was posted from was shown in.
PROJECT_FIELD = "project"


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of one request."""

    actor: Actor
    csrf_token: str | None  # None for bearer-token callers (no cookie, no CSRF risk)


def the_app(request: Request) -> App:
    app: App = request.app.state.fleetcron
    return app


async def app_of(request: Request) -> App:
    """:func:`the_app` as a route's dependency. A coroutine, so that FastAPI calls it on the
    event loop: a plain function dependency is handed to a worker thread, a thread switch
    per request for an attribute lookup."""
    return the_app(request)


def session_token(request: Request) -> str | None:
    """The session cookie's value. Over https (or with ``cookie_secure``) only the
    ``__Host-`` name counts: a sibling subdomain can set the plain name for our domain, and
    accepting it would let it log a visitor in to an account of its choosing."""
    names = (SECURE_SESSION_COOKIE,) if cookie_is_secure(request) else SESSION_COOKIES
    for name in names:
        if value := request.cookies.get(name):
            return value
    return None


def cookie_is_secure(request: Request) -> bool:
    """Whether the session cookie gets ``Secure``: the ``cookie_secure`` setting, else
    whether the request came over https (behind a trusted proxy, as it reports)."""
    configured: bool | None = the_app(request).settings.cookie_secure
    return request.url.scheme == "https" if configured is None else configured


def session_cookie_name(request: Request) -> str:
    return SECURE_SESSION_COOKIE if cookie_is_secure(request) else SESSION_COOKIE


def optional_caller(request: Request) -> Caller | None:
    """The caller if the request carries valid credentials, else None."""
    cached = getattr(request.state, "caller", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    app = the_app(request)
    header = request.headers.get("authorization", "")
    caller: Caller | None = None
    if header.lower().startswith("bearer "):
        caller = Caller(actor_for_token(app, header[7:].strip()), None)
    elif cookie := session_token(request):
        logged_in = sessions.resolve(app, cookie)
        if logged_in is not None:
            caller = Caller(logged_in.actor, logged_in.csrf_token)
    if caller is not None:
        caller = Caller(acting_project(request, caller), caller.csrf_token)
    request.state.caller = caller
    return caller


def acting_project(request: Request, caller: Caller) -> Actor:
    """The caller acting in the request's project: the one ``?project=`` names (an API
    token: else ``default``, or the token's own project). A browser session without
    ``?project=`` acts in the project it chose last, kept in a cookie while it still sees
    it, else where :func:`~fleetcron.core.permissions.opening_project` opens it.

    Why a cookie and not ``?project=`` in every link: every link, form action and redirect
    of the pages (and the run page's script) then stays as it is and keeps the project,
    and a member of one project lands in it. A page's forms also post the project they
    were shown in (:data:`PROJECT_FIELD`, read by :func:`requires`), so a form of a tab
    left open in one project never acts on a same-named object of a project chosen since
    in another tab."""
    asked = request.query_params.get(PROJECT_FIELD)
    if caller.csrf_token is None:
        return caller.actor.within(asked)
    if asked is not None:
        keep_project(request, caller.actor, asked)
        return caller.actor.within(asked)
    kept = request.cookies.get(PROJECT_COOKIE)
    return caller.actor.within(opening_project(caller.actor, kept))


def keep_project(request: Request, actor: Actor, project: str) -> None:
    """Remember ``project`` as the session's choice (:func:`project_cookie` is the
    cookie the answer sets) when the actor sees it and it is a new choice."""
    if sees(actor, project) and request.cookies.get(PROJECT_COOKIE) != project:
        request.state.project_chosen = project


def project_cookie(request: Request, status: int) -> str | None:
    """The ``Set-Cookie`` value that keeps the session's newly chosen project (see
    :func:`keep_project`), or None: none chosen, or the answer is an error (a project that
    does not exist, which a global role sees by every name, is not kept, so a mistyped
    ``?project=`` costs one 404 page)."""
    chosen = getattr(request.state, "project_chosen", None)
    if chosen is None or status >= 400:
        return None
    carrier = Response()  # Starlette's own cookie formatting, read back as a header value
    carrier.set_cookie(
        PROJECT_COOKIE,
        chosen,
        max_age=400 * 24 * 3600,
        httponly=True,
        samesite="lax",
        secure=cookie_is_secure(request),
    )
    return carrier.headers["set-cookie"]


async def posted_project(request: Request, caller: Caller) -> Caller:
    """The session caller acting in the project a page's form was shown in (its
    :data:`PROJECT_FIELD`), when one is posted; else the caller as it is."""
    if request.method in SAFE_METHODS or caller.csrf_token is None:
        return caller
    if not request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        return caller
    value = (await request.form()).get(PROJECT_FIELD)
    if not isinstance(value, str) or not value:
        return caller
    keep_project(request, caller.actor, value)
    request.state.caller = Caller(caller.actor.within(value), caller.csrf_token)
    return request.state.caller  # type: ignore[no-any-return]


async def check_csrf(request: Request, caller: Caller) -> None:
    if request.method in SAFE_METHODS or caller.csrf_token is None:
        return
    given = request.headers.get("x-csrf-token")
    if given is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get("csrf_token")
        given = value if isinstance(value, str) else None
    if not given or not hmac.compare_digest(given, caller.csrf_token):
        raise PermissionDenied("missing or wrong CSRF token; reload the page and try again")


def audit_refusal(
    request: Request, caller: Caller, action: str, reason: str, error: PermissionDenied
) -> None:
    """Audit a refusal by the route's own check, aggregated per caller, action and reason
    (the 1st, 10th, 100th ... within the tally's window), so a flood of refused requests
    leaves a handful of rows."""
    tally: RefusalTally = request.app.state.refusals
    app = the_app(request)
    count = tally.count((caller.actor.name, action, reason), app.now())
    if audit_at(count):
        record_refused(app, caller.actor, action, refused=count, reason=reason, error=error.message)


def requires(action: str) -> Callable[[Request], Awaitable[Caller]]:
    """A dependency that admits callers whose role allows ``action``."""
    if action not in MATRIX:
        raise KeyError(f"unknown action {action!r}")

    async def dependency(request: Request) -> Caller:
        caller = optional_caller(request)
        if caller is None:
            raise AuthenticationFailed("log in or send an API token (Authorization: Bearer ...)")
        caller = await posted_project(request, caller)
        try:
            reason = "role"
            # A project action is weighed in the request's project (its operation checks
            # each object, and confines its reads, there): an unseen project is a 404.
            if is_project_action(action):
                caller.actor.authorize_in(action)
            else:
                caller.actor.authorize(action)
            reason = "csrf"
            await check_csrf(request, caller)
        except PermissionDenied as refused:
            audit_refusal(request, caller, action, reason, refused)
            raise
        return caller

    dependency.action = action  # type: ignore[attr-defined]
    return dependency
