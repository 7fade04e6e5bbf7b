"""cluster members: the scheduler processes that may own shards

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-06

One row per member: a node's scheduler process (``worker``: its index on the node), its
weight (its share of the shards; 0 while it drains) and its heartbeat lease on the
database clock. Nothing reads it to place shards yet: one node still owns every shard.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("worker", sa.Integer(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("worker >= 0", name=op.f("ck_cluster_members_worker")),
        sa.CheckConstraint("weight >= 0", name=op.f("ck_cluster_members_weight")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_members")),
        sa.UniqueConstraint("node_id", "worker", name=op.f("uq_cluster_members_node_worker")),
    )


def downgrade() -> None:
    op.drop_table("cluster_members")
