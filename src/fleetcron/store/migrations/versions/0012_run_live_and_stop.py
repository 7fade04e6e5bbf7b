"""runs: a stop request (who asked, when) and a periodic snapshot of a running run's output

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

``stop_requested_by``/``stop_requested_at``: a stop asked for on any node; the owner
picks it up on its next tick and kills the run (a ``cancelled`` run keeps them, so they say
who stopped it). ``live_output``/``live_bytes``/``live_at``: the tail of a running run's
output (stdout and stderr interleaved) as the owner last wrote it, for readers in other
processes (the CLI, other nodes' pages).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stop_requested_by", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("stop_requested_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("live_output", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("live_bytes", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("live_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("live_at")
        batch_op.drop_column("live_bytes")
        batch_op.drop_column("live_output")
        batch_op.drop_column("stop_requested_at")
        batch_op.drop_column("stop_requested_by")
