"""Which project an object belongs to, and what an actor sees of them.

The decision is :mod:`fleetcron.core.permissions` (``may``, ``sees``,
``visible_projects``); this module reads what it needs from the database: a project's id
from its name, the ids an actor sees, a user's roles in projects. A project the actor does
not see is answered as missing (:class:`NotFound`), as are its objects, so names cannot be
probed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    exists,
    false,
    func,
    or_,
    select,
    true,
)
from sqlalchemy.orm import Session

from fleetcron.app import Actor
from fleetcron.core.permissions import (
    DEFAULT_PROJECT,
    FULL_SCOPE,
    ROLE_RANK,
    best_role,
    capped,
    role_in,
    roles_of,
    sees,
    visible_projects,
)
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.store.schema import (
    DEFAULT_PROJECT_ID,
    ApiToken,
    Job,
    Project,
    ProjectRole,
    Run,
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


def place(session: Session, actor: Actor) -> int:
    """The id of the project ``actor`` acts in; NotFound when it does not see it."""
    return entered(session, actor, actor.project)


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


def projects_reached(target: Target) -> Select[Any]:
    """The ids of the projects whose jobs may run on ``target``: its own and those it is
    shared into."""
    shared = select(TargetShare.project_id).where(TargetShare.target_id == target.id)
    return select(Project.id).where((Project.id == target.project_id) | Project.id.in_(shared))


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


def uniform(actor: Actor) -> bool:
    """Whether ``actor`` has one role everywhere (a global role, no role in a project, no
    token narrowed to one): then no object's project changes what it may do."""
    return visible_projects(actor) is None and not actor.project_roles


def authorize_job_object(
    session: Session, actor: Actor, action: str, *, job_id: int, kind: str, ident: object
) -> None:
    """``action`` on an object of job ``job_id`` (a run, by its id): weighed in the job's
    project, NotFound as ``kind ident`` when the actor does not see it. The objects of a
    removed job are for global roles only."""
    if uniform(actor):
        actor.authorize(action)
        return
    pid = session.scalar(select(Job.project_id).where(Job.id == job_id))
    if pid is None:
        if visible_projects(actor) is not None:
            raise NotFound(kind, ident)
        actor.authorize(action)
        return
    actor.authorize_in(action, check_owned(session, actor, pid, kind, ident))


def runs_in(session: Session, actor: Actor) -> ColumnElement[bool] | None:
    """Which runs ``actor`` sees listed in the project it acts in: those of the project's
    jobs, and in ``default``, for a global role, those of removed jobs. None (no filter):
    an install with one project, seen by an actor with one role everywhere, where every
    run is in it (its searches keep their plans)."""
    pid = place(session, actor)
    if uniform(actor) and session.scalar(select(func.count(Project.id))) == 1:
        return None
    mine = Run.job_id.in_(select(Job.id).where(Job.project_id == pid))
    if pid != DEFAULT_PROJECT_ID or visible_projects(actor) is not None:
        return mine
    return or_(mine, ~exists().where(Job.id == Run.job_id))


#: A user's roles in projects: built once, since every authenticated request reads them
#: (SQLAlchemy then finds its compiled form by the statement's cache key, also kept).
_ROLES_OF_USER = (
    select(Project.name, ProjectRole.role)
    .join(Project, Project.id == ProjectRole.project_id)
    .where(ProjectRole.user_id == bindparam("user_id"))
)


def roles_for(session: Session, user_id: int) -> tuple[tuple[str, str], ...]:
    """A user's roles in projects, as an actor carries them."""
    rows = session.execute(_ROLES_OF_USER, {"user_id": user_id})
    return roles_of({name: role for name, role in rows})


def actor_of(session: Session, user: User, *, role: str | None = None) -> Actor:
    """The actor of ``user`` with its roles in projects (``role``: a global role just
    given, e.g. by single sign-on's groups)."""
    return Actor(user.name, role or user.role, FULL_SCOPE, roles_for(session, user.id))


def token_terms(
    session: Session, owner: Actor, *, project: str | None, role: str | None
) -> int | None:
    """Check a new token's ``project`` (one its owner sees) and ``role`` (not above the
    owner's there, or globally); returns the project's id (None: every project)."""
    pid = None if project is None else entered(session, owner, project)
    if role is None:
        return pid
    has = role_in(owner, project) if project is not None else best_role(owner)
    if role not in ROLE_RANK or ROLE_RANK[role] > ROLE_RANK.get(has, -1):
        where = f"in project {project}" if project is not None else "anywhere"
        raise InvalidInput(
            f"role: {role!r} is above the {has} role {owner.name} has {where}",
            field="role",
            value=role,
            allowed=f"a role up to {has}" if has in ROLE_RANK else "none: no role",
        )
    return pid


def actor_of_token(session: Session, row: ApiToken) -> Actor:
    """The actor of an API token: its owner's roles, each lowered to the token's role,
    narrowed to the token's project when it has one."""
    user = row.user
    roles = {p: capped(r, row.role) for p, r in roles_for(session, user.id)}
    project = None if row.project is None else row.project.name
    actor = Actor(user.name, capped(user.role, row.role), row.scope, roles_of(roles), project)
    return actor.within(project)
