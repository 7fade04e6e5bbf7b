"""Migration 0020 on SQLite: the tables whose ids history keeps are rebuilt with
AUTOINCREMENT, keeping every row (the assignments and tokens that refer to them too, which
a rebuild with foreign keys on would delete), the runs' search triggers, and an id
sequence that starts past every id history refers to."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from alembic import command
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import Engine, create_engine, func, select, text

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs.reads import RunFilter
from fleetcron.services.runs.search import search_runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import alembic_config, create_db_engine
from fleetcron.store.schema import Assignment, Job, Run
from integration.history.runs_helper import fire_minutes

ADMIN = Actor("admin", "admin")


def every_minute(name: str) -> JobSpec:
    return JobSpec(schedule="* * * * *", command=f"echo {name}")

REBUILT = ("targets", "jobs", "assignments", "runs", "api_tokens", "notification_rules")
MIGRATION = (
    Path(__file__).parents[3]
    / "src/fleetcron/store/migrations/versions/0020_ids_never_reused.py"
)


def table_sql(engine: Engine, table: str) -> str:
    with engine.connect() as conn:
        sql = conn.execute(
            text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"), {"t": table}
        ).scalar()
    assert isinstance(sql, str)
    return sql


def counts(app: App) -> dict[str, int]:
    with app.db.read() as session:
        return {
            "jobs": session.scalar(select(func.count(Job.id))) or 0,
            "assignments": session.scalar(select(func.count(Assignment.id))) or 0,
            "runs": session.scalar(select(func.count(Run.id))) or 0,
        }


@pytest.fixture
def old_app(tmp_path: Path, clock: FakeClock) -> App:
    """An app on a SQLite database at revision 0019 with two targets, three jobs, runs with
    output, a token, and the newest job removed (so its id is the largest plus one). The
    rows are written by today's code at the newest revision, then the schema is migrated
    down to 0019 (today's code writes the columns of later migrations)."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_db_engine(url)
    command.upgrade(alembic_config(engine=engine), "head")
    engine.dispose()
    app = App.open(make_settings(tmp_path / "data", url), clock=clock)
    users.add_user(app, ADMIN, "admin", "admin-password", "admin")
    users.create_token(app, ADMIN, "admin", "ci")
    for name in ("pbx1", "pbx2"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "reload", every_minute("reload"), bulk=True)
    jobs.add_job(app, ADMIN, "backup", every_minute("backup"), target="pbx1")
    jobs.add_job(app, ADMIN, "newest", every_minute("newest"), target="pbx2")
    outcomes = [("succeeded", 5)] * 4
    fire_minutes(app, clock, [outcomes], stdout=[["hello-from-before"] * 4])
    jobs.remove_job(app, ADMIN, "newest")
    command.downgrade(alembic_config(engine=app.db.engine), "0019")
    return app


def test_the_rebuild_keeps_every_row_and_ids_are_not_reused(
    old_app: App, clock: FakeClock
) -> None:
    app = old_app
    before = counts(app)
    with app.db.read() as session:
        removed = session.scalar(select(func.max(Run.job_id)))
    assert before == {"jobs": 2, "assignments": 3, "runs": 4}
    assert all("AUTOINCREMENT" not in table_sql(app.db.engine, t) for t in REBUILT)

    app.db.upgrade()

    assert app.db.current_revision() == app.db.head_revision()
    assert counts(app) == before  # nothing went with the rebuilt parents
    assert [t for t in REBUILT if "AUTOINCREMENT" not in table_sql(app.db.engine, t)] == []
    assert len(users.list_tokens(app, ADMIN, "admin")) == 1
    with app.db.engine.connect() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1  # back on
    jobs.add_job(app, ADMIN, "later", every_minute("later"), target="pbx2")
    with app.db.read() as session:
        later = session.scalar(select(Job.id).where(Job.name == "later"))
    assert removed is not None and later is not None and later > removed
    # The output search still finds the old runs and indexes new ones (the triggers).
    found = search_runs(app, ADMIN, RunFilter(grep="hello-from-before")).runs
    assert len(found) == 4
    fire_minutes(app, clock, [[("succeeded", 5)] * 4], stdout=[["after-the-migration"] * 4])
    assert len(search_runs(app, ADMIN, RunFilter(grep="after-the-migration")).runs) == 4
    app.close()


def test_downgrade_rebuilds_them_without_autoincrement_and_keeps_the_rows(
    old_app: App,
) -> None:
    app = old_app
    before = counts(app)
    app.db.upgrade()

    command.downgrade(alembic_config(engine=app.db.engine), "0019")

    assert counts(app) == before
    assert all("AUTOINCREMENT" not in table_sql(app.db.engine, t) for t in REBUILT)
    app.close()


def test_the_migration_refuses_to_run_with_foreign_keys_on(old_app: App) -> None:
    """Negative control: with foreign keys on, dropping the old ``jobs`` would delete every
    assignment (ON DELETE CASCADE); the migration refuses instead of losing them."""
    app = old_app
    before = counts(app)
    spec = importlib.util.spec_from_file_location("migration_0020", MIGRATION)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    engine = create_engine(str(app.db.engine.url))
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        context = MigrationContext.configure(conn)
        with Operations.context(context), pytest.raises(RuntimeError, match="foreign keys on"):
            migration.upgrade()
        conn.rollback()
    engine.dispose()
    assert counts(app) == before
    app.close()
