"""target pause and the per-job flags an unpair remembers

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.add_column(sa.Column("paused_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("paused_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("paused_by", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("unpaired_disabled_jobs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.drop_column("unpaired_disabled_jobs")
        batch_op.drop_column("paused_by")
        batch_op.drop_column("paused_at")
        batch_op.drop_column("paused_reason")
        batch_op.drop_column("paused")
