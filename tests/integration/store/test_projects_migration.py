"""Migration 0035 on a database with data (SQLite and PostgreSQL): every job, target,
silence and blackout window lands in ``default``, every user keeps exactly the rights it
had, and the id sequences of the rebuilt tables go on past every id given before."""

from __future__ import annotations

from alembic import command
from sqlalchemy import func, select, text

from fleetcron.app import Actor, App
from fleetcron.core.permissions import MATRIX, allowed, may
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.alerts.silences import SilenceSpec, add_silence
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import alembic_config
from fleetcron.store.schema import Job, Project, Silence, Target

ADMIN = Actor("admin", "admin")
OWNED = ("jobs", "targets", "silences", "notification_rules", "blackouts")
PROJECTS = ("default", "elsewhere")


def rights(app: App) -> dict[str, dict[tuple[str, str | None], bool]]:
    """What each user may do, globally and in each project, as the decision says."""
    table = {}
    for user in users.list_users(app, ADMIN):
        actor = users.actor_for(app, user.name)
        table[user.name] = {
            (action, project): may(actor, action, project)
            for action in MATRIX
            for project in (None, *PROJECTS)
        }
    return table


def expected_rights(app: App) -> dict[str, dict[tuple[str, str | None], bool]]:
    """Before projects: each user's role decided everything, everywhere."""
    return {
        user.name: {
            (action, project): allowed(user.role, action)
            for action in MATRIX
            for project in (None, *PROJECTS)
        }
        for user in users.list_users(app, ADMIN)
    }


def add_data(app: App) -> int:
    """Targets, jobs and a silence written by today's code; the newest target removed.
    Returns the removed target's id."""
    for name in ("pbx1", "pbx2", "gone"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec(schedule="0 * * * *", command="reload")
    jobs.add_job(app, ADMIN, "reload", spec, bulk=True)
    jobs.add_job(app, ADMIN, "backup", JobSpec(schedule="0 2 * * *", command="b"), target="pbx1")
    add_silence(app, ADMIN, SilenceSpec(reason="maintenance", job="reload", duration_s=600))
    with app.db.read() as session:
        gone = session.scalar(select(Target.id).where(Target.name == "gone"))
    targets.remove_target(app, ADMIN, "gone")
    assert gone is not None
    return gone


def test_an_upgrade_puts_everything_in_default_and_keeps_every_users_rights(app: App) -> None:
    removed = add_data(app)
    before = expected_rights(app)
    config = alembic_config(engine=app.db.engine)
    command.downgrade(config, "0034")
    with app.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar() == 2

    command.upgrade(config, "head")

    with app.db.read() as session:
        assert list(session.scalars(select(Project.name))) == ["default"]
        default = session.scalar(select(Project.id).where(Project.name == "default"))
        for table in OWNED:
            outside = session.execute(
                text(f"SELECT count(*) FROM {table} WHERE project_id <> :d"), {"d": default}
            ).scalar()
            assert outside == 0, table
        assert session.scalar(select(func.count(Job.id))) == 2
        assert session.scalar(select(func.count(Silence.id))) == 1
    assert rights(app) == before
    # The rebuilt targets table gives no removed target's id again.
    targets.add_target(app, ADMIN, TargetSpec("later", TargetKind.LOCAL))
    with app.db.read() as session:
        later = session.scalar(select(Target.id).where(Target.name == "later"))
    assert later is not None and later > removed


def test_negative_control_a_user_who_lost_its_global_role_is_caught(app: App) -> None:
    """The rights comparison fails when one user's rights changed: here the viewer's
    global role is taken away, as a migration that moved roles into projects would do."""
    before = expected_rights(app)
    users.set_role(app, ADMIN, "victor", "none")
    after = rights(app)
    assert after != before
    assert after["admin"] == before["admin"]
    assert not after["victor"][("job.read", "default")]
