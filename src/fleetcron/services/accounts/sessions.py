"""Browser sessions: log in, resolve the cookie, log out. Logins are audited."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, delete, select
from sqlalchemy.orm import joinedload

from fleetcron.app import Actor, App
from fleetcron.errors import AuthenticationFailed
from fleetcron.services.accounts.users import authenticate
from fleetcron.services.audit import ANONYMOUS_ACTOR, AuditNote, record
from fleetcron.services.projects.scope import actor_of
from fleetcron.store.schema import SsoLogin, User, WebSession

SESSION_LIFETIME = timedelta(hours=12)
#: The actor of failed and refused logins: the name typed is the attacker's text, so it is
#: kept in the detail (shown to admins only), never as the actor.
ANONYMOUS = Actor(ANONYMOUS_ACTOR, "viewer")


@dataclass(frozen=True)
class LoggedIn:
    """A resolved session: who, and the CSRF token their forms must carry."""

    actor: Actor
    csrf_token: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def login(app: App, name: str, password: str, address: str) -> tuple[str, LoggedIn]:
    """Check the password and open a session; returns (cookie value, session)."""
    try:
        actor = authenticate(app, name, password)
    except AuthenticationFailed:
        _audit_login(app, name, address, success=False)
        raise
    return open_session(app, actor, {"address": address})


def open_session(app: App, actor: Actor, detail: dict[str, Any]) -> tuple[str, LoggedIn]:
    """A new session of ``actor``, whose credentials the caller has checked (a password,
    or an identity provider's answer: ``detail`` then names the provider); audited as a
    login with ``detail``. Returns (cookie value, session)."""
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    now = app.now()
    with app.db.session() as session:
        user = session.scalars(select(User).where(User.name == actor.name)).one()
        session.add(
            WebSession(
                user_id=user.id,
                token_hash=_hash(token),
                csrf_token=csrf,
                created_at=now,
                expires_at=now + SESSION_LIFETIME,
                address=str(detail.get("address", ""))[:64],
            )
        )
        record(session, app, actor, AuditNote("login", detail=detail), success=True)
    return token, LoggedIn(actor, csrf)


def _audit_login(app: App, name: str, address: str, *, success: bool) -> None:
    with app.db.session() as session:
        note = AuditNote("login", detail={"address": address, "user": name[:64]})
        record(session, app, ANONYMOUS, note, success=success)


def record_refused_login(app: App, name: str, address: str, *, refused: int, reason: str) -> None:
    """Audit logins refused before any password check (rate limit). The caller writes one
    row for the 1st, 10th, 100th ... refusal of an address in a window, each with the
    count so far, so a flood leaves a handful of rows rather than one per request."""
    with app.db.session() as session:
        detail = {"address": address, "user": name[:64], "refused": refused, "reason": reason}
        record(session, app, ANONYMOUS, AuditNote("login.refused", detail=detail), success=False)


#: A session with its user, by its token's hash: built once, since every request of a
#: logged-in browser reads it.
_SESSION_BY_HASH = (
    select(WebSession)
    .options(joinedload(WebSession.user))
    .where(WebSession.token_hash == bindparam("token_hash"))
)


def resolve(app: App, token: str) -> LoggedIn | None:
    """The session of a cookie value, or None when unknown or expired."""
    now = app.now()
    with app.db.read() as session:
        row = session.scalar(_SESSION_BY_HASH, {"token_hash": _hash(token)})
        if row is None or row.expires_at <= now:
            return None
        return LoggedIn(actor_of(session, row.user), row.csrf_token)


def logout(app: App, token: str) -> str | None:
    """End the session of ``token``; returns the identity provider its user came from
    (None for a local account or an unknown session), whose own session the caller may end
    too."""
    with app.db.session() as session:
        row = session.scalar(select(WebSession).where(WebSession.token_hash == _hash(token)))
        if row is None:
            return None
        actor = actor_of(session, row.user)
        provider = row.user.identity_provider
        session.delete(row)
        record(session, app, actor, AuditNote("logout"), success=True)
        return provider


def prune_expired(app: App) -> int:
    """Delete expired sessions, and single sign-on log-ins that never came back."""
    with app.db.session() as session:
        session.execute(delete(SsoLogin).where(SsoLogin.expires_at <= app.now()))
        result = session.execute(delete(WebSession).where(WebSession.expires_at <= app.now()))
        return int(getattr(result, "rowcount", 0) or 0)
