"""Migrations 0011 and 0018 on a database with jobs from before version history: each job
gets version 1 with its definition, tied to the job's creation time."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, text

from fleetcron.store.db import alembic_config


def test_jobs_from_before_history_get_their_first_version(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    command.upgrade(alembic_config(engine=engine), "0010")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO targets (id, name, kind, labels, notes, paired, paused,"
                " created_at, updated_at) VALUES (1, 'box', 'local', '{}', '', 1, 0,"
                " '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO jobs (id, name, origin, schedule, timezone, command, notes,"
                " selector, target_id, timeout_s, overlap, catchup, jitter_s, retries,"
                " retry_on, retry_backoff_s, allow_duplicate, created_by, updated_by,"
                " created_at, updated_at) VALUES (7, 'backup', 'individual', '0 2 * * *',"
                " 'UTC', 'backup.sh', '', '{}', 1, 60, 'allow', 'none', 0, 0, '[]', 30, 0,"
                " 'ann', 'bob', '2026-01-02 00:00:00', '2026-01-03 00:00:00')"
            )
        )

    command.upgrade(alembic_config(engine=engine), "head")

    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT job_id, version, source, actor, at, job_created_at, definition"
                " FROM job_versions"
            )
        ).one()
        version = conn.execute(text("SELECT version FROM jobs WHERE id = 7")).scalar()
    assert row[:5] == (7, 1, "migration", "bob", "2026-01-03 00:00:00.000000")
    assert str(row[5]).startswith("2026-01-02 00:00:00")
    assert '"command": "backup.sh"' in row[6] and '"target": "box"' in row[6]
    assert version == 1
    engine.dispose()
