"""Log in and log out."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlparse

from fastapi import APIRouter, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from fleetcron.core import validation as v
from fleetcron.core.validation import too_long_message
from fleetcron.errors import AuthenticationFailed, SsoRefused, TooManyAttempts
from fleetcron.services.accounts import sessions
from fleetcron.services.identity.configs import OidcConfig
from fleetcron.services.identity.form_login import form_login
from fleetcron.web.deps import (
    SESSION_COOKIE,
    SESSION_COOKIES,
    cookie_is_secure,
    optional_caller,
    session_cookie_name,
    session_token,
    the_app,
)
from fleetcron.web.pages.render import render
from fleetcron.web.password_checks import checked_password, client_address
from fleetcron.web.ratelimit import Refusal

router = APIRouter(include_in_schema=False)


#: The longest ``next`` path kept; a longer one (a crafted link) is replaced by ``/`` rather
#: than refusing the log-in.
NEXT_MAX_CHARS = 2000


def safe_next(target: str | None) -> str:
    """Only local paths: never redirect a fresh login to another site."""
    if (
        not target
        or len(target) > NEXT_MAX_CHARS
        or not target.startswith("/")
        or target.startswith("//")
        or urlparse(target).netloc
    ):
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> Response:
    try:
        caller = optional_caller(request)
    except AuthenticationFailed:
        caller = None  # a bad bearer token: show the form, do not redirect to it again
    if caller is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return render(
        request, "login.html", next=safe_next(next), error=None, username="", **_sso(request)
    )


def _sso(request: Request) -> dict[str, Any]:
    """The log-in page's single sign-on button: the provider's label, or None."""
    config: OidcConfig | None = request.app.state.oidc
    return {"sso_label": config.label if config else None}


def cross_site(request: Request) -> bool:
    """Whether a browser says this post comes from another site (login CSRF: a hidden form
    logging the victim in to the attacker's account). Clients that send neither header
    (scripts, old browsers) are let through; they are not the victims of this attack."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return False
    # A proxy may rewrite Host; X-Forwarded-Host is then the name the browser used (no
    # cross-site form can set that header, so believing it here gives an attacker nothing).
    hosts = {request.headers.get("host"), request.headers.get("x-forwarded-host")}
    return origin == "null" or urlparse(origin).netloc not in hosts - {None}


def _refused(request: Request, next: str, status: int, error: str, username: str = "") -> Response:
    """The log-in form again, with the message and the user name as typed (never the
    password)."""
    response = render(
        request,
        "login.html",
        status_code=status,
        next=safe_next(next),
        error=error,
        username=username,
        **_sso(request),
    )
    if status == 429:
        response.headers["Retry-After"] = "60"
    return response


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    username: Annotated[str, Form()],
    password: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/",
) -> Response:
    if cross_site(request):
        return _refused(request, next, 403, "Log in from this site's own log-in page.")
    # Longer than any user name or password can be: refused on the form, before the rate
    # limiter and the password hash (nothing was guessed; the body limit bounds the size).
    for field, value, limit in (
        ("user", username, v.NAME_MAX_CHARS),
        ("password", password, v.PASSWORD_MAX_CHARS),
    ):
        if len(value) > limit:
            message = too_long_message(field, len(value), limit)
            return _refused(request, next, 422, f"{message}.", username)
    app = the_app(request)

    def audit_refusal(refusal: Refusal, address: str) -> None:
        sessions.record_refused_login(
            app, username, address, refused=refusal.refused, reason=refusal.reason
        )

    address = client_address(request)
    try:
        token, _ = checked_password(
            request,
            username,
            lambda: form_login(app, request.app.state.ldap, username, password, address),
            audit_refusal,
        )
    except TooManyAttempts as refused:
        return _refused(request, next, 429, refused.message, username)
    except SsoRefused as refused:
        status = {"ldap_unreachable": 503, "ldap_tls": 502, "ldap_error": 502}.get(
            refused.reason, 403
        )
        return _refused(request, next, status, refused.message, username)
    except AuthenticationFailed:
        return _refused(request, next, 401, "Unknown user or wrong password.", username)
    return with_session(request, RedirectResponse(safe_next(next), status_code=303), token)


def with_session(request: Request, response: Response, token: str) -> Response:
    """``response`` setting the session cookie of a fresh log-in."""
    response.set_cookie(
        session_cookie_name(request),
        token,
        httponly=True,
        samesite="lax",
        secure=cookie_is_secure(request),
        max_age=int(sessions.SESSION_LIFETIME.total_seconds()),
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session; a user who came through single sign-on is then sent to the
    provider's end-session endpoint (when it has one) to end their session there too."""
    caller = optional_caller(request)
    provider: str | None = None
    if caller is not None:
        from fleetcron.web.deps import check_csrf

        await check_csrf(request, caller)
        token = session_token(request)
        if token:
            provider = sessions.logout(the_app(request), token)
    response = await _after_logout(request, provider)
    for name in SESSION_COOKIES:
        if name in request.cookies:
            response.delete_cookie(name, secure=name != SESSION_COOKIE, httponly=True)
    return response


async def _after_logout(request: Request, provider: str | None) -> Response:
    """The log-in form; or, for a user of the configured OIDC provider, a page that goes
    on to the provider's logout (a page, not a redirect: the pages' Content-Security-Policy
    lets a form post go to this site only, redirects included)."""
    config: OidcConfig | None = request.app.state.oidc
    if config is None or provider != config.issuer:
        return RedirectResponse("/login", status_code=303)
    from fleetcron.services.identity.oidc import logout_url  # httpx: once OIDC is used

    url = await run_in_threadpool(logout_url, config)
    if url is None:
        return RedirectResponse("/login", status_code=303)
    return render(request, "logged_out.html", provider_url=url, label=config.label)
