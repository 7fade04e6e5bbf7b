"""run_counts: runs per minute and status, kept by triggers on runs

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01

Health's counts of the day's runs by status read these rows (1,440 minutes) instead of the
day's runs. Triggers, not the store's code, keep them: every insert, status change and
delete of a run moves its count, whichever path writes it (the store, a restore, a bulk
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

COUNTED = (
    "SELECT date_trunc('minute', scheduled_for) AS minute, status, {sign} AS d"
    " FROM {rows} WHERE status <> 'queued'"
)

# One snapshot serves every part of a statement, so the counts that reached 0 are deleted
# by a second statement, which sees the first one's result.
APPLY = """
    INSERT INTO run_counts (minute, status, n)
        SELECT minute, status, sum(d) FROM ({changes}) AS changes
        GROUP BY minute, status HAVING sum(d) <> 0
        ON CONFLICT (minute, status) DO UPDATE SET n = run_counts.n + excluded.n;
    DELETE FROM run_counts USING (SELECT DISTINCT minute, status FROM ({changes}) AS c) AS k
        WHERE run_counts.minute = k.minute AND run_counts.status = k.status
        AND run_counts.n <= 0;
"""


def _pg_function(name: str, changes: str) -> str:
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f"{APPLY.format(changes=changes)} RETURN NULL; END $$"
    )


PG_TRIGGERS = {
    "insert": ("INSERT", "NEW TABLE AS new_rows", COUNTED.format(sign=1, rows="new_rows")),
    "delete": ("DELETE", "OLD TABLE AS old_rows", COUNTED.format(sign=-1, rows="old_rows")),
    "update": (
        "UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        COUNTED.format(sign=1, rows="new_rows")
        + " UNION ALL "
        + COUNTED.format(sign=-1, rows="old_rows"),
    ),
}

# PostgreSQL: statement triggers over the statement's transition tables, one change per
# count per statement. A row trigger updates the same count row once per run, and in one
# transaction every update of a row adds a version the next one walks past: 5,000 runs
# changing status in one statement took 2.9 s so (0.25 s without a trigger). An update's
# change is its new rows counted minus its old rows counted: rows whose status and minute
# stayed the same cancel out.
POSTGRES = [
    statement
    for op_name, (event, referencing, changes) in PG_TRIGGERS.items()
    for statement in (
        _pg_function(f"run_counts_{op_name}", changes),
        f"CREATE TRIGGER run_counts_{op_name} AFTER {event} ON runs REFERENCING {referencing}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION run_counts_{op_name}()",
    )
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
    sqlite = op.get_bind().dialect.name == "sqlite"
    names = ("insert", "delete", "update_old", "update_new") if sqlite else tuple(PG_TRIGGERS)
    for name in names:
        op.execute(f"DROP TRIGGER IF EXISTS run_counts_{name}" + ("" if sqlite else " ON runs"))
        if not sqlite:
            op.execute(f"DROP FUNCTION IF EXISTS run_counts_{name}()")
    op.drop_table("run_counts")
