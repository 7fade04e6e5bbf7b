"""Roles in projects from a directory's groups, set again at each single sign-on log-in.

A mapping entry with a ``project`` gives its group's members a role in that project
(``core/sso_mapping.py``). At each log-in the account's roles that came from the directory
(``project_roles.source = 'sso'``) become what the groups map to now: granted, raised,
lowered, removed, each change audited as ``project.grant`` / ``project.revoke`` naming the
identity provider. A role granted by hand (``fleetcron project grant``, ``source =
'manual'``) is left as it is, the directory's mapping for that project included, until it
is revoked by hand.

A mapping entry naming a project that does not exist is ignored at the log-in, with a
warning for the admin (``sso.unknown_project``), since a project may be added after the
configuration is written; the web server says so once at start (:func:`warn_unknown`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.sso_mapping import GroupRole, projects_named
from fleetcron.services.audit import AuditNote, record
from fleetcron.store.audit import project_ids
from fleetcron.store.schema import SSO, Project, ProjectRole, User

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Provider:
    """The identity provider a log-in came through, as the audit log names it."""

    #: its label (``oidc_label``, ``ldap_label``)
    label: str
    #: the setting its mapping is read from (``oidc_role_mapping``)
    field: str


def existing_projects(session: Session, mapping: Sequence[GroupRole]) -> dict[str, int]:
    """The projects the mapping names that exist, by name."""
    return project_ids(session, list(projects_named(mapping)))


def check_projects(app: App, mapping: Sequence[GroupRole], provider: Provider) -> None:
    """:func:`warn_unknown` for every project ``mapping`` names that does not exist (no
    database read when it names none)."""
    named = projects_named(mapping)
    if not named:
        return
    with app.db.read() as session:
        known = existing_projects(session, mapping)
        warn_unknown(session, mapping, provider, [p for p in named if p not in known])


def warn_unknown(
    session: Session, mapping: Sequence[GroupRole], provider: Provider, unknown: Collection[str]
) -> None:
    """Tell the admin which entries name a project that does not exist (they are
    ignored), and which projects there are."""
    if not unknown:
        return
    known = ", ".join(session.scalars(select(Project.name).order_by(Project.name)))
    for index, entry in enumerate(mapping):
        if entry.project in unknown:
            log.warning(
                "%s[%d] (group %r, role %s) names the project %r, which does not exist; "
                "the entry is ignored until it does (projects: %s)",
                provider.field,
                index,
                entry.group,
                entry.role,
                entry.project,
                known,
                extra={"action": "sso.unknown_project", "provider": provider.label},
            )


def set_project_roles(
    session: Session,
    app: App,
    user: User,
    *,
    wanted: dict[str, int],
    roles: dict[str, str],
    provider: Provider,
) -> None:
    """Make ``user``'s roles from the directory ``roles`` (project name -> role, in the
    projects ``wanted`` gives the ids of); hand-granted roles stay."""
    rows = session.execute(
        select(ProjectRole, Project.name)
        .join(Project, Project.id == ProjectRole.project_id)
        .where(ProjectRole.user_id == user.id)
    )
    held: dict[str, ProjectRole] = {row[1]: row[0] for row in rows}
    change = _Change(session, app, user, provider)
    for name, role in sorted(roles.items()):
        row = held.get(name)
        if row is None:
            session.add(
                ProjectRole(user_id=user.id, project_id=wanted[name], role=role, source=SSO)
            )
            change.audit("project.grant", name, wanted[name], role=role)
        elif row.source == SSO and row.role != role:
            was, row.role = row.role, role
            change.audit("project.grant", name, row.project_id, role=role, was=was)
    for name, row in sorted(held.items()):
        if row.source == SSO and name not in roles:
            session.delete(row)
            change.audit("project.revoke", name, row.project_id, was=row.role)
    session.flush()


@dataclass(frozen=True)
class _Change:
    session: Session
    app: App
    user: User
    provider: Provider

    def audit(self, action: str, project: str, pid: int, **roles: str) -> None:
        detail = {"project": project, "user": self.user.name, **roles}
        detail.update(source=SSO, provider=self.provider.label)
        note = AuditNote(action, detail=detail, project_id=pid)
        record(self.session, self.app, Actor(self.user.name, self.user.role), note, success=True)


__all__ = ["Provider", "check_projects", "existing_projects", "set_project_roles", "warn_unknown"]
