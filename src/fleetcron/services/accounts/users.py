"""User accounts and API tokens.

Passwords are hashed with argon2id (argon2-cffi); API tokens are random, shown once,
and stored as SHA-256 (a token has 256 bits of entropy, so a slow hash adds nothing).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.orm import Session, joinedload

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.permissions import FULL_SCOPE, GLOBAL_ROLES, SCOPES, allowed
from fleetcron.errors import AuthenticationFailed, Conflict, InvalidInput, NotFound, StoreError
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.projects.scope import actor_of, actor_of_token, token_terms
from fleetcron.store.schema import ApiToken, User, WebSession

_hasher = PasswordHasher()
TOKEN_PREFIX = "fct_"
#: the longest lifetime a token may be given (``expires_in_days``)
MAX_TOKEN_DAYS = 3650
#: the actor of the local root's recovery command: whoever can open the database directly
LOCAL_ROOT = Actor("local-root", "admin")


@dataclass(frozen=True)
class UserView:
    id: int
    name: str
    role: str
    created_at: datetime


@dataclass(frozen=True)
class TokenView:
    """An API token as shown: never its hash."""

    id: int
    name: str
    prefix: str
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None
    #: the one project it acts in (None: every project of its owner)
    project: str | None = None
    #: the role it acts with, never above its owner's (None: its owner's)
    role: str | None = None

    @classmethod
    def of(cls, row: ApiToken) -> TokenView:
        return cls(
            row.id,
            row.name,
            row.prefix,
            row.scope,
            row.created_at,
            row.last_used_at,
            row.revoked_at,
            row.expires_at,
            None if row.project is None else row.project.name,
            row.role,
        )


def _view(user: User) -> UserView:
    return UserView(user.id, user.name, user.role, user.created_at)


MAX_PASSWORD_CHARS = v.PASSWORD_MAX_CHARS


def _check_password(password: str) -> str:
    """At least 8 characters (core validation) and at most 1024: a longer one is refused,
    never cut, and cannot make a hash cost more than any other."""
    v.validate_password(password)
    if len(password) > MAX_PASSWORD_CHARS:
        raise InvalidInput(
            f"password: {len(password)} characters is longer than {MAX_PASSWORD_CHARS}",
            field="password",
            value="**********",
            allowed=f"8 to {MAX_PASSWORD_CHARS} characters",
        )
    return password


def get_user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFound("user", name)
    return user


def count_users(session: Session) -> int:
    return session.scalar(select(func.count(User.id))) or 0


def add_user(app: App, actor: Actor, name: str, password: str, role: str) -> UserView:
    note = AuditNote("user.add", detail={"user": name, "role": role})
    with audited(app, actor, note) as session:
        actor.authorize("user.add")
        v.validate_name(name, field="name")
        v.validate_choice(role, GLOBAL_ROLES, field="role")
        _check_password(password)
        if session.scalar(select(User.id).where(User.name == name)) is not None:
            raise Conflict(f"user {name} already exists", field="name")
        now = app.now()
        user = User(
            name=name,
            password_hash=_hasher.hash(password),
            role=role,
            created_at=now,
            updated_at=now,
        )
        session.add(user)
        session.flush()
        return _view(user)


def list_users(app: App, actor: Actor) -> list[UserView]:
    actor.authorize("user.read")
    with app.db.read() as session:
        return [_view(u) for u in session.scalars(select(User).order_by(User.name))]


def show_user(app: App, actor: Actor, name: str) -> UserView:
    actor.authorize("user.read")
    with app.db.read() as session:
        return _view(get_user(session, name))


@dataclass(frozen=True)
class PasswordChanged:
    """What a password change ended besides the old password."""

    sessions_ended: int
    tokens_revoked: int


def set_password(
    app: App,
    actor: Actor,
    name: str,
    password: str,
    *,
    keep_session: str | None = None,
    revoke_tokens: bool = False,
) -> PasswordChanged:
    """Set ``name``'s password and end their browser sessions (all but ``keep_session``,
    the cookie value of the session making the change), and with ``revoke_tokens`` their
    API tokens too: whoever knew the old password is logged out."""
    note = AuditNote("user.passwd", detail={"user": name})
    with audited(app, actor, note) as session:
        if actor.name != name:
            actor.authorize("user.edit")
        _check_password(password)
        user = get_user(session, name)
        _check_local(user)
        user.password_hash = _hasher.hash(password)
        user.updated_at = app.now()
        changed = _end_access(session, app, user, keep_session, revoke_tokens)
        note.detail.update(
            sessions_ended=changed.sessions_ended, tokens_revoked=changed.tokens_revoked
        )
        return changed


def _check_local(user: User) -> None:
    """A password is set only on a local account: one a directory signs in would then
    also log in with it, past the directory's groups, disabling and removal."""
    if user.identity_provider is not None:
        raise InvalidInput(
            f"user: {user.name} signs in through {user.identity_provider}; "
            "its password is the directory's",
            field="user",
            value=user.name,
            allowed="a local account (one not made by single sign-on)",
        )


#: Runs a password check (a callable that raises when the password is wrong) under the
#: caller's rate limit and bound on concurrent hashing; the web server passes its limiter's.
PasswordGuard = Callable[[Callable[[], None]], None]


def unguarded(check: Callable[[], None]) -> None:
    """The guard of a caller with no limiter (the CLI, which acts without a password)."""
    check()


def change_own_password(
    app: App,
    actor: Actor,
    current: str,
    new: str,
    *,
    keep_session: str | None = None,
    revoke_tokens: bool = False,
    guard: PasswordGuard = unguarded,
) -> PasswordChanged:
    """A user's own change, proven with the current password (a stolen session alone
    cannot take the account over). The check of the current password runs through
    ``guard``: it is a password oracle like the log-in."""
    note = AuditNote("user.passwd", detail={"user": actor.name, "own": True})
    with app.db.read() as session:
        stored = get_user(session, actor.name).password_hash

    def check() -> None:
        try:
            _hasher.verify(stored, current)
        except (VerificationError, InvalidHashError):
            error = InvalidInput(
                "current_password: not the current password",
                field="current_password",
                value="(hidden)",
                allowed="your current password",
            )
            from fleetcron.services.audit import record_failure

            record_failure(app, actor, note, error)
            raise error from None

    guard(check)
    if current == new:
        raise InvalidInput(
            "new_password: the same as the current password",
            field="new_password",
            value="(hidden)",
            allowed="a different password",
        )
    return set_password(
        app, actor, actor.name, new, keep_session=keep_session, revoke_tokens=revoke_tokens
    )


def _end_access(
    session: Session, app: App, user: User, keep_session: str | None, revoke_tokens: bool
) -> PasswordChanged:
    ended = delete(WebSession).where(WebSession.user_id == user.id)
    if keep_session is not None:
        ended = ended.where(WebSession.token_hash != hash_token(keep_session))
    sessions_ended = int(getattr(session.execute(ended), "rowcount", 0) or 0)
    tokens_revoked = 0
    if revoke_tokens:
        result = session.execute(
            update(ApiToken)
            .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
            .values(revoked_at=app.now())
        )
        tokens_revoked = int(getattr(result, "rowcount", 0) or 0)
    return PasswordChanged(sessions_ended, tokens_revoked)


def set_role(app: App, actor: Actor, name: str, role: str) -> UserView:
    note = AuditNote("user.role", detail={"user": name, "role": role})
    with audited(app, actor, note) as session:
        actor.authorize("user.edit")
        v.validate_choice(role, GLOBAL_ROLES, field="role")
        user = get_user(session, name)
        _keep_an_admin(session, user, new_role=role)
        user.role = role
        user.updated_at = app.now()
        return _view(user)


def remove_user(app: App, actor: Actor, name: str) -> None:
    note = AuditNote("user.remove", detail={"user": name})
    with audited(app, actor, note) as session:
        actor.authorize("user.remove")
        user = get_user(session, name)
        _keep_an_admin(session, user, new_role=None)
        session.delete(user)


def _keep_an_admin(session: Session, user: User, *, new_role: str | None) -> None:
    if user.role != "admin" or new_role == "admin":
        return
    if len(locked_admins(session)) <= 1:
        raise Conflict(f"{user.name} is the last admin; make another admin first", field="name")


def locked_admins(session: Session) -> list[int]:
    """The ids of the admins, locked until the transaction ends (``SELECT ... FOR UPDATE``
    on PostgreSQL; SQLite's write transactions are serial already). Two demotions at once
    otherwise both count two admins and leave none: with the lock, the second waits and
    then counts what the first left."""
    return list(session.scalars(select(User.id).where(User.role == "admin").with_for_update()))


def recover_admin(app: App, name: str, password: str | None = None) -> UserView:
    """Make ``name`` an admin again (or create it, with ``password``), as the local root:
    the way back when no admin can log in. Whoever can open the database can do this
    anyway; the command makes it an audited action."""
    note = AuditNote("user.recover-admin", detail={"user": name})
    with audited(app, LOCAL_ROOT, note) as session:
        v.validate_name(name, field="name")
        now = app.now()
        user = session.scalar(select(User).where(User.name == name))
        if user is None:
            if password is None:
                raise InvalidInput(
                    f"password: user {name} does not exist; give a password to create it",
                    field="password",
                    value=None,
                    allowed="at least 8 characters",
                )
            _check_password(password)
            user = User(
                name=name,
                password_hash=_hasher.hash(password),
                role="admin",
                created_at=now,
                updated_at=now,
            )
            session.add(user)
            note.detail["created"] = True
        else:
            note.detail["was"] = user.role
            user.role = "admin"
            if password is not None:
                _check_password(password)
                user.password_hash = _hasher.hash(password)
                note.detail["password_set"] = True
            user.updated_at = now
        session.flush()
        return _view(user)


def authenticate(app: App, name: str, password: str) -> Actor:
    """The actor for valid credentials; AuthenticationFailed otherwise (same message for an
    unknown user and a wrong password, so names cannot be probed)."""
    with app.db.read() as session:
        user = session.scalar(select(User).where(User.name == name))
        stored = user.password_hash if user else None
    try:
        if stored is None:
            _hasher.hash(password)  # spend the same time as a real check
            raise VerificationError
        _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        raise AuthenticationFailed("unknown user or wrong password") from None
    assert user is not None
    with app.db.read() as session:
        return actor_of(session, user)


def actor_for(app: App, name: str) -> Actor:
    """The actor of an existing user (the CLI acts as a local user without a password)."""
    with app.db.read() as session:
        user = get_user(session, name)
        return actor_of(session, user)


def first_admin(app: App) -> Actor:
    with app.db.read() as session:
        user = session.scalar(select(User).where(User.role == "admin").order_by(User.id).limit(1))
        if user is None:
            raise StoreError("there is no admin user yet; run `fleetcron init`")
        return actor_of(session, user)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(
    app: App,
    actor: Actor,
    owner: str,
    token_name: str,
    *,
    expires_in_days: int | None = None,
    scope: str = FULL_SCOPE,
    project: str | None = None,
    role: str | None = None,
) -> tuple[str, int]:
    """A new API token for ``owner``; returns (token, id). The token is shown only now.
    With ``expires_in_days`` it is refused from that many days on; ``scope`` narrows what
    it may do within the owner's role (read, run or write); ``project`` confines it to one
    project and ``role`` lowers its role (never above the owner's there)."""
    note = AuditNote("token.create", detail={"user": owner, "token": token_name, "scope": scope})
    if project is not None or role is not None:
        note.detail.update({"project": project, "role": role})
    with audited(app, actor, note) as session:
        actor.authorize("token.manage_own" if owner == actor.name else "token.manage_any")
        v.validate_name(token_name, field="name")
        _check_token_terms(scope, expires_in_days)
        if expires_in_days is not None:
            note.detail["expires_in_days"] = expires_in_days

        user = get_user(session, owner)
        terms = token_terms(session, actor_of(session, user), project=project, role=role)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = app.now()
        row = ApiToken(
            user=user,
            name=token_name,
            token_hash=hash_token(token),
            prefix=token[:10],
            created_at=now,
            expires_at=None if expires_in_days is None else now + timedelta(days=expires_in_days),
            scope=scope,
            project_id=terms,
            role=role,
        )
        session.add(row)
        session.flush()
        return token, row.id


def _check_token_terms(scope: str, expires_in_days: int | None) -> None:
    """Refuse a scope that is not a token scope, or a lifetime out of 1 to the maximum days."""
    if scope not in SCOPES:
        raise InvalidInput(
            f"scope: {scope!r} is not a token scope (one of {', '.join(SCOPES)})",
            field="scope",
            value=scope,
            allowed=", ".join(SCOPES),
        )
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise InvalidInput(
            f"expires_in_days: {expires_in_days!r} is out of range 1-{MAX_TOKEN_DAYS} "
            "(days; empty: no expiry)",
            field="expires_in_days",
            value=expires_in_days,
            allowed=f"1 to {MAX_TOKEN_DAYS} days, or none for no expiry",
        )


def list_tokens(app: App, actor: Actor, owner: str) -> list[TokenView]:
    actor.authorize("token.manage_own" if owner == actor.name else "token.manage_any")
    with app.db.read() as session:
        user = get_user(session, owner)
        rows = session.scalars(select(ApiToken).where(ApiToken.user_id == user.id))
        return [TokenView.of(t) for t in rows]


def revoke_token(app: App, actor: Actor, token_id: int) -> None:
    note = AuditNote("token.revoke", detail={"token_id": token_id})
    with audited(app, actor, note) as session:
        row = session.get(ApiToken, token_id)
        own = row is not None and row.user.name == actor.name
        if row is None or not (own or allowed(actor.role, "token.manage_any", actor.scope)):
            # Another user's token is answered like a missing one: ids cannot be probed.
            raise NotFound("token", token_id)
        actor.authorize("token.manage_own" if own else "token.manage_any")
        if row.revoked_at is None:
            row.revoked_at = app.now()


#: How far a token's recorded last use may lag behind: an API request records its use when
#: the one recorded is at least this old, so the requests of a busy client read their
#: token without writing it back each time.
LAST_USE_STEP = timedelta(minutes=1)


#: A token with its owner, by its hash: built once, since every API request reads it.
_TOKEN_BY_HASH = (
    select(ApiToken)
    .options(joinedload(ApiToken.user))
    .where(ApiToken.token_hash == bindparam("token_hash"))
)


def actor_for_token(app: App, token: str) -> Actor:
    """Resolve a bearer token; records its last use (to :data:`LAST_USE_STEP`)."""
    if not token.startswith(TOKEN_PREFIX):
        raise AuthenticationFailed("invalid API token")
    with app.db.session() as session:
        row = session.scalar(_TOKEN_BY_HASH, {"token_hash": hash_token(token)})
        if row is None or row.revoked_at is not None:
            raise AuthenticationFailed("invalid or revoked API token")
        now = app.now()
        if row.expires_at is not None and row.expires_at <= now:
            raise AuthenticationFailed("expired API token; create a new one")
        if row.last_used_at is None or now - row.last_used_at >= LAST_USE_STEP:
            row.last_used_at = now
        return actor_of_token(session, row)


def check_bootstrap_password(password: str | None) -> str:
    if password is None:
        raise InvalidInput(
            "admin-password: required",
            field="admin-password",
            value=None,
            allowed="at least 8 characters",
        )
    return _check_password(password)
