"""Log in and log out."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlparse

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from fleetcron.errors import AuthenticationFailed
from fleetcron.services import sessions
from fleetcron.web.deps import SESSION_COOKIE, optional_caller, the_app
from fleetcron.web.pages.render import render

router = APIRouter(include_in_schema=False)


def _safe_next(target: str | None) -> str:
    """Only local paths: never redirect a fresh login to another site."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or urlparse(target).netloc
    ):
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> Response:
    if optional_caller(request) is not None:
        return RedirectResponse(_safe_next(next), status_code=303)
    return render(request, "login.html", next=_safe_next(next), error=None)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    username: Annotated[str, Form(max_length=64)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    app = the_app(request)
    limiter = request.app.state.login_limiter
    address = request.client.host if request.client else "?"
    now = app.now()
    if not limiter.allowed(username, address, now):
        sessions.record_refused_login(app, username, address)
        return render(
            request,
            "login.html",
            status_code=429,
            next=_safe_next(next),
            error="Too many failed attempts; wait a few minutes and try again.",
        )
    try:
        token, _ = sessions.login(app, username, password, address)
    except AuthenticationFailed:
        limiter.failed(username, address, now)
        return render(
            request,
            "login.html",
            status_code=401,
            next=_safe_next(next),
            error="Unknown user or wrong password.",
        )
    limiter.succeeded(username)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        max_age=int(sessions.SESSION_LIFETIME.total_seconds()),
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    caller = optional_caller(request)
    if caller is not None:
        from fleetcron.web.deps import check_csrf

        await check_csrf(request, caller)
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            sessions.logout(the_app(request), token)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
