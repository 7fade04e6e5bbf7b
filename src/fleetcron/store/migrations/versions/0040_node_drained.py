"""cluster nodes: drained by an operator (the members placement moves their shards away)

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-06

``drained_at``: set by ``fleetcron cluster drain NODE``, cleared by ``cluster undrain``.
With ``FLEETCRON_SHARD_PLACEMENT=members`` a drained node takes no shard and hands its
shards to the others by draining handoffs; it stays drained across its restarts.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column: no table rebuild on SQLite.
    op.add_column("cluster_nodes", sa.Column("drained_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cluster_nodes") as batch:
        batch.drop_column("drained_at")
