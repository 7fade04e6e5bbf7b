"""Single sign-on's pages: the start of an OIDC log-in and the provider's callback.

The flow is :mod:`fleetcron.services.identity.oidc`'s (imported by the routes, so its
libraries load only where OIDC is used); these routes carry the browser's side of it: the
state cookie that ties the callback to the browser that started the log-in, the session
cookie, and a page that says why a log-in was refused (never a 500).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from fleetcron.errors import SsoRefused
from fleetcron.services.identity.configs import OidcConfig
from fleetcron.web.deps import cookie_is_secure, the_app
from fleetcron.web.pages.auth import safe_next, with_session
from fleetcron.web.pages.render import render
from fleetcron.web.password_checks import client_address

router = APIRouter(include_in_schema=False)

#: The cookie that holds the state of the log-in this browser started; over https with
#: the ``__Host-`` prefix (as the session cookie), so a sibling subdomain cannot plant a
#: state of its own making (a log-in to the attacker's account).
STATE_COOKIE = "fleetcron_sso_state"
SECURE_STATE_COOKIE = "__Host-" + STATE_COOKIE


def state_cookie(request: Request) -> str:
    return SECURE_STATE_COOKIE if cookie_is_secure(request) else STATE_COOKIE


CALLBACK_PATH = "/login/oidc/callback"

#: The status of a refusal's page, by the refusal's reason.
STATUS = {
    "issuer_unreachable": 502,
    "issuer_invalid": 502,
    "issuer_mismatch": 502,
    "token_refused": 502,
    "no_role": 403,
    "name_taken": 403,
    "bad_name": 403,
    "no_username": 403,
    "nonce_mismatch": 401,
    "too_many_logins": 429,
}


def oidc_config(request: Request) -> OidcConfig | None:
    config: OidcConfig | None = request.app.state.oidc
    return config


def refused_page(request: Request, refused: SsoRefused) -> Response:
    status = STATUS.get(refused.reason, 401 if refused.reason.startswith("token") else 400)
    response = render(request, "sso_error.html", status_code=status, message=refused.message)
    response.delete_cookie(state_cookie(request), secure=cookie_is_secure(request))
    return response


@router.get("/login/oidc", response_class=HTMLResponse)
def start(request: Request, next: str = "/") -> Response:
    config = oidc_config(request)
    if config is None:
        return render(request, "error.html", status_code=404, status=404, message=NOT_SET)
    from fleetcron.services.identity import oidc

    try:
        started = oidc.begin(the_app(request), config, safe_next(next), client_address(request))
    except SsoRefused as refused:
        return refused_page(request, refused)
    response = RedirectResponse(started.url, status_code=303)
    response.set_cookie(
        state_cookie(request),
        started.state,
        max_age=int(oidc.LOGIN_TTL.total_seconds()),
        httponly=True,
        samesite="lax",
        secure=cookie_is_secure(request),
    )
    return response


NOT_SET = "Single sign-on is not configured on this server; log in with your password."


@router.get(CALLBACK_PATH, response_class=HTMLResponse)
def callback(
    request: Request,
    state: str | None = None,
    code: str | None = None,
    error: str | None = None,
) -> Response:
    config = oidc_config(request)
    if config is None:
        return render(request, "error.html", status_code=404, status=404, message=NOT_SET)
    from fleetcron.services.identity import oidc

    answer = oidc.Callback(
        state=state,
        code=code,
        error=error,
        browser_state=request.cookies.get(state_cookie(request)),
    )
    try:
        finished = oidc.finish(the_app(request), config, answer, client_address(request))
    except SsoRefused as refused:
        return refused_page(request, refused)
    response = RedirectResponse(safe_next(finished.next_path), status_code=303)
    response.delete_cookie(state_cookie(request), secure=cookie_is_secure(request))
    return with_session(request, response, finished.token)
