"""job spread: the window over which a slot's starts are spread

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01

``spread_s``: seconds; each target of the job starts at its own stable offset inside the
window (``core.planning.spread_offset``). 0: off, so existing jobs start as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("spread_s", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("spread_s")
