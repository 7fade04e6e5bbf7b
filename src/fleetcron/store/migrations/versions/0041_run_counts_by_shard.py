"""run_counts by shard: a node's workers never write the same count row

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-06

The counts of migration 0022 get the run's ``shard`` in their key (minute, status, shard).
The workers of a node (``fleetcron scheduler --workers N``) own disjoint shards, so their
claim transactions, whose triggers move the minute's counts, no longer wait for each other
on the same rows until commit.

A row of shard ``-1`` is a *compacted* count: the scheduler's housekeeping folds the rows
of minutes older than a few minutes into it (``store/run_counts.compact``), so health reads
one row per minute and status, not one per shard. The triggers never write shard ``-1``; a
late change of a compacted minute (a long run finishing later) moves its shard's row
again, which may then hold a negative count (its run was counted in the compacted row):
a count is the sum of its minute's rows, and a row is deleted when it reaches 0 exactly,
never below (a decrement dropped at ``n <= 0``, as 0022 did, would lose it). The rows there
are become compacted rows; queued runs are still not counted (0022 says why).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None

#: The shard of a compacted count (every shard's runs of its minute and status).
COMPACTED = -1

SQLITE_MINUTE = "substr({row}.scheduled_for, 1, 17) || '00.000000'"


def _sqlite_move(row: str, delta: int) -> str:
    minute = SQLITE_MINUTE.format(row=row)
    where = f"minute = {minute} AND status = {row}.status AND shard = {row}.shard"
    return (
        f"INSERT INTO run_counts (minute, status, shard, n) VALUES ({minute}, {row}.status,"
        f" {row}.shard, {delta}) ON CONFLICT (minute, status, shard)"
        f" DO UPDATE SET n = n + ({delta}); DELETE FROM run_counts WHERE {where} AND n = 0;"
    )


SQLITE = [
    "CREATE TRIGGER run_counts_insert AFTER INSERT ON runs WHEN new.status <> 'queued'"
    f" BEGIN {_sqlite_move('new', 1)} END",
    "CREATE TRIGGER run_counts_delete AFTER DELETE ON runs WHEN old.status <> 'queued'"
    f" BEGIN {_sqlite_move('old', -1)} END",
    "CREATE TRIGGER run_counts_update_old AFTER UPDATE OF status, scheduled_for ON runs"
    " WHEN old.status <> 'queued' AND (old.status IS NOT new.status"
    f" OR old.scheduled_for IS NOT new.scheduled_for) BEGIN {_sqlite_move('old', -1)} END",
    "CREATE TRIGGER run_counts_update_new AFTER UPDATE OF status, scheduled_for ON runs"
    " WHEN new.status <> 'queued' AND (old.status IS NOT new.status"
    f" OR old.scheduled_for IS NOT new.scheduled_for) BEGIN {_sqlite_move('new', 1)} END",
]

COUNTED = (
    "SELECT date_trunc('minute', scheduled_for) AS minute, status, shard, {sign} AS d"
    " FROM {rows} WHERE status <> 'queued'"
)

# The counts are upserted in key order: two statements that change overlapping counts
# (two schedulers claiming runs of the same shards) lock them in the same order and never
# wait for each other in a cycle. The rows the DELETE removes are those the INSERT just
# brought to 0, already locked by it.
APPLY = """
    INSERT INTO run_counts (minute, status, shard, n)
        SELECT minute, status, shard, sum(d) FROM ({changes}) AS changes
        GROUP BY minute, status, shard HAVING sum(d) <> 0
        ORDER BY minute, status, shard
        ON CONFLICT (minute, status, shard) DO UPDATE SET n = run_counts.n + excluded.n;
    DELETE FROM run_counts USING
        (SELECT DISTINCT minute, status, shard FROM ({changes}) AS c) AS k
        WHERE run_counts.minute = k.minute AND run_counts.status = k.status
        AND run_counts.shard = k.shard AND run_counts.n = 0;
"""

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

POSTGRES = [
    statement
    for name, (event, referencing, changes) in PG_TRIGGERS.items()
    for statement in (
        f"CREATE FUNCTION run_counts_{name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f"{APPLY.format(changes=changes)} RETURN NULL; END $$",
        f"CREATE TRIGGER run_counts_{name} AFTER {event} ON runs REFERENCING {referencing}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION run_counts_{name}()",
    )
]

SQLITE_NAMES = ("insert", "delete", "update_old", "update_new")


def _drop_triggers(dialect: str) -> None:
    for name in SQLITE_NAMES if dialect == "sqlite" else tuple(PG_TRIGGERS):
        if dialect == "sqlite":
            op.execute(f"DROP TRIGGER IF EXISTS run_counts_{name}")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS run_counts_{name} ON runs")
            op.execute(f"DROP FUNCTION IF EXISTS run_counts_{name}()")


def _sqlite_rebuild(*, shard: bool, copy: str) -> None:
    """SQLite cannot change a primary key: a new table (run_counts is small: a day's
    minutes by status), the rows copied by ``copy`` (from ``run_counts_old``)."""
    op.rename_table("run_counts", "run_counts_old")
    columns: list[sa.Column[Any]] = [
        sa.Column("minute", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
    ]
    key = ["minute", "status"]
    if shard:
        columns.append(sa.Column("shard", sa.Integer(), nullable=False))
        key.append("shard")
    op.create_table(
        "run_counts",
        *columns,
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(*key, name="pk_run_counts"),
    )
    op.execute(copy)
    op.drop_table("run_counts_old")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _drop_triggers(dialect)
    if dialect == "sqlite":
        _sqlite_rebuild(
            shard=True,
            copy="INSERT INTO run_counts (minute, status, shard, n)"
            f" SELECT minute, status, {COMPACTED}, n FROM run_counts_old",
        )
        for statement in SQLITE:
            op.execute(statement)
        return
    op.add_column(
        "run_counts",
        sa.Column("shard", sa.Integer(), nullable=False, server_default=str(COMPACTED)),
    )
    op.alter_column("run_counts", "shard", server_default=None)
    op.drop_constraint("pk_run_counts", "run_counts", type_="primary")
    op.create_primary_key("pk_run_counts", "run_counts", ["minute", "status", "shard"])
    for statement in POSTGRES:
        op.execute(statement)


def _revision_0022() -> ModuleType:
    path = Path(__file__).with_name("0022_run_counts.py")
    spec = importlib.util.spec_from_file_location("fleetcron_migration_0022", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _drop_triggers(dialect)
    folded = (
        "INSERT INTO run_counts (minute, status, n) SELECT minute, status, sum(n)"
        " FROM {table} GROUP BY minute, status HAVING sum(n) <> 0"
    )
    if dialect == "sqlite":
        _sqlite_rebuild(shard=False, copy=folded.format(table="run_counts_old"))
    else:
        op.execute("CREATE TEMPORARY TABLE run_counts_folded AS SELECT * FROM run_counts")
        op.execute("DELETE FROM run_counts")
        op.drop_constraint("pk_run_counts", "run_counts", type_="primary")
        op.drop_column("run_counts", "shard")
        op.create_primary_key("pk_run_counts", "run_counts", ["minute", "status"])
        op.execute(folded.format(table="run_counts_folded"))
        op.execute("DROP TABLE run_counts_folded")
    v0022 = _revision_0022()
    for statement in v0022.SQLITE if dialect == "sqlite" else v0022.POSTGRES:
        op.execute(statement)
