"""shard pins: an operator's choice of the node that runs a shard

Revision ID: 0042
Revises: 0041
Create Date: 2026-12-06

One row per pinned shard (``fleetcron cluster shard move S --to NODE``; deleted by ``cluster
shard unpin S``): the node, who pinned it and when. With
``FLEETCRON_SHARD_PLACEMENT=members`` the placement puts a pinned shard on its node while
that node is an eligible live member (approved, not fenced, not drained), and places it as
any other otherwise; the shard moves by the usual draining handoff.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shard_pins",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("pinned_by", sa.String(length=64), nullable=False),
        sa.Column("pinned_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("shard >= 0", name=op.f("ck_shard_pins_shard")),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_shard_pins")),
    )


def downgrade() -> None:
    op.drop_table("shard_pins")
