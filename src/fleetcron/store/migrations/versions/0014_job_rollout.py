"""rollout options of a job: batch, batch_pause_s, max_failures, canary

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01

``batch`` and ``max_failures``: a count or a percentage of the slot's targets (``10``,
``10%``); ``canary``: target names or a label selector; empty: not set (every existing job
keeps firing all its targets at once).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("batch", sa.String(length=8), server_default="", nullable=False)
        )
        batch_op.add_column(
            sa.Column("batch_pause_s", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("max_failures", sa.String(length=8), server_default="", nullable=False)
        )
        batch_op.add_column(sa.Column("canary", sa.Text(), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("canary")
        batch_op.drop_column("max_failures")
        batch_op.drop_column("batch_pause_s")
        batch_op.drop_column("batch")
