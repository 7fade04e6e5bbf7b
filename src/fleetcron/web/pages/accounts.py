"""Accounts: users and their roles (admins), and each user's own API tokens."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response

from fleetcron.core import validation as v
from fleetcron.core.permissions import FULL_SCOPE, SCOPES
from fleetcron.errors import FleetcronError, TooManyAttempts
from fleetcron.services.accounts import users as svc
from fleetcron.web.api.runs import MAX_ID
from fleetcron.web.deps import Caller, requires, session_token, the_app
from fleetcron.web.pages.forms import (
    NO_ERRORS,
    FieldErrors,
    Posted,
    checked,
    field_errors,
    page,
    redirect,
    text,
    whole_number,
)
from fleetcron.web.password_checks import own_password_guard

router = APIRouter(include_in_schema=False)
#: What the password fields show (and their minlength): the server's own limits.
PASSWORD_LIMITS = {"password_min": v.PASSWORD_MIN_CHARS, "password_max": v.PASSWORD_MAX_CHARS}


def _users_page(
    request: Request,
    caller: Caller,
    *,
    new_user: dict[str, str] | None = None,
    errors: FieldErrors = NO_ERRORS,
) -> HTMLResponse:
    return page(
        request,
        "users.html",
        status_code=422 if errors else 200,
        users=svc.list_users(the_app(request), caller.actor),
        roles=v.ROLES,
        new_user=new_user or {"name": "", "role": "viewer"},
        errors=errors,
        **PASSWORD_LIMITS,
        name_max=v.NAME_MAX_CHARS,
    )


@router.get("/users", response_class=HTMLResponse)
def list_users(
    request: Request, caller: Annotated[Caller, Depends(requires("user.read"))]
) -> HTMLResponse:
    return _users_page(request, caller)


@router.post("/users/new", response_class=HTMLResponse)
def add_user(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("user.add"))],
) -> Response:
    name, role = text(form, "name").strip(), text(form, "role", "viewer")
    try:
        svc.add_user(the_app(request), caller.actor, name, text(form, "password"), role)
    except FleetcronError as exc:
        return _users_page(
            request, caller, new_user={"name": name, "role": role}, errors=field_errors(exc)
        )
    return redirect("/users", f"Added user {name} with the {role} role.")


@router.post("/users/{name}/role", response_class=HTMLResponse)
def change_role(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("user.edit"))],
) -> Response:
    role = text(form, "role")
    try:
        svc.set_role(the_app(request), caller.actor, name, role)
    except FleetcronError as exc:
        return redirect("/users", exc.message, error=True)
    return redirect("/users", f"{name} now has the {role} role.")


@router.post("/users/{name}/password", response_class=HTMLResponse)
def reset_password(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("user.edit"))],
) -> Response:
    try:
        done = svc.set_password(
            the_app(request),
            caller.actor,
            name,
            text(form, "password"),
            keep_session=session_token(request),
            revoke_tokens=checked(form, "revoke_tokens"),
        )
    except FleetcronError as exc:
        return redirect("/users", exc.message, error=True)
    return redirect(
        "/users",
        f"Set a new password for {name} ({_ended(done)}); tell them through a safe channel.",
    )


def _ended(done: svc.PasswordChanged) -> str:
    sessions = "1 session" if done.sessions_ended == 1 else f"{done.sessions_ended} sessions"
    tokens = "1 API token" if done.tokens_revoked == 1 else f"{done.tokens_revoked} API tokens"
    return f"ended {sessions}, revoked {tokens}"


def _account_page(
    request: Request, caller: Caller, errors: FieldErrors = NO_ERRORS, status: int = 422
) -> HTMLResponse:
    return page(
        request,
        "account.html",
        status_code=status if errors else 200,
        errors=errors,
        **PASSWORD_LIMITS,
    )


@router.get("/account", response_class=HTMLResponse)
def account(
    request: Request, caller: Annotated[Caller, Depends(requires("account.manage_own"))]
) -> HTMLResponse:
    return _account_page(request, caller)


@router.post("/account/password", response_class=HTMLResponse)
def change_own_password(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("account.manage_own"))],
) -> Response:
    new = text(form, "new_password")
    if new != text(form, "confirm_password"):
        return _account_page(
            request,
            caller,
            FieldErrors.at("confirm_password", "The two new passwords differ."),
        )
    try:
        done = svc.change_own_password(
            the_app(request),
            caller.actor,
            text(form, "current_password"),
            new,
            keep_session=session_token(request),
            revoke_tokens=checked(form, "revoke_tokens"),
            guard=own_password_guard(request, caller.actor),
        )
    except FleetcronError as exc:
        errors = field_errors(exc, {"password": "new_password"})
        status = 429 if isinstance(exc, TooManyAttempts) else 422
        return _account_page(request, caller, errors, status)
    return redirect("/account", f"Changed your password; {_ended(done)} elsewhere.")


@router.get("/users/{name}/remove", response_class=HTMLResponse)
def confirm_remove_user(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("user.remove"))]
) -> HTMLResponse:
    known = {u.name for u in svc.list_users(the_app(request), caller.actor)}
    if name not in known:
        message = f"user {name} does not exist"
        return page(request, "error.html", status_code=404, status=404, message=message)
    return page(
        request,
        "confirm.html",
        title=f"Remove user {name}?",
        message=(
            f"{name} can no longer log in, and their API tokens stop working. "
            "What they did stays in the audit log."
        ),
        action=f"/users/{quote(name)}/remove",
        button=f"Remove {name}",
        cancel="/users",
        danger=True,
    )


@router.post("/users/{name}/remove", response_class=HTMLResponse)
def remove_user(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("user.remove"))],
) -> Response:
    try:
        svc.remove_user(the_app(request), caller.actor, name)
    except FleetcronError as exc:
        return redirect("/users", exc.message, error=True)
    return redirect("/users", f"Removed user {name}.")


def _tokens_page(
    request: Request,
    caller: Caller,
    *,
    created: str | None = None,
    name: str = "",
    expires_in_days: str = "",
    scope: str = FULL_SCOPE,
    errors: FieldErrors = NO_ERRORS,
    status_code: int = 200,
) -> HTMLResponse:
    tokens = svc.list_tokens(the_app(request), caller.actor, caller.actor.name)
    return page(
        request,
        "tokens.html",
        status_code=422 if errors else status_code,
        tokens=sorted(tokens, key=lambda t: (t.revoked_at is not None, t.name)),
        now=the_app(request).now(),
        created=created,
        name=name,
        expires_in_days=expires_in_days,
        scope=scope,
        scopes=SCOPES,
        max_token_days=svc.MAX_TOKEN_DAYS,
        name_max=v.NAME_MAX_CHARS,
        errors=errors,
    )


@router.get("/tokens", response_class=HTMLResponse)
def list_tokens(
    request: Request, caller: Annotated[Caller, Depends(requires("token.manage_own"))]
) -> HTMLResponse:
    return _tokens_page(request, caller)


@router.post("/tokens/new", response_class=HTMLResponse)
def create_token(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("token.manage_own"))],
) -> Response:
    name = text(form, "name").strip()
    typed_days = text(form, "expires_in_days")
    scope = text(form, "scope") or FULL_SCOPE
    try:
        days = whole_number(typed_days, field="expires_in_days")
        token, _ = svc.create_token(
            the_app(request),
            caller.actor,
            caller.actor.name,
            name,
            expires_in_days=days,
            scope=scope,
        )
    except FleetcronError as exc:
        return _tokens_page(
            request,
            caller,
            name=name,
            expires_in_days=typed_days,
            scope=scope if scope in SCOPES else FULL_SCOPE,
            errors=field_errors(exc, {"token name": "name"}),
        )
    # Rendered, not redirected: the token exists in clear only in this one response.
    return _tokens_page(request, caller, created=token, name=name, status_code=201)


@router.post("/tokens/{token_id}/revoke", response_class=HTMLResponse)
def revoke_token(
    token_id: Annotated[int, PathParam(ge=1, le=MAX_ID)],
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("token.manage_own"))],
) -> Response:
    try:
        svc.revoke_token(the_app(request), caller.actor, token_id)
    except FleetcronError as exc:
        return redirect("/tokens", exc.message, error=True)
    return redirect("/tokens", "Revoked the token; requests that use it are refused from now on.")
