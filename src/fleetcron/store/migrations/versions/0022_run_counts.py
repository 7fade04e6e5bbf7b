"""run_counts: runs per minute and status, kept by triggers on runs

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01

Health's counts of the day's runs by status read these rows (1,440 minutes) instead of the
day's runs. Triggers, not the store's code, keep them: every insert, status change and
delete of a run moves one count, whichever path writes it (the store, a restore, a bulk
load), in the writer's transaction; increments commute, so concurrent writers cannot
lose one. A count that reaches 0 is deleted. ``queued`` runs are not counted: either node
of a replicated pair may queue a run, and a row written by the node that is not the owner
would replace the owner's (logical replication applies whole rows; its apply worker does
not fire these triggers, the counts travel as rows). The owner counts the run when it
starts it. Filled here from the runs.

On SQLite the minute is the stored text cut to the minute (``YYYY-MM-DD HH:MM:00.000000``,
SQLAlchemy's format); on PostgreSQL ``date_trunc('minute', ...)``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# The stored text up to the minute's colon, then zero seconds (no colon in the literal:
# Alembic would read ":00" as a bind parameter).
SQLITE_MINUTE = "substr({row}.scheduled_for, 1, 17) || '00.000000'"


def _sqlite_add(row: str) -> str:
    return (
        f"INSERT INTO run_counts (minute, status, n) VALUES ({SQLITE_MINUTE.format(row=row)},"
        f" {row}.status, 1) ON CONFLICT (minute, status) DO UPDATE SET n = n + 1;"
    )


def _sqlite_remove(row: str) -> str:
    where = f"minute = {SQLITE_MINUTE.format(row=row)} AND status = {row}.status"
    return (
        f"UPDATE run_counts SET n = n - 1 WHERE {where};"
        f" DELETE FROM run_counts WHERE {where} AND n <= 0;"
    )


SQLITE = [
    "CREATE TRIGGER run_counts_insert AFTER INSERT ON runs WHEN new.status <> 'queued'"
    f" BEGIN {_sqlite_add('new')} END",
    "CREATE TRIGGER run_counts_delete AFTER DELETE ON runs WHEN old.status <> 'queued'"
    f" BEGIN {_sqlite_remove('old')} END",
    # Two triggers for an update, each doing its half only when its row is counted.
    "CREATE TRIGGER run_counts_update_old AFTER UPDATE OF status, scheduled_for ON runs"
    " WHEN old.status <> 'queued' AND (old.status IS NOT new.status"
    f" OR old.scheduled_for IS NOT new.scheduled_for) BEGIN {_sqlite_remove('old')} END",
    "CREATE TRIGGER run_counts_update_new AFTER UPDATE OF status, scheduled_for ON runs"
    " WHEN new.status <> 'queued' AND (old.status IS NOT new.status"
    f" OR old.scheduled_for IS NOT new.scheduled_for) BEGIN {_sqlite_add('new')} END",
]

POSTGRES = [
    """
CREATE FUNCTION run_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status
            AND NEW.scheduled_for = OLD.scheduled_for THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status <> 'queued' THEN
        UPDATE run_counts SET n = n - 1
            WHERE minute = date_trunc('minute', OLD.scheduled_for) AND status = OLD.status;
        DELETE FROM run_counts
            WHERE minute = date_trunc('minute', OLD.scheduled_for) AND status = OLD.status
            AND n <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status <> 'queued' THEN
        INSERT INTO run_counts (minute, status, n)
            VALUES (date_trunc('minute', NEW.scheduled_for), NEW.status, 1)
            ON CONFLICT (minute, status) DO UPDATE SET n = run_counts.n + 1;
    END IF;
    RETURN NULL;
END
$$
""",
    "CREATE TRIGGER run_counts_track AFTER INSERT OR DELETE OR UPDATE OF status, scheduled_for"
    " ON runs FOR EACH ROW EXECUTE FUNCTION run_counts_track()",
]

BACKFILL = {
    "sqlite": "INSERT INTO run_counts (minute, status, n) SELECT"
    f" {SQLITE_MINUTE.format(row='runs')}, status, count(*) FROM runs"
    " WHERE status <> 'queued' GROUP BY 1, 2",
    "postgresql": "INSERT INTO run_counts (minute, status, n) SELECT"
    " date_trunc('minute', scheduled_for), status, count(*) FROM runs"
    " WHERE status <> 'queued' GROUP BY 1, 2",
}


def upgrade() -> None:
    op.create_table(
        "run_counts",
        sa.Column("minute", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("minute", "status", name="pk_run_counts"),
    )
    dialect = op.get_bind().dialect.name
    op.execute(BACKFILL[dialect])
    for statement in SQLITE if dialect == "sqlite" else POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("insert", "delete", "update_old", "update_new"):
            op.execute(f"DROP TRIGGER IF EXISTS run_counts_{name}")
    else:
        op.execute("DROP TRIGGER IF EXISTS run_counts_track ON runs")
        op.execute("DROP FUNCTION IF EXISTS run_counts_track()")
    op.drop_table("run_counts")
