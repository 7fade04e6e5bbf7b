"""Accounts from an identity provider: made on the first log-in, their role kept in step
with the provider's groups at every log-in, refused when no group maps to a role.

A group may map to a role in a project (``project_roles.py``): one whose groups give
roles in projects only logs in with the global role ``none`` and sees those projects.

A provider's account is found by (provider, subject): the OIDC issuer and ``sub``, never
by name, so a person renamed at the provider keeps their account, and nobody at the
provider can take over a local account (the break-glass admin above all) by choosing its
name: a name held by a local account, or by another subject, refuses the log-in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.sso_mapping import Grants, GroupRole, grants_for
from fleetcron.errors import InvalidInput, SsoRefused
from fleetcron.services.accounts.sessions import ANONYMOUS
from fleetcron.services.audit import AuditNote, record
from fleetcron.services.identity.project_roles import (
    Provider,
    existing_projects,
    set_project_roles,
    warn_unknown,
)
from fleetcron.services.projects.scope import actor_of
from fleetcron.store.schema import User, WebSession

log = logging.getLogger(__name__)

#: The password hash of an account from an identity provider: no password matches it (it is
#: no argon2 hash), so the account cannot log in with the form.
NO_PASSWORD = "!sso"
#: The groups kept in an audit event's detail at most.
AUDITED_GROUPS = 20


@dataclass(frozen=True)
class Identity:
    """Who the provider says someone is."""

    #: the provider's namespace of subjects (an OIDC issuer URL)
    provider: str
    #: the provider's stable id of the person (OIDC ``sub``)
    subject: str
    #: the account name asked for (OIDC ``preferred_username``, as configured)
    name: str
    groups: tuple[str, ...]
    #: the provider's name for people (the audit log's ``provider`` detail)
    label: str


def refusal(error: SsoRefused, *, provider: str, address: str, app: App) -> None:
    """Log and audit a refused single sign-on log-in: ``sso.<reason>`` for the admin."""
    log.warning(
        "single sign-on log-in refused (%s): %s",
        error.reason,
        error.detail or error.message,
        extra={"action": f"sso.{error.reason}", "provider": provider, "address": address},
    )
    detail = {"address": address, "provider": provider, "reason": error.reason}
    if error.detail:
        detail["error"] = error.detail[:500]
    with app.db.session() as session:
        record(session, app, ANONYMOUS, AuditNote("login", detail=detail), success=False)


def provision(
    app: App, identity: Identity, mapping: Sequence[GroupRole], *, field: str = "role_mapping"
) -> Actor:
    """The actor of ``identity``: its account, made now if new, with the global role and
    the roles in projects its groups map to (``field``: the setting of ``mapping``, for
    the admin's warnings). Refused (:class:`SsoRefused`) when no group maps, or the name
    is taken; a known account refused for its groups has its sessions ended and its roles
    from the directory removed."""
    provider = Provider(identity.label, field)
    with app.db.session() as session:
        user = session.scalar(
            select(User).where(
                User.identity_provider == identity.provider, User.subject == identity.subject
            )
        )
        known = existing_projects(session, mapping)
        grants = grants_for(identity.groups, mapping, known)
        warn_unknown(session, mapping, provider, grants.unknown)
        if grants.role is not None:
            if user is None:
                user = _create(session, app, identity, grants.role)
            elif user.role != grants.role:
                _change_role(session, app, user, identity, grants.role)
            roles = grants.projects
            set_project_roles(session, app, user, wanted=known, roles=roles, provider=provider)
            return actor_of(session, user)
        if user is not None:
            set_project_roles(session, app, user, wanted=known, roles={}, provider=provider)
        refused = _no_role(session, user, identity, grants)
    raise refused


def _no_role(session: Session, user: User | None, identity: Identity, grants: Grants) -> SsoRefused:
    """The refusal of a person none of whose groups maps to a role (or only to roles in
    projects that do not exist: the page names them, the admin's log line names the
    entries, ``sso.unknown_project``); an account they have keeps no session (committed
    by the caller before it raises the refusal)."""
    ended = 0
    if user is not None:
        result = session.execute(delete(WebSession).where(WebSession.user_id == user.id))
        ended = int(getattr(result, "rowcount", 0) or 0)
    groups = ", ".join(identity.groups[:AUDITED_GROUPS]) or "none"
    sessions = f"; {ended} session(s) of the account ended" if ended else ""
    if grants.unknown:
        missing = ", ".join(grants.unknown)
        return SsoRefused(
            "Your groups give a role only in projects fleetcron does not have "
            f"({missing}). Ask an administrator.",
            reason="no_role",
            detail=f"{identity.name} ({identity.subject}) has a role only in projects that "
            f"do not exist: {missing} (groups: {groups}){sessions}",
        )
    return SsoRefused(
        "Your account has no role in fleetcron: no role for your groups. "
        "Ask an administrator to map one of your groups to a role.",
        reason="no_role",
        detail=f"{identity.name} ({identity.subject}) has no mapped group (groups: {groups})"
        + sessions,
    )


def _create(session: Session, app: App, identity: Identity, role: str) -> User:
    try:
        v.validate_name(identity.name, field="name")
    except InvalidInput:
        raise SsoRefused(
            "Your user name from the identity provider cannot name a fleetcron account. "
            "Ask an administrator.",
            reason="bad_name",
            detail=f"the name {identity.name[:100]!r} of {identity.subject} is not allowed: "
            f"{v.NAME_RULE}",
        ) from None
    taken = session.scalar(select(User).where(User.name == identity.name))
    if taken is not None:
        owner = taken.identity_provider or "a local account"
        raise SsoRefused(
            f"The user name {identity.name} is taken by another fleetcron account. "
            "Ask an administrator.",
            reason="name_taken",
            detail=f"{identity.subject} asked for the name {identity.name}, held by {owner}",
        )
    now = app.now()
    user = User(
        name=identity.name,
        password_hash=NO_PASSWORD,
        role=role,
        created_at=now,
        updated_at=now,
        identity_provider=identity.provider,
        subject=identity.subject,
    )
    session.add(user)
    session.flush()
    detail = {"user": identity.name, "role": role, "provider": identity.label}
    detail.update(issuer=identity.provider, subject=identity.subject)
    actor = Actor(identity.name, role)
    record(session, app, actor, AuditNote("user.add", detail=detail), success=True)
    return user


def _change_role(session: Session, app: App, user: User, identity: Identity, role: str) -> None:
    detail = {"user": user.name, "role": role, "was": user.role, "provider": identity.label}
    user.role = role
    user.updated_at = app.now()
    note = AuditNote("user.role", detail=detail)
    record(session, app, Actor(user.name, role), note, success=True)
