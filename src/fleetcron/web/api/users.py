"""/api/v1/users and /api/v1/tokens"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from fleetcron.app import App
from fleetcron.core import validation as v
from fleetcron.services.accounts import users as svc
from fleetcron.web.api.runs import MAX_ID
from fleetcron.web.deps import Caller, app_of, requires, session_token
from fleetcron.web.password_checks import own_password_guard
from fleetcron.web.schemas import (
    PasswordChange,
    PasswordChanged,
    TokenCreated,
    TokenIn,
    TokenOut,
    UserIn,
    UserOut,
    UserPatch,
)

router = APIRouter(tags=["users"])
AppDep = Annotated[App, Depends(app_of)]


def _out(view: svc.UserView) -> UserOut:
    return UserOut(name=view.name, role=view.role, created_at=view.created_at)


@router.get("/users", response_model=list[UserOut])
def list_users(
    app: AppDep, caller: Annotated[Caller, Depends(requires("user.read"))]
) -> list[UserOut]:
    return [_out(u) for u in svc.list_users(app, caller.actor)]


@router.post("/users", response_model=UserOut, status_code=201)
def add_user(
    body: UserIn, app: AppDep, caller: Annotated[Caller, Depends(requires("user.add"))]
) -> UserOut:
    return _out(svc.add_user(app, caller.actor, body.name, body.password, body.role))


@router.patch("/users/{name}", response_model=UserOut)
def edit_user(
    name: str,
    body: UserPatch,
    request: Request,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("user.edit"))],
) -> UserOut:
    # All or nothing: a refused field changes no other. The password is checked before
    # anything is written, and the role (which may be refused: the last admin) is set
    # before the password, whose change ends the user's sessions.
    if body.password is not None:
        v.validate_password(body.password)
    if body.role is not None:
        svc.set_role(app, caller.actor, name, body.role)
    if body.password is not None:
        # The user's sessions end (the caller's own, when resetting themselves, stays).
        keep = session_token(request) if caller.csrf_token is not None else None
        svc.set_password(
            app,
            caller.actor,
            name,
            body.password,
            keep_session=keep,
            revoke_tokens=body.revoke_tokens,
        )
    return _out(svc.show_user(app, caller.actor, name))


@router.delete("/users/{name}", status_code=204)
def remove_user(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("user.remove"))]
) -> Response:
    svc.remove_user(app, caller.actor, name)
    return Response(status_code=204)


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(
    app: AppDep, caller: Annotated[Caller, Depends(requires("token.manage_own"))]
) -> list[TokenOut]:
    return [
        TokenOut(
            id=t.id,
            name=t.name,
            prefix=t.prefix,
            created_at=t.created_at,
            last_used_at=t.last_used_at,
            revoked_at=t.revoked_at,
            expires_at=t.expires_at,
            scope=t.scope,
            project=t.project,
            role=t.role,
        )
        for t in svc.list_tokens(app, caller.actor, caller.actor.name)
    ]


@router.post("/tokens", response_model=TokenCreated, status_code=201)
def create_token(
    body: TokenIn, app: AppDep, caller: Annotated[Caller, Depends(requires("token.manage_own"))]
) -> TokenCreated:
    token, token_id = svc.create_token(
        app,
        caller.actor,
        body.user or caller.actor.name,
        body.name,
        expires_in_days=body.expires_in_days,
        scope=body.scope,
        project=body.project,
        role=body.role,
    )
    return TokenCreated(id=token_id, token=token)


@router.delete("/tokens/{token_id}", status_code=204)
def revoke_token(
    token_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("token.manage_own"))],
) -> Response:
    svc.revoke_token(app, caller.actor, token_id)
    return Response(status_code=204)


@router.post("/account/password", response_model=PasswordChanged)
def change_own_password(
    body: PasswordChange,
    request: Request,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("account.manage_own"))],
) -> PasswordChanged:
    """Change your own password, proving the current one. Your other browser sessions end;
    with ``revoke_tokens`` your API tokens are revoked too."""
    keep = session_token(request) if caller.csrf_token is not None else None
    done = svc.change_own_password(
        app,
        caller.actor,
        body.current_password,
        body.new_password,
        keep_session=keep,
        revoke_tokens=body.revoke_tokens,
        guard=own_password_guard(request, caller.actor),
    )
    return PasswordChanged(sessions_ended=done.sessions_ended, tokens_revoked=done.tokens_revoked)
