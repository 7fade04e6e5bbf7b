"""Projects as a global admin manages them: add one, grant and revoke roles in it; and the
projects anyone sees. Every change is audited (``project.add``, ``project.grant``,
``project.revoke``). Sharing a target is ``services/targets/shares.py`` (it changes which
jobs run on it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.permissions import ROLE_RANK, role_in, sees, visible_projects
from fleetcron.errors import Conflict, NotFound
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.projects.scope import project_id
from fleetcron.store.schema import MANUAL, Job, Project, ProjectRole, Target, User

#: the longest description of a project
DESCRIPTION_MAX = 500


@dataclass(frozen=True)
class ProjectView:
    name: str
    description: str
    created_by: str
    created_at: datetime
    jobs: int
    targets: int
    #: the role the viewing actor acts with there (global or the project's)
    your_role: str


@dataclass(frozen=True)
class MemberView:
    user: str
    role: str
    #: who gave it: ``manual`` (granted by hand) or ``sso`` (the directory's groups)
    source: str = MANUAL


def add_project(app: App, actor: Actor, name: str, description: str = "") -> ProjectView:
    """A new, empty project (global admins)."""
    note = AuditNote("project.add", detail={"project": name})
    with audited(app, actor, note) as session:
        actor.authorize("project.add")
        v.validate_name(name, field="name")
        v.validate_length(description, field="description", limit=DESCRIPTION_MAX)
        if session.scalar(select(Project.id).where(Project.name == name)) is not None:
            raise Conflict(f"project {name} already exists", field="name")
        row = Project(name=name, description=description, created_by=actor.name)
        row.created_at = app.now()
        session.add(row)
        session.flush()
        note.project_id = row.id
        return _view(session, actor, row)


def list_projects(app: App, actor: Actor) -> list[ProjectView]:
    """The projects ``actor`` sees, by name."""
    actor.authorize("project.read")
    with app.db.read() as session:
        rows = session.scalars(select(Project).order_by(Project.name))
        return [_view(session, actor, row) for row in rows if sees(actor, row.name)]


def project_names(app: App, actor: Actor) -> list[str]:
    """The names of the projects ``actor`` sees, sorted (the pages' project switcher): no
    statement when its roles name them."""
    names = visible_projects(actor)
    if names is not None:
        return sorted(names)
    with app.db.read() as session:
        return list(session.scalars(select(Project.name).order_by(Project.name)))


def members(app: App, actor: Actor, project: str) -> list[MemberView]:
    """Who has a role in ``project`` (global admins)."""
    actor.authorize("project.grant")
    with app.db.read() as session:
        pid = project_id(session, project)
        rows = session.execute(
            select(User.name, ProjectRole.role, ProjectRole.source)
            .join(User, User.id == ProjectRole.user_id)
            .where(ProjectRole.project_id == pid)
            .order_by(User.name)
        )
        return [MemberView(name, role, source) for name, role, source in rows]


def grant(app: App, actor: Actor, project: str, user: str, role: str) -> MemberView:
    """Give ``user`` the ``role`` in ``project`` (replacing a role it had there, one from
    the directory's groups included: the role is then one granted by hand, which the
    groups no longer change)."""
    note = AuditNote("project.grant", detail={"project": project, "user": user, "role": role})
    with audited(app, actor, note) as session:
        actor.authorize("project.grant")
        v.validate_choice(role, tuple(ROLE_RANK), field="role")
        pid = note.project_id = project_id(session, project)
        uid = _user_id(session, user)
        row = session.get(ProjectRole, (uid, pid))
        if row is None:
            session.add(ProjectRole(user_id=uid, project_id=pid, role=role, source=MANUAL))
        else:
            note.detail["was"] = row.role
            if row.source != MANUAL:
                note.detail["was_source"] = row.source
            row.role, row.source = role, MANUAL
        return MemberView(user, role)


def revoke(app: App, actor: Actor, project: str, user: str) -> None:
    """Take ``user``'s role in ``project`` away (its global role stays; a role from the
    directory's groups comes back at its next single sign-on log-in)."""
    note = AuditNote("project.revoke", detail={"project": project, "user": user})
    with audited(app, actor, note) as session:
        actor.authorize("project.grant")
        pid = note.project_id = project_id(session, project)
        uid = _user_id(session, user)
        gone = session.execute(
            delete(ProjectRole).where(ProjectRole.user_id == uid, ProjectRole.project_id == pid)
        )
        if not gone.rowcount:  # type: ignore[attr-defined]
            raise NotFound(f"role in project {project} of user", user, field="user")


def _user_id(session: Session, name: str) -> int:
    found = session.scalar(select(User.id).where(User.name == name))
    if found is None:
        raise NotFound("user", name, field="user")
    return found


def _view(session: Session, actor: Actor, row: Project) -> ProjectView:
    jobs = session.scalar(select(func.count(Job.id)).where(Job.project_id == row.id)) or 0
    targets = session.scalar(select(func.count(Target.id)).where(Target.project_id == row.id))
    return ProjectView(
        row.name,
        row.description,
        row.created_by,
        row.created_at,
        int(jobs),
        int(targets or 0),
        role_in(actor, row.name),
    )
