"""Migration 0038 on a database with incidents (SQLite and PostgreSQL): a job's incident
lands in its job's project, a host incident in its target's, and the incident of a job
removed since in ``default``."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import alembic_config
from fleetcron.store.schema import Incident, Job, Project, Target

ADMIN = Actor("admin", "admin")
OPENED = datetime(2026, 3, 2, 9, tzinfo=UTC)


def incidents_of(app: App) -> dict[str, str]:
    """Each incident's job (or host) -> the name of its project."""
    with app.db.read() as session:
        rows = session.execute(
            select(Incident.job_name, Incident.target_name, Project.name)
            .join(Project, Project.id == Incident.project_id)
            .order_by(Incident.id)
        ).all()
    return {job or f"host {host}": project for job, host, project in rows}


def test_an_upgrade_puts_each_incident_in_its_jobs_or_targets_project(app: App) -> None:
    projects.add_project(app, ADMIN, "team-b")
    admin = ADMIN.within("team-b")
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="box")
    with app.db.session() as session:
        job_id = session.scalar(select(Job.id).where(Job.name == "backup"))
        target_id = session.scalar(select(Target.id).where(Target.name == "box"))
        common = {"opened_at": OPENED, "status": "open", "previous_state": "ok", "reason": ""}
        session.execute(
            insert(Incident),
            [
                {"job_id": job_id, "job_name": "backup", "cause": "failing", **common},
                {"job_id": 9999, "job_name": "removed", "cause": "failing", **common},
                {
                    "job_id": 0,
                    "job_name": "",
                    "cause": "unreachable",
                    "target_id": target_id,
                    "target_name": "box",
                    **common,
                },
            ],
        )
    config = alembic_config(engine=app.db.engine)
    command.downgrade(config, "0036")

    command.upgrade(config, "head")

    assert incidents_of(app) == {
        "backup": "team-b",
        "removed": "default",
        "host box": "team-b",
    }
