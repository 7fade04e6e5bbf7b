"""notification rules: consecutive failures before firing, successes before resolving;
an index for the retention of resolved incidents

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-06

A rule may wait for N consecutive failed slots of a target before it hears of it, and keep
a target in its incident until M consecutive successes (``core/incidents.Thresholds``).
Existing rules get 1 and 1: the first failure and the first success, as before.
Retention prunes incidents resolved more than ``incident_retention_days`` ago, oldest
first, through ``ix_incidents_resolved_at``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notification_rules") as batch:
        batch.add_column(
            sa.Column("failures_before", sa.Integer(), server_default="1", nullable=False)
        )
        batch.add_column(
            sa.Column("successes_before", sa.Integer(), server_default="1", nullable=False)
        )
    op.create_index("ix_incidents_resolved_at", "incidents", ["resolved_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_incidents_resolved_at", table_name="incidents")
    with op.batch_alter_table("notification_rules") as batch:
        batch.drop_column("successes_before")
        batch.drop_column("failures_before")
