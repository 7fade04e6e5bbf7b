"""jobs: a DST policy and how long runs are kept by outcome

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06

``dst_gap`` and ``dst_fold`` (``cron/dst.py``) say what a time skipped or repeated by a DST
transition does; existing jobs get ``cronie``, Debian cron's rule, which every job followed
until now. ``keep_successes_days`` and ``keep_failures_days`` override the retention
settings for one job; existing jobs get 0, the settings' (unchanged behaviour).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("dst_gap", sa.String(length=16), server_default="cronie", nullable=False)
        )
        batch.add_column(
            sa.Column("dst_fold", sa.String(length=16), server_default="cronie", nullable=False)
        )
        batch.add_column(
            sa.Column("keep_successes_days", sa.Integer(), server_default="0", nullable=False)
        )
        batch.add_column(
            sa.Column("keep_failures_days", sa.Integer(), server_default="0", nullable=False)
        )
        batch.create_check_constraint("dst_gap", "dst_gap IN ('cronie', 'run_at_gap_end', 'skip')")
        batch.create_check_constraint("dst_fold", "dst_fold IN ('cronie', 'first', 'both', 'last')")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_dst_fold"), type_="check")
        batch.drop_constraint(op.f("ck_jobs_dst_gap"), type_="check")
        batch.drop_column("keep_failures_days")
        batch.drop_column("keep_successes_days")
        batch.drop_column("dst_fold")
        batch.drop_column("dst_gap")
