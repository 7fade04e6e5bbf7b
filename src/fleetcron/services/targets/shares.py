"""A target shared into projects other than its own (global admins, audited as
``target.share`` and ``target.unshare``): the jobs of a project it is shared into may run
on it (a bulk job's selector reaches it from then on) and that project's people see it.
Nothing of one project's jobs or runs shows in another through a shared target."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select

from fleetcron.app import Actor, App
from fleetcron.errors import Conflict, InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.fleet.assignments import extend_jobs_to, get_target
from fleetcron.services.projects.scope import place, project_id, project_name
from fleetcron.store.schema import Assignment, Job, Project, TargetShare


def share_target(app: App, actor: Actor, name: str, into: str) -> list[str]:
    """Share target ``name`` of the project ``actor`` acts in into project ``into``;
    returns the jobs of ``into`` extended to it."""
    note = AuditNote("target.share", target_name=name, detail={"into": into})
    with audited(app, actor, note) as session:
        actor.authorize("project.share")
        target = get_target(session, name, place(session, actor))
        note.target_id = target.id
        pid = project_id(session, into)
        if pid == target.project_id:
            raise InvalidInput(
                f"into: target {name} belongs to project {into} already",
                field="into",
                value=into,
                allowed="another project",
            )
        if session.get(TargetShare, (target.id, pid)) is not None:
            raise Conflict(f"target {name} is shared into project {into} already", field="into")
        session.add(
            TargetShare(
                target_id=target.id, project_id=pid, shared_by=actor.name, shared_at=app.now()
            )
        )
        session.flush()
        extended = extend_jobs_to(session, app, actor, target).extended
        note.detail["extended"] = extended
        return extended


def unshare_target(app: App, actor: Actor, name: str, out_of: str) -> int:
    """Stop sharing target ``name`` into project ``out_of``: the assignments of that
    project's bulk jobs on it go (refused while one of its individual jobs runs there);
    returns how many."""
    note = AuditNote("target.unshare", target_name=name, detail={"project": out_of})
    with audited(app, actor, note) as session:
        actor.authorize("project.share")
        target = get_target(session, name, place(session, actor))
        note.target_id = target.id
        pid = project_id(session, out_of)
        if session.get(TargetShare, (target.id, pid)) is None:
            raise NotFound(f"share into project {out_of} of target", name, field="project")
        theirs = select(Job.id).where(Job.project_id == pid)
        pinned = session.scalar(
            select(Job.name).where(Job.target_id == target.id, Job.project_id == pid).limit(1)
        )
        if pinned is not None:
            raise Conflict(
                f"job {pinned} of project {out_of} runs on target {name}; remove it first",
                field="project",
            )
        gone = session.execute(
            delete(Assignment).where(
                Assignment.target_id == target.id, Assignment.job_id.in_(theirs)
            )
        ).rowcount  # type: ignore[attr-defined]
        session.execute(
            delete(TargetShare).where(
                TargetShare.target_id == target.id, TargetShare.project_id == pid
            )
        )
        note.detail["assignments"] = int(gone or 0)
        return int(gone or 0)


def shared_into(app: App, actor: Actor, name: str) -> list[str]:
    """The projects target ``name`` (of the project ``actor`` acts in) is shared into."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        target = get_target(session, name, place(session, actor))
        rows = session.scalars(
            select(Project.name)
            .join(TargetShare, TargetShare.project_id == Project.id)
            .where(TargetShare.target_id == target.id)
            .order_by(Project.name)
        )
        return list(rows)


@dataclass(frozen=True)
class Sharing:
    """Where a target is shared, as its page shows it in the project it is seen from."""

    #: the project that holds it, when it is shared into the one it is seen from
    owner: str | None
    #: the projects it is shared into, when the project it is seen from holds it
    into: list[str]


def sharing(app: App, actor: Actor, name: str) -> Sharing:
    """Where target ``name``, as the project ``actor`` acts in sees it, is shared: into
    which projects (it is the project's own), or from which project (shared into it)."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        pid = place(session, actor)
        target = get_target(session, name, pid, shared=True)
        if target.project_id != pid:
            return Sharing(project_name(session, target.project_id), [])
        rows = session.scalars(
            select(Project.name)
            .join(TargetShare, TargetShare.project_id == Project.id)
            .where(TargetShare.target_id == target.id)
            .order_by(Project.name)
        )
        return Sharing(None, list(rows))
