"""shards: the ownership row per shard, the shard of targets, runs and claims

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06

The fleet's work is divided into a fixed number of shards (``cluster_settings.shards``,
one row, fixed when the installation is created and never changed). SQLite installations
always have one shard. A PostgreSQL database created empty by this migration gets its
count from the first ``fleetcron init`` or the first start (``FLEETCRON_SHARDS``, default
64); a database that already holds targets or an ownership row keeps one shard, so that
every existing target, run and claim stays where it is: its ownership row becomes shard 0.
``cluster_ownership.shard`` is unique; ``targets.shard`` is the stable hash of the target's
id (``core.shards.shard_of``), copied to its runs and their execution claims.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_settings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shards", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_cluster_settings_one_row")),
        sa.CheckConstraint("shards >= 1", name=op.f("ck_cluster_settings_shards")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_settings")),
    )
    # A plain ADD COLUMN (SQLite has it for a column with a constant default): no rebuild,
    # so targets and runs keep AUTOINCREMENT and their id sequences.
    for table in ("cluster_ownership", "execution_claims", "runs", "targets"):
        op.add_column(
            table, sa.Column("shard", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    with op.batch_alter_table("cluster_ownership") as batch:
        batch.create_unique_constraint(op.f("uq_cluster_ownership_shard"), ["shard"])
    bind = op.get_bind()
    existing = bind.execute(
        sa.text("SELECT (SELECT count(*) FROM targets) + (SELECT count(*) FROM cluster_ownership)")
    ).scalar()
    if bind.dialect.name == "sqlite" or existing:
        bind.execute(
            sa.text(
                "INSERT INTO cluster_settings (id, shards, created_at) "
                "VALUES (1, 1, CURRENT_TIMESTAMP)"
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("cluster_ownership") as batch:
        batch.drop_constraint(op.f("uq_cluster_ownership_shard"), type_="unique")
    # targets and runs: a plain DROP COLUMN (SQLite 3.35+), no rebuild, so they keep
    # AUTOINCREMENT and the triggers of runs (its search index and counts).
    for table in ("targets", "runs"):
        op.drop_column(table, "shard")
    for table in ("execution_claims", "cluster_ownership"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("shard")
    op.drop_table("cluster_settings")
