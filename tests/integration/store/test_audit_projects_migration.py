"""Migration 0037 on a database with audit events (SQLite and PostgreSQL): each event about
an object that still exists gets its project (from ``job_id``, ``target_id``, the run its
detail names, the project a ``project.*`` event names), the others none (the whole
install); every role in a project granted before is one granted by hand."""

from __future__ import annotations

from alembic import command
from sqlalchemy import select, text

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.runs import reads as run_reads
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import alembic_config
from fleetcron.store.schema import AuditEvent, Project, ProjectRole

ADMIN = Actor("admin", "admin")


def add_data(app: App) -> None:
    projects.add_project(app, ADMIN, "pbx")
    pbx = ADMIN.within("pbx")
    targets.add_target(app, pbx, TargetSpec("pbx1", TargetKind.LOCAL))
    spec = JobSpec(schedule="0 3 * * *", command="reload")
    jobs.add_job(app, pbx, "reload", spec, target="pbx1")
    jobs.add_job(app, ADMIN, "backup", JobSpec(schedule="0 2 * * *", command="b"), bulk=True)
    run_reads.stop_run(app, pbx, run_reads.request_run(app, pbx, "reload")[0])
    users.add_user(app, ADMIN, "pam", "pam-password-1", "none")
    projects.grant(app, ADMIN, "pbx", "pam", "operator")
    jobs.add_job(app, pbx, "gone", JobSpec(schedule="0 4 * * *", command="g"), target="pbx1")
    jobs.remove_job(app, pbx, "gone")


def projects_by_action(app: App) -> dict[str, set[str | None]]:
    with app.db.read() as session:
        rows = session.execute(
            select(AuditEvent.action, AuditEvent.job_name, Project.name).outerjoin(
                Project, Project.id == AuditEvent.project_id
            )
        )
        found: dict[str, set[str | None]] = {}
        for action, job, project in rows:
            found.setdefault(f"{action} {job or ''}".strip(), set()).add(project)
        return found


def test_an_upgrade_gives_old_events_the_project_of_their_object(app: App) -> None:
    add_data(app)
    config = alembic_config(engine=app.db.engine)
    command.downgrade(config, "0036")
    with app.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM audit_events")).scalar()

    command.upgrade(config, "head")

    found = projects_by_action(app)
    assert found["job.add reload"] == {"pbx"}
    assert found["job.add backup"] == {"default"}
    assert found["target.add"] == {"pbx"}
    assert found["job.run reload"] == {"pbx"}
    assert found["run.stop reload"] == {"pbx"}
    assert found["project.grant"] == {"pbx"}
    assert found["project.add"] == {"pbx"}
    # The removed job's events: its project is no longer known, so the whole install's.
    assert found["job.remove gone"] == {None}
    assert found["user.add"] == {None}
    with app.db.read() as session:
        assert set(session.scalars(select(ProjectRole.source))) == {"manual"}


def test_the_code_names_the_project_of_a_removed_job(app: App) -> None:
    """Negative control of the one difference: today's code writes the project of a
    removed job's events (where it was looked up), which the upgrade cannot know."""
    add_data(app)
    assert projects_by_action(app)["job.remove gone"] == {"pbx"}
