"""Which project an object belongs to, and what an actor sees of them.

The decision is :mod:`fleetcron.core.permissions` (``may``, ``sees``,
``visible_projects``); this module reads what it needs from the database: a project's id
from its name, the ids an actor sees, a user's roles in projects. A project the actor does
not see is answered as missing (:class:`NotFound`), as are its objects, so names cannot be
probed.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, false, or_, select, true
from sqlalchemy.orm import Session

from fleetcron.app import Actor
from fleetcron.core.permissions import FULL_SCOPE, capped, roles_of, sees, visible_projects
from fleetcron.errors import NotFound
from fleetcron.store.schema import (
    DEFAULT_PROJECT,
    ApiToken,
    Project,
    ProjectRole,
    Target,
    TargetShare,
    User,
)


def project_id(session: Session, name: str) -> int:
    """The id of project ``name``; NotFound when there is none."""
    found = session.scalar(select(Project.id).where(Project.name == name))
    if found is None:
        raise NotFound("project", name, field="project")
    return found


def project_name(session: Session, pid: int) -> str:
    name = session.scalar(select(Project.name).where(Project.id == pid))
    assert name is not None, pid
    return name


def entered(session: Session, actor: Actor, name: str | None) -> int:
    """The id of project ``name`` (None: ``default``) for ``actor``: NotFound, as for a
    missing one, when the actor does not see it."""
    name = name or DEFAULT_PROJECT
    if not sees(actor, name):
        raise NotFound("project", name, field="project")
    return project_id(session, name)


def visible_ids(session: Session, actor: Actor) -> set[int] | None:
    """The ids of the projects ``actor`` sees; None: every project."""
    names = visible_projects(actor)
    if names is None:
        return None
    if not names:
        return set()
    return set(session.scalars(select(Project.id).where(Project.name.in_(sorted(names)))))


def in_visible(column: ColumnElement[int], ids: set[int] | None) -> ColumnElement[bool]:
    """A filter of ``column`` (a ``project_id``) to the projects of :func:`visible_ids`."""
    if ids is None:
        return true()
    return column.in_(sorted(ids)) if ids else false()


def target_reaches(pid: int) -> ColumnElement[bool]:
    """Targets a job of project ``pid`` may run on: the project's own, and those shared
    into it."""
    shared = select(TargetShare.target_id).where(TargetShare.project_id == pid)
    return or_(Target.project_id == pid, Target.id.in_(shared))


def target_seen(ids: set[int] | None) -> ColumnElement[bool]:
    """Targets an actor who sees the projects ``ids`` sees: theirs and those shared into
    them."""
    if ids is None:
        return true()
    if not ids:
        return false()
    shared = select(TargetShare.target_id).where(TargetShare.project_id.in_(sorted(ids)))
    return or_(Target.project_id.in_(sorted(ids)), Target.id.in_(shared))


def check_owned(session: Session, actor: Actor, pid: int, kind: str, name: object) -> str:
    """The name of project ``pid`` an object (``kind`` ``name``) belongs to; NotFound for
    the object when ``actor`` does not see that project."""
    project = project_name(session, pid)
    if not sees(actor, project):
        raise NotFound(kind, name)
    return project


def roles_for(session: Session, user_id: int) -> tuple[tuple[str, str], ...]:
    """A user's roles in projects, as an actor carries them."""
    rows = session.execute(
        select(Project.name, ProjectRole.role)
        .join(Project, Project.id == ProjectRole.project_id)
        .where(ProjectRole.user_id == user_id)
    )
    return roles_of({name: role for name, role in rows})


def actor_of(session: Session, user: User, *, role: str | None = None) -> Actor:
    """The actor of ``user`` with its roles in projects (``role``: a global role just
    given, e.g. by single sign-on's groups)."""
    return Actor(user.name, role or user.role, FULL_SCOPE, roles_for(session, user.id))


def actor_of_token(session: Session, row: ApiToken) -> Actor:
    """The actor of an API token: its owner's roles, each lowered to the token's role,
    narrowed to the token's project when it has one."""
    user = row.user
    roles = {p: capped(r, row.role) for p, r in roles_for(session, user.id)}
    project = None if row.project_id is None else project_name(session, row.project_id)
    return Actor(user.name, capped(user.role, row.role), row.scope, roles_of(roles), project)
